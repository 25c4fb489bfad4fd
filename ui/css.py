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
/* a formula in a column (the worked example's statistics, the residual cards) shrinks
   with its column, down to 0.8 of the text size, so its result stays in view */
[data-testid="stColumn"] { container-type: inline-size; }
[data-testid="stColumn"] .katex-display > .katex { font-size: clamp(0.8em, 3.4cqi, 1.21em); }
/* /residual's cards, two a row: larger, up to the size that holds Peri-LN's formula,
   the longest (about 16 of its font sizes wide) */
.st-key-res_cards [data-testid="stColumn"] .katex-display > .katex {
  font-size: clamp(0.8em, 5.5cqi, 1.21em);
}
/* pill rows wrap onto more lines instead of scrolling sideways out of sight, and a long
   pill wraps its own words */
[data-testid="stButtonGroup"] > div { flex-wrap: wrap; overflow-x: visible; }
[data-testid="stButtonGroup"] button { height: auto; max-width: 100%; }
[data-testid="stButtonGroup"] button p { white-space: normal; text-align: left; }
/* pill labels at full contrast (Streamlit fades unselected ones below WCAG AA) */
[data-testid="stButtonGroup"] button:not(:disabled) p { color: #111111; }
/* page links (Home's map) wrap instead of running off a phone's screen */
[data-testid="stPageLink"] a, [data-testid="stPageLink"] span,
[data-testid="stPageLink"] p { white-space: normal; }
/* a chart is as wide as its column, on a phone too (no forced width, no sideways pan):
   the figures lay out their own panels for the width (normviz.style) */
[data-testid="stFullScreenFrame"]:has(> [data-testid="stPlotlyChart"]) { max-width: 100%; }
/* static tables (st.table) wrap long cells, even a long identifier, to fit their column
   (on a phone too: no sideways pan, nothing a sentence names hides off to the side) */
[data-testid="stTable"] :is(th, td), [data-testid="stTable"] :is(th, td) * {
  white-space: normal !important;
}
[data-testid="stTable"] td, [data-testid="stTable"] td * { overflow-wrap: anywhere !important; }
/* the data editor's resize corner sits half outside its box: held inside */
[data-testid="stDataFrameResizable"] { overflow: clip; }
/* a table's cell labels (ui.runner.table) show only in the stacked layout below */
[data-testid="stTable"] td::before { display: none; }
@media (max-width: 640px) {
  /* a table of five or more columns stacks: each row a block of "column: value" lines
     under its row label, nothing to the side */
  [data-testid="stTable"] table[id^="T_nvstack"]:has(thead th:nth-child(5)) {
    & thead { display: none; }
    & :is(tbody, tr, th, td) { display: block; width: auto; border: none; }
    & tbody tr { border-top: 1px solid #D9D9D9; padding: 0.3rem 0; }
    & tbody th { font-weight: 600; }
    & td::before { display: inline; font-weight: 600; }
    & td::after { content: none; }
  }
  [data-testid="stTable"] :is(th, td) { padding: 0.25rem 0.3rem; font-size: 0.8rem; }
  [data-testid="stTable"] th, [data-testid="stTable"] th * { overflow-wrap: anywhere !important; }
  /* a display formula shrinks to the phone's width (its own scroll box stays the last
     resort) */
  [data-testid="stMarkdownContainer"] .katex-display > .katex { font-size: min(1.21em, 3.1vw); }
}
/* On a phone (or any touch screen, where a tap shows it and nothing hides it again) the
   chart toolbar would sit over the chart's title: it is not drawn there. Streamlit 1.67
   already stacks st.columns below 640 px, so side-by-side charts come one under another;
   a row of number inputs (the selected cell on /axes) stays one compact row instead,
   so it does not push the figure under it below the fold. */
@media (max-width: 640px), (hover: none) {
  [data-testid="stPlotlyChart"] .modebar-container { display: none !important; }
}
@media (max-width: 640px) {
  [data-testid="stHorizontalBlock"]:has(> [data-testid="stColumn"] [data-testid="stNumberInput"]) {
    flex-wrap: wrap; column-gap: 0.5rem;
  }
  [data-testid="stHorizontalBlock"]:has(> [data-testid="stColumn"] [data-testid="stNumberInput"])
    > [data-testid="stColumn"]:has([data-testid="stNumberInput"]) {
    flex: 1 1 5.5rem; min-width: 5.5rem;
  }
}
/* tab bars wrap onto more lines instead of hiding tabs off to the side; the open tab is
   underlined by its own border (the sliding highlight assumes one line) */
[data-testid="stTabs"] [role="tablist"] { flex-wrap: wrap; overflow-x: visible; row-gap: 0.25rem; }
[data-testid="stTabs"] [data-baseweb="tab-highlight"] { display: none; }
[data-testid="stTabs"] [role="tab"][aria-selected="true"] {
  box-shadow: inset 0 -3px 0 0 currentColor;
}
/* still pictures (normviz.figures.spec.Picture): the method thumbnails, as many panels
   a row as fit at 6.5 rem each (five on a laptop or a projector, three on a phone), each
   drawing as wide as its panel; their text follows the page's sizes */
.nv-thumbs {
  display: grid; grid-template-columns: repeat(auto-fit, minmax(min(6.5rem, 100%), 1fr));
  gap: 0.75rem 1rem; margin: 0;
}
.nv-thumbs figure { margin: 0; min-width: 0; }
.nv-thumbs figcaption {
  font-weight: 600; text-align: center; margin-bottom: 0.25rem; overflow-wrap: anywhere;
}
.nv-thumbs p { font-size: 0.875rem; margin: 0; overflow-wrap: anywhere; }
.nv-thumbs img { display: block; width: 100%; height: auto; max-height: 12rem; }
.nv-thumbs-note { font-size: 0.875rem; color: #595959; margin: 0.5rem 0 0; }
/* the projector's question grid shares the screen with the tally (ui/projector.py): its
   rows at most 10 rem tall together (the tensor grid reads --tg-rows-rem; 40 elsewhere) */
.st-key-pr_question { --tg-rows-rem: 10; }
"""

# presenter mode's larger sizes apply on screens wider than this (a link shared with
# present=1 and opened on a phone reads at the normal sizes)
PRESENTER_MIN_WIDTH = 641  # px

PRESENTER = f"""
@media (min-width: {PRESENTER_MIN_WIDTH}px) {{
html {{ font-size: {16 * PRESENTER_TEXT:g}px !important; }}
[data-testid="stMainBlockContainer"] {{ padding-top: 2.25rem; padding-bottom: 2rem; }}
/* the top bar (sidebar button, menu) floats over the page instead of pushing it down */
[data-testid="stHeader"] {{ background: transparent; pointer-events: none; }}
[data-testid="stHeader"] button, [data-testid="stHeader"] a,
[data-testid="stHeader"] [data-testid="stToolbar"] {{ pointer-events: auto; }}
[data-testid="stMainBlockContainer"] h1 {{ padding-top: 0.25rem; }}
/* canvas tables do not follow the root font size: zoom them, inside their column (the
   zoomed box is held to the column's width / zoom; the grid lays itself out in it) */
[data-testid="stElementContainer"]:has(> [data-testid="stDataFrame"]) {{
  zoom: {PRESENTER_TEXT:g}; width: calc(100% / {PRESENTER_TEXT:g}) !important;
}}
[data-testid="stDataFrame"], [data-testid="stDataFrameResizable"] {{ max-width: 100%; }}
}}
"""


def inject(presenter: bool) -> None:
    """Add this run's CSS (style-only st.html takes no space on the page)."""
    st.html(f"<style>{BASE}{PRESENTER if presenter else ''}</style>")
