"""AppTest's entry script: runs app.py as a warmed-up server does.

AppTest starts every run in Streamlit's legacy pages-folder mode when its main
script has a `pages/` folder beside it, and then runs a switched-to page file on
its own (ui.route.entry reroutes it through app.py, at the cost of a rerun, which
also drops a clicked button's one-run value). This file sits in a folder without
`pages/`, so no run starts in that mode: each runs app.py, which navigates to the
page, exactly as on a server after its first `st.navigation` call. Pages are then
switched to as "../pages/<page>.py" (benchmarks.common.app_test).
"""

import runpy
from pathlib import Path

runpy.run_path(str(Path(__file__).resolve().parent.parent / "app.py"))
