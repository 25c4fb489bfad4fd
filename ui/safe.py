"""What a visitor sends, made safe: user text shown inside the app's markdown
(escaped, never live), and widget values checked against what the widget offered.

A modified client can send any value for any widget. Streamlit passes a string it does
not know through as the value of a selectbox, a radio or a multiselect, and a chart's
selection event is whatever JSON arrived; a callback or page that indexes with such a
value would raise. `offered`, `offered_all` and `points` keep what the widget offered
and drop the rest, quietly (a crafted value is nobody's honest click).

Anything a visitor controls (a URL value or parameter name, a file name, a tensor
key, a loader's message quoting them) goes through `md_text` (plain text) or
`md_code` (a code span) before it reaches st.markdown, st.warning, st.error... so
no link, image, HTML, colour directive (`:red[...]`), math (`$...$`), emphasis,
code span, emoji or icon shortcode can start or end inside it.

Streamlit's markdown acts at three levels, and each is closed:
- the source: ":material/" is rewritten to an icon before parsing, code spans
  included (a joiner after every ":" in text; a code span split around it);
- the syntax (CommonMark, GFM, directives, math): every character that can open or
  close a construct is backslash-escaped in text; nothing is syntax in a code span;
- the parsed text: remark-gfm links bare `http://`, `www.` and e-mail addresses and
  remark-emoji turns `:smile:` into 😄 after escapes are resolved, so an invisible
  WORD JOINER (U+2060) goes after every ":" and "@" and inside "www.". Code spans
  are not text: they need none.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TypeVar

T = TypeVar("T")
D = TypeVar("D")

# Every character CommonMark (and Streamlit's extensions: :colour[...], $math$) gives a meaning.
_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~:$=&\"'])")
JOINER = "\u2060"  # WORD JOINER: invisible, breaks a pattern without a visible change
_AFTER = re.compile(r"([:@])")  # shortcodes, URL schemes, e-mail addresses
_WWW = re.compile(r"(?i)(www)(?=\.)")
_BACKTICKS = re.compile(r"`+")
_ICON = ":material/"  # Streamlit's icon prefix, rewritten in the source before parsing


def plain(value: object, limit: int = 60) -> str:
    """`value` as one line of printable text, cut to `limit` characters (before
    escaping): line breaks and runs of white space become one space, characters that
    do not print (controls, bidi overrides, zero-width marks) become U+FFFD."""
    s = " ".join(str(value).split())
    if len(s) > limit:
        s = s[:limit] + "…"
    return "".join(c if c.isprintable() else "\ufffd" for c in s)


def md_text(value: object, limit: int = 60) -> str:
    """`value` as literal text inside markdown: cut to `limit` characters, line
    breaks flattened, every markdown character backslash-escaped, and a JOINER where
    Streamlit would otherwise make a link, an emoji or an icon of the text."""
    s = _WWW.sub(r"\1" + JOINER, _AFTER.sub(r"\1" + JOINER, plain(value, limit)))
    return _SPECIAL.sub(r"\\\1", s)


def md_code(value: object, limit: int = 60) -> str:
    """`value` as literal inline code: fenced by one more backtick than its longest run
    of backticks (so none inside can close it), padded with a space when it starts or
    ends with one. Inside a code span nothing is markdown.

    One exception: Streamlit rewrites ":material/" to ":material_" anywhere in the
    source (its icon syntax), code spans included; such a value is split there into two
    code spans around an escaped "/", which shows the same characters.
    """
    s = plain(value, limit)
    if not s:
        return "` `"
    head, *rest = s.split(_ICON)
    spans = [head + _ICON[:-1], *(p + _ICON[:-1] for p in rest[:-1]), *rest[-1:]]
    return "\\/".join(_span(p) for p in spans) if rest else _span(s)


def _span(s: str) -> str:
    if not s:
        return ""
    fence = "`" * (1 + max((len(m) for m in _BACKTICKS.findall(s)), default=0))
    pad = " " if s[0] == "`" or s[-1] == "`" else ""
    return f"{fence}{pad}{s}{pad}{fence}"


# ---- widget values: only what the widget offered -------------------------------------


def _among(value: object, options: Iterable[object]) -> bool:
    """`value` is one of `options`, of the same type (True is not the option 1)."""
    if isinstance(options, range):
        return type(value) is int and value in options
    return any(type(value) is type(o) and value == o for o in options)


def offered(value: object, options: Iterable[T], default: D) -> T | D:
    """`value` if it is one of `options` (what the widget offered), else `default`."""
    return value if _among(value, options) else default  # type: ignore[return-value]


def offered_all(values: object, options: Iterable[T]) -> list[T]:
    """The items of `values` (a list or tuple) that are among `options`, in their order,
    each once; [] for anything else."""
    if not isinstance(values, list | tuple):
        return []
    opts = options if isinstance(options, range) else list(options)
    out: list = []
    for v in values:
        if _among(v, opts) and not _among(v, out):
            out.append(v)
    return out


def points(event: object) -> list[Mapping]:
    """The selected points of a chart's selection event, `{"selection": {"points":
    [...]}}` as Streamlit stores it: only the points that are mappings; [] for any
    other shape."""
    sel = event.get("selection") if isinstance(event, Mapping) else None
    pts = sel.get("points") if isinstance(sel, Mapping) else None
    return [p for p in pts if isinstance(p, Mapping)] if isinstance(pts, list | tuple) else []


def cell(value: object, shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """`value` as a cell of a tensor of `shape`: a list or tuple of one whole number per
    axis, each in 0..size−1 (True is not 1); None for anything else."""
    if not isinstance(value, list | tuple) or len(value) != len(shape):
        return None
    if not all(_among(i, range(n)) for i, n in zip(value, shape, strict=True)):
        return None
    return tuple(int(i) for i in value)
