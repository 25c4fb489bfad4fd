"""The app's own CSS: a little everywhere (spacing, formulas, pill rows), more in
presenter mode (everything larger). Fixed strings only: no user text ever goes in here.

Streamlit sizes its text, widgets and formulas in rem, so presenter mode scales them all
by raising the root font size; figures scale themselves (`normviz.style.PRESENTER_SCALE`),
and tables drawn on a canvas (st.dataframe) are zoomed.
"""

from __future__ import annotations

import streamlit as st

PRESENTER_TEXT = 1.25  # presenter mode's root font size, as a multiple of Streamlit's 16 px

BASE = """
/* less empty space above every page's title (Streamlit's default is 6rem) */
[data-testid="stMainBlockContainer"] { padding-top: 3.25rem; }
/* a formula wider than its column scrolls inside its own box, never past the column */
[data-testid="stMarkdownContainer"] .katex-display {
  overflow-x: auto; overflow-y: hidden; padding: 0.15em 0;
}
/* pill rows wrap onto more lines instead of scrolling sideways out of sight */
[data-testid="stButtonGroup"] > div { flex-wrap: wrap; overflow-x: visible; }
/* page links (Home's map) and captions wrap long words on a phone */
[data-testid="stPageLink"] p, [data-testid="stCaptionContainer"] { overflow-wrap: anywhere; }
"""

PRESENTER = f"""
html {{ font-size: {16 * PRESENTER_TEXT:g}px !important; }}
[data-testid="stMainBlockContainer"] {{ padding-top: 2.25rem; padding-bottom: 2rem; }}
/* the top bar (sidebar button, menu) floats over the page instead of pushing it down */
[data-testid="stHeader"] {{ background: transparent; pointer-events: none; }}
[data-testid="stHeader"] button, [data-testid="stHeader"] a,
[data-testid="stHeader"] [data-testid="stToolbar"] {{ pointer-events: auto; }}
[data-testid="stMainBlockContainer"] h1 {{ padding-top: 0.25rem; }}
/* canvas tables do not follow the root font size: zoom them, inside their column */
[data-testid="stDataFrame"], [data-testid="stDataFrameResizable"] {{
  zoom: {PRESENTER_TEXT:g}; max-width: calc(100% / {PRESENTER_TEXT:g});
}}
"""


def inject(presenter: bool) -> None:
    """Add this run's CSS (style-only st.html takes no space on the page)."""
    st.html(f"<style>{BASE}{PRESENTER if presenter else ''}</style>")
