"""Start loading the browser's chart library as soon as a page with charts opens.

Streamlit's frontend loads plotly.js (one 4.7 MB script, hashed name) only when the
first `st.plotly_chart` of a page arrives, and then spends most of a second fetching,
compiling and evaluating it before the chart draws. On the bare one-chart page that
chart arrives at once; on ours it arrives after the sidebar, the widgets and the page's
own compute, so the chart library starts late (docs/serving.md, "First draw").

`early()` sends a tiny script at the top of the run (in the sidebar, before the page's
compute) that imports the same file the frontend will import: the browser fetches and
evaluates it while the server still computes, and the chart's own import finds it ready
(a module is evaluated once per URL). It reads no Streamlit internal at run time: the
file's name is taken from the installed package's static folder, and where there is no
such single file (another Streamlit build) nothing is sent.
"""

from __future__ import annotations

import functools
from pathlib import Path

import streamlit as st

from ui.pages import charts

# the frontend's entry script and its lazily loaded chunks sit in one folder
_JS = Path(st.__file__).parent / "static" / "static" / "js"
# the script's element takes no room (no gap in the sidebar)
SCRIPT = """<style>.stElementContainer:has(> .stHtml > script.nv-chartload) {{ display: none; }}</style>
<script class="nv-chartload">(() => {{
  const entry = document.querySelector('script[src*="/static/js/index."]');
  if (entry) import(new URL("{name}", entry.src).href).catch(() => {{}});
}})();</script>"""


@functools.cache
def chunk() -> str | None:
    """The file name of the frontend's plotly chart chunk, if exactly one is installed."""
    found = sorted(p.name for p in _JS.glob("PlotlyChart.*.js"))
    return found[0] if len(found) == 1 else None


def early(page: str) -> None:
    """On a page whose first view draws charts (ui.pages): have the browser load the
    chart library now. Pages without charts skip it (evaluating 4.7 MB of script would
    only hold up their own drawing)."""
    name = chunk()
    if name and charts(page):
        st.sidebar.html(SCRIPT.format(name=name), unsafe_allow_javascript=True)
