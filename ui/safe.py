"""User text shown inside the app's markdown: escaped, never live.

Anything a visitor controls (a URL value or parameter name, a file name, a tensor
key, a loader's message quoting them) goes through `md_text` (plain text) or
`md_code` (a code span) before it reaches st.markdown, st.warning, st.error... so
no link, image, HTML, colour directive (`:red[...]`), math (`$...$`), emphasis or
code span can start or end inside it.
"""

from __future__ import annotations

import re

# CommonMark lets a backslash escape any ASCII punctuation character, and only those;
# escaping every one of them leaves nothing that can open or close a construct
# (Streamlit's extensions, `:colour[...]`, `:icon:`, `$math$`, included).
_PUNCT = re.compile(r"""([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~])""")
_BACKTICKS = re.compile(r"`+")


def plain(value: object, limit: int = 60) -> str:
    """`value` as one line of printable text, cut to `limit` characters (before
    escaping): line breaks and runs of white space become one space, characters that
    do not print (controls, bidi overrides, zero-width marks) become U+FFFD."""
    s = " ".join(str(value).split())
    if len(s) > limit:
        s = s[:limit] + "…"
    return "".join(c if c.isprintable() else "\ufffd" for c in s)


def md_text(value: object, limit: int = 60) -> str:
    """`value` as literal text inside markdown: cut to `limit` characters, every
    ASCII punctuation character backslash-escaped, line breaks flattened."""
    return _PUNCT.sub(r"\\\1", plain(value, limit))


def md_code(value: object, limit: int = 60) -> str:
    """`value` as a literal inline code span: fenced by one more backtick than its
    longest run of backticks (so none inside can close it), padded with a space when
    it starts or ends with one. Inside a code span nothing is markdown."""
    s = plain(value, limit)
    if not s:
        return "` `"
    fence = "`" * (1 + max((len(m) for m in _BACKTICKS.findall(s)), default=0))
    pad = " " if s[0] == "`" or s[-1] == "`" else ""
    return f"{fence}{pad}{s}{pad}{fence}"
