"""Pure figure builders: make_*_figure(...) -> go.Figure, one module per topic."""
