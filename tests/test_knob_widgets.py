"""ui.knobs: one rule picks every page knob's widget from the kind of knob."""

from __future__ import annotations

import types

import pytest

from normviz import batchnorm, choose, distributions, residual, training
from normviz.knobs import Knob
from ui import knobs


class Where:
    """Stands in for st or a column: each widget function is named after itself."""

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        def fn() -> None: ...

        fn.__name__ = name
        return fn


TOPIC = types.SimpleNamespace(
    choice_label=lambda name, v: "a label longer than twenty characters: " + str(v)
)


@pytest.mark.parametrize(
    ("knob", "widget", "kw"),
    [
        (Knob("m", (), choices=("a", "b"), multi=True), "pills", {"selection_mode": "multi"}),
        (Knob("t", False), "toggle", {}),
        (Knob("r", "a", choices=("a", "b")), "radio", {"horizontal": False}),
        (Knob("s", 2, choices=(1, 2, 4)), "select_slider", {}),
        (Knob("f", 1.0, lo=0, hi=2), "slider", {"step": 0.1}),
        (Knob("i", 3, lo=1, hi=9), "slider", {"step": 1}),
        (Knob("i", 30, lo=10, hi=90, step=10), "slider", {"step": 10}),
        (Knob("n", 3, lo=1, hi=9, widget="number"), "number_input", {"step": 1}),
        (Knob("d", "a", choices=("a", "b"), widget="select"), "selectbox", {}),
    ],
)
def test_the_kind_of_knob_picks_its_widget(knob: Knob, widget: str, kw: dict) -> None:
    words = knobs._label(TOPIC, knob)
    fn, got = knobs.widget_for(knob, Where(), words)
    assert (fn.__name__, got) == (widget, kw)
    if "step" in got:  # the knob's own type (a float step on an int slider is refused)
        assert type(got["step"]) is type(knob.default)


def test_a_radio_with_short_labels_lies_flat() -> None:
    k = Knob("r", "a", choices=("a", "b"))
    assert knobs.widget_for(k, Where(), None)[1] == {"horizontal": True}


@pytest.mark.parametrize("topic", [batchnorm, choose, distributions, residual, training])
def test_every_page_knob_gets_a_widget_and_its_topic_words(topic) -> None:  # type: ignore[no-untyped-def]
    for k in topic.KNOBS:
        fn, _ = knobs.widget_for(k, Where(), knobs._label(topic, k))
        assert fn.__name__ in {
            "pills",
            "toggle",
            "radio",
            "select_slider",
            "slider",
            "number_input",
            "selectbox",
        }
        words = knobs._label(topic, k)
        if k.choices is not None and words is not None:
            assert all(isinstance(words(c), str) and words(c) for c in k.choices), k.name
