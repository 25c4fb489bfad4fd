"""normviz.figures.spec: a figure built as dicts equals the one plotly's object API builds."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest
from plotly.subplots import make_subplots
from signals import assert_valid

from normviz import style
from normviz.figures.spec import Spec, merge, trace


def same(spec: Spec, fig: go.Figure) -> None:
    built = spec.figure()
    assert built.to_plotly_json() == fig.to_plotly_json()
    assert_valid(built)


@pytest.mark.parametrize("presenter", [False, True])
def test_a_grid_with_titles_traces_axes_and_notes(presenter: bool) -> None:
    kw = {"horizontal_spacing": 0.05, "shared_yaxes": True}
    titles = ("left: μ = 0.1", "right<br>two lines")
    fig = make_subplots(rows=1, cols=2, subplot_titles=titles, **kw)
    fig.add_trace(go.Bar(x=[1, 2], y=[3, 4], name="a", marker={"pattern": {"shape": "/"}}), 1, 1)
    fig.add_trace(go.Scatter(x=[0, 1], y=[1, 0], mode="lines", line={"dash": "dot"}), 1, 2)
    fig.update_layout(title="The title", showlegend=False, bargap=0)
    fig.update_xaxes(title_text="value")
    fig.update_yaxes(title_text="count", row=1, col=1)
    fig.add_annotation(text="here", x=1, y=2, row=1, col=2, showarrow=False)
    fig.add_annotation(text="caption", xref="paper", yref="paper", x=0.5, y=0, showarrow=False)
    fig.add_vline(x=0.5, row=1, col=2, line={"dash": "dash"})
    fig.add_hline(y=1, line={"color": "black"})

    spec = Spec.grid(1, 2, titles, **kw)
    spec.add_trace(
        trace("bar", x=[1, 2], y=[3, 4], name="a", marker={"pattern": {"shape": "/"}}), 1, 1
    )
    spec.add_trace(trace("scatter", x=[0, 1], y=[1, 0], mode="lines", line={"dash": "dot"}), 1, 2)
    spec.update_layout(title="The title", showlegend=False, bargap=0)
    spec.update_xaxes(title={"text": "value"})
    spec.update_yaxes(title={"text": "count"}, row=1, col=1)
    spec.add_annotation(text="here", x=1, y=2, row=1, col=2, showarrow=False)
    spec.add_annotation(text="caption", xref="paper", yref="paper", x=0.5, y=0, showarrow=False)
    spec.add_vline(x=0.5, row=1, col=2, line={"dash": "dash"})
    spec.add_hline(y=1, line={"color": "black"})
    assert spec.title == "The title"
    same(spec, fig)

    # the house style, on top: large fonts, the title pinned, room above for it and a line
    size = style.font_size(presenter)
    styled = style.top_room(style.apply(spec, presenter, height=300), presenter, below=1)
    layout = styled.figure().layout
    assert layout.font.size == size and layout.legend.font.size == size
    assert layout.title.font.size == round(size * 1.15) and layout.height == 300
    assert (layout.title.y, layout.title.yref, layout.title.yanchor) == (1, "container", "top")
    assert layout.margin.t == round(1.3 * (size * 1.15 + size)) + 20
    assert_valid(styled.figure())


def test_a_plain_figure_and_a_3d_grid() -> None:
    fig = go.Figure()
    fig.add_trace(go.Heatmap(z=np.arange(6).reshape(2, 3), colorscale=style.DIVERGING))
    fig.update_xaxes(showgrid=False)
    fig.update_layout(yaxis={"autorange": "reversed"})
    spec = Spec().add_trace(
        trace("heatmap", z=np.arange(6).reshape(2, 3), colorscale=style.DIVERGING)
    )
    spec.update_xaxes(showgrid=False).update_layout(yaxis={"autorange": "reversed"})
    same(spec, fig)

    specs = [[{"type": "scene"}, {"type": "xy"}]]
    fig = make_subplots(rows=1, cols=2, specs=specs)
    fig.add_trace(go.Scatter3d(x=[0], y=[0], z=[0], mode="markers"), 1, 1)
    fig.add_trace(go.Scatter(x=[0], y=[0]), 1, 2)
    spec = Spec.grid(1, 2, specs=specs)
    spec.add_trace(trace("scatter3d", x=[0], y=[0], z=[0], mode="markers"), 1, 1)
    spec.add_trace(trace("scatter", x=[0], y=[0]), 1, 2)
    same(spec, fig)


def test_one_cached_grid_serves_figures_without_sharing_them() -> None:
    a = Spec.grid(1, 2, ("a", "b"))
    a.update_xaxes(title={"text": "changed"}, row=1, col=1).add_annotation(text="x", x=0, y=0)
    b = Spec.grid(1, 2, ("c", "d"))
    assert [n["text"] for n in b.layout["annotations"]] == ["c", "d"]
    assert "title" not in b.layout["xaxis"]


def test_merge_copies_and_follows_plotlys_rules() -> None:
    constant = {"font": {"size": 16}}
    layout = merge({}, {"legend": constant})
    merge(layout, {"legend": {"font": {"color": "red"}}, "title": "t"})
    assert constant == {"font": {"size": 16}}  # the caller's dict is untouched
    assert layout == {"legend": {"font": {"size": 16, "color": "red"}}, "title": {"text": "t"}}
    merge(layout, {"title": {"font": {"size": 3}}})
    assert layout["title"] == {"text": "t", "font": {"size": 3}}


def test_what_validation_would_refuse_or_change_fails_the_check() -> None:
    unknown = Spec().add_trace(trace("scatter", x=[1], colour="red")).figure()
    with pytest.raises(ValueError, match="colour"):
        assert_valid(unknown)
    coerced = Spec().add_trace(trace("heatmap", z=[[1]], colorbar={"title": "units"})).figure()
    with pytest.raises(AssertionError):
        assert_valid(coerced)


@pytest.mark.parametrize("position", ["top left", "top right", "bottom left", "bottom right"])
def test_a_line_label_sits_where_plotlys_does(position: str) -> None:
    fig = go.Figure(go.Scatter(x=[0, 1], y=[0, 1]))
    fig.add_hline(y=0.5, annotation_text="chance", annotation_position=position)
    spec = Spec().add_trace(trace("scatter", x=[0, 1], y=[0, 1]))
    spec.add_hline(y=0.5).add_hline_note(0.5, "chance", position)
    same(spec, fig)


def test_update_annotations_reaches_every_note_as_plotlys_does() -> None:
    titles = ("left", "right<br>two lines")
    fig = make_subplots(rows=1, cols=2, subplot_titles=titles)
    fig.add_annotation(text="here", x=1, y=2, row=1, col=2, showarrow=False, font={"color": "red"})
    fig.update_annotations(font_size=20, yshift=3)
    spec = Spec.grid(1, 2, titles)
    spec.add_annotation(text="here", x=1, y=2, row=1, col=2, showarrow=False, font={"color": "red"})
    spec.update_annotations({"font": {"size": 20}}, yshift=3)
    same(spec, fig)
    same(Spec().update_annotations(font={"size": 20}), go.Figure().update_annotations(font_size=20))
