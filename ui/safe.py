"""User text shown inside the app's markdown: escaped, never live."""

from __future__ import annotations

import re

# Every character CommonMark (and Streamlit's extensions: :colour[...], $math$) gives a meaning.
_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~:$=&\"'])")


def md_text(value: object, limit: int = 60) -> str:
    """`value` as literal text inside markdown: cut to `limit` characters, every
    markdown character escaped, line breaks flattened."""
    s = str(value)
    if len(s) > limit:
        s = s[:limit] + "…"
    s = " ".join(s.split())
    return _SPECIAL.sub(r"\\\1", s)
