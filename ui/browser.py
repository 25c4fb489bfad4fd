"""The browser's id: a random cookie that makes a student one browser, not one session.

Streamlit reads cookies (`st.context.cookies`, from the page's first request) but a
script cannot set one, so the server sets it: `streamlit run app.py` serves app.py's
`st.App`, whose middleware `BrowserId` adds an HttpOnly, SameSite=Lax cookie to an
HTML page response that came without one. A reload, a reconnect, a move to another
process behind nginx or a restarted server then sends the same id, and the live class
(normviz.classroom) keys a student's answers and a teacher's role on it. Without a
cookie (AppTest, a browser that refuses cookies) `browser_id()` is None and the
session's own id stands in.
"""

from __future__ import annotations

import re
import secrets
from typing import Any

import streamlit as st
from starlette.datastructures import MutableHeaders

NAME = "normviz_browser"
MAX_AGE_S = 24 * 3600  # a day: a class lasts at most 12 hours
_ID = re.compile(r"[0-9A-Za-z_-]{16,64}")


def browser_id() -> str | None:
    """This browser's id, if it sent a well-formed one."""
    value = st.context.cookies.get(NAME)
    return value if isinstance(value, str) and _ID.fullmatch(value) else None


def set_cookie_header() -> str:
    return (
        f"{NAME}={secrets.token_urlsafe(16)}; Path=/; Max-Age={MAX_AGE_S}; HttpOnly; SameSite=Lax"
    )


def _has_id(scope: dict[str, Any]) -> bool:
    for key, value in scope.get("headers", ()):
        if key == b"cookie":
            for part in value.decode("latin-1").split(";"):
                name, _, v = part.strip().partition("=")
                if name == NAME and _ID.fullmatch(v):
                    return True
    return False


class BrowserId:
    """ASGI middleware: give a browser its id on the first HTML page it loads."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or _has_id(scope):
            await self.app(scope, receive, send)
            return

        async def send_with_id(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                if headers.get("content-type", "").startswith("text/html"):
                    headers.append("set-cookie", set_cookie_header())
            await send(message)

        await self.app(scope, receive, send_with_id)
