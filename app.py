"""normviz: the entry point. Page config, navigation, the shared sidebar.

`streamlit run app.py` finds the `st.App` below (Streamlit's app discovery) and imports
this file as the module `app`: the server is then an ASGI app whose middleware gives
each browser its id cookie (ui/browser.py), the one way a live-class student stays one
student across reloads, reconnects and server processes. Every script run executes this
file again as `__main__` (as Streamlit runs any main script): that is the page below.
"""

from __future__ import annotations

import streamlit as st

if __name__ == "app":  # imported to be served (not a script run): the ASGI app only
    from starlette.middleware import Middleware

    from ui.browser import BrowserId

    app = st.App(__file__, middleware=[Middleware(BrowserId)])
else:  # a script run
    import logging

    import ui.warmup  # noqa: F401  (first: the heavy imports, one thread at a time; torch on one thread)
    from ui import chartload, css, realdata, route, runs, sidebar, state

    presenter = state.link_presenter()  # from the session, or on a first visit the link
    st.set_page_config(
        page_title="normviz: normalization layers, axis by axis",
        page_icon="assets/icon.png",
        layout="wide",
        # presenter mode folds the sidebar away; "auto" keeps it open on a wide screen and
        # folded on a phone, where it would cover most of the page
        initial_sidebar_state="collapsed" if presenter else "auto",
    )
    css.inject(presenter)

    page = st.navigation(route.app_pages())
    chartload.early(page.url_path)  # first, before any wait: the browser starts on plotly.js
    try:
        # the query string is written once per run; the run is marked as app.py's (ui.route)
        with runs.turn(), route.through_app(page.url_path), state.url_written(page.url_path):
            sidebar.draw(page.url_path)
            state.show_warnings()
            realdata.show_note()  # what a real data source's tensor is, on the pages using one
            page.run()
    except Exception:  # a bug must not show a traceback to a class
        logging.getLogger("normviz").exception("page %s failed", page.url_path)
        st.error(
            "normviz hit an internal error on this page. The other pages still work; "
            "changing a setting may help. (The details are in the server log.)",
            icon=":material/bug_report:",
        )
