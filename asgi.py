"""normviz served with a browser id cookie (ui/browser.py): `streamlit run asgi.py`.

The same app as `streamlit run app.py`, in Streamlit's ASGI `st.App`, whose middleware
sets the cookie that keeps a live-class student one student across reloads, reconnects
and server processes.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st
from starlette.middleware import Middleware

from ui.browser import BrowserId

app = st.App(str(Path(__file__).resolve().parent / "app.py"), middleware=[Middleware(BrowserId)])
