"""A page knob's widget, chosen by the kind of knob: one builder for every page.

A multi-choice knob is pills; an on/off knob a toggle; named choices a radio
(horizontal when every label is short), numeric choices a select slider; a range
a slider (step 1, or 0.1 for a float). A knob's own `widget` ("number", "select")
and `step` (normviz.knobs.Knob) override that. The topic package words the choices
(`choice_label(name, value)`, or `LABELS[name][value]`) and the help (`HELP[name]`).
Values go through ui.state.widget: under the page-scoped key `page:name`
(ui.state.key), in the URL by the bare name, kept while hidden.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import streamlit as st

from normviz.knobs import Knob, Value
from ui import state

SHORT = 20  # characters: a radio whose labels are all this short lies horizontally


def _label(topic: ModuleType, k: Knob) -> Any:
    """The topic's words for knob `k`'s choices, or None (the values as they are)."""
    labels = getattr(topic, "LABELS", {}).get(k.name)
    if labels is not None:
        return labels.__getitem__
    fn = getattr(topic, "choice_label", None)
    return None if fn is None else lambda v: fn(k.name, v)


def widget_for(k: Knob, where: Any, words: Any = None) -> tuple[Any, dict[str, Any]]:
    """The widget function for `k` in `where` and its keyword arguments."""
    if k.multi:
        return where.pills, {"selection_mode": "multi"}
    if k.widget == "number":
        return where.number_input, {"step": k.step or 1}
    if k.widget == "select":
        return where.selectbox, {}
    if isinstance(k.default, bool):
        return where.toggle, {}
    if k.choices is not None:
        if not isinstance(k.default, str):
            return where.select_slider, {}
        texts = [str(words(c)) if words else str(c) for c in k.choices]
        return where.radio, {"horizontal": all(len(t) <= SHORT for t in texts)}
    step = k.step or (0.1 if isinstance(k.default, float) else 1)
    return where.slider, {"step": type(k.default)(step)}


def draw(k: Knob, page: str, topic: ModuleType, where: Any = st) -> Value:
    """Knob `k`'s widget on `page` in `where` (st, a column, a container); its value
    (a multi-choice knob's as a tuple)."""
    words = _label(topic, k)
    fn, kw = widget_for(k, where, words)
    if words is not None and (k.choices is not None):
        kw["format_func"] = words
    if k.name in getattr(topic, "HELP", {}):
        kw["help"] = topic.HELP[k.name]
    value = state.widget(fn, k.name, k.label, page, **kw)
    return tuple(value or ()) if k.multi else value
