"""The /choose topic package: sections, knobs declared once, words computed from results."""

from __future__ import annotations

import pytest

from normviz import METHODS, NormConfigError, io
from normviz.choose import (
    KNOBS,
    LABELS,
    SECTIONS,
    compare,
    example_setup,
    guide,
    model_audit,
    saved,
    state_dict,
    zoo,
)
from normviz.sections import EXTRA_KINDS, Extra, no_progress
from ui.params import PAGE_PARAMS


def test_knobs_are_declared_once_and_derived_from_the_data() -> None:
    # every section's knob is a URL parameter of the page, once
    declared = [k.name for s in SECTIONS for k in s.knobs]
    assert sorted({*declared}) == sorted(p.name for p in PAGE_PARAMS["choose"])
    knobs = {k.name: k for k in KNOBS}
    assert list(knobs) == ["arch", "per_device", "constraints", "model", "use_sample"]
    assert knobs["arch"].choices == tuple(guide.ARCHITECTURES)
    assert knobs["constraints"].choices == tuple(guide.CONSTRAINTS) and knobs["constraints"].multi
    # the widget's largest batch is the largest the guide accepts
    hi = knobs["per_device"].hi
    guide.Situation("cnn", hi).check()
    with pytest.raises(guide.GuideError, match="from 1 to"):
        guide.Situation("cnn", hi + 1).check()
    assert knobs["model"].choices == tuple(zoo.MODELS) == (*zoo.ZOO, *zoo.ON_REQUEST)
    for name, labels in LABELS.items():  # every choice has a label for its widget
        assert set(knobs[name].choices or ()) == set(labels), name
    assert all(k.label for k in KNOBS)


@pytest.mark.parametrize("section", SECTIONS, ids=lambda s: s.slug)
def test_extras_are_items_the_runner_can_draw(section) -> None:
    for knobs in (section.defaults(), section.maxima()):
        res = section.run(example_setup(), knobs, no_progress)
        for e in section.extras(res):
            assert isinstance(e, Extra) and e.kind in EXTRA_KINDS, e
            assert isinstance(e.body, str) or e.kind == "static"


def test_the_guide_says_what_the_recommendation_says() -> None:
    knobs = {"arch": "cnn", "per_device": 4, "constraints": ("online",)}
    rec = guide.GUIDE.run(None, knobs, no_progress)
    assert rec == guide.recommend(guide.Situation("cnn", 4, frozenset({"online"})))
    text = "\n".join(guide.GUIDE.notes(rec))
    assert all(r in text for r in (*rec.reasons, *rec.pitfalls))
    extras = guide.GUIDE.extras(rec)
    assert extras[0].top and f"**Use {rec.label}**" in str(extras[0].body)
    assert extras[-1].kind == "graphviz" and extras[-1].body == guide.flowchart_dot(rec)


def test_the_comparison_notes_name_the_batch_dependent_methods() -> None:
    res = compare.TABLES.run(None, {}, no_progress)
    (note,) = compare.TABLES.notes(res)
    for k in res.methods:
        assert (METHODS[k].label in note.split(";")[0]) == METHODS[k].batch_dependent, k
    assert compare.TABLES.table(res).equals(compare.comparison_table())


def test_the_zoo_overview_counts_every_finding() -> None:
    res = model_audit.ZOO_SECTION.run(None, {}, no_progress)
    n = sum(len(zoo.audit_zoo_model(k).findings) for k in zoo.ZOO)
    assert model_audit.ZOO_SECTION.notes(res)[0].startswith(f"{len(zoo.ZOO)} models, {n} ")
    assert list(model_audit.ZOO_SECTION.table(res)["layers"]) == [
        len(zoo.audit_zoo_model(k).findings) for k in zoo.ZOO
    ]


def test_the_state_dict_section_reads_uploads_through_the_safe_loader() -> None:
    sec = state_dict.STATE_DICT
    assert sec.run(state_dict.Setup(), {"use_sample": False}, no_progress).report is None
    res = sec.run(state_dict.Setup(), {"use_sample": True}, no_progress)
    data = state_dict.sample_bytes()
    assert res.name == state_dict.SAMPLE_NAME
    want = saved.audit_state_dict(io.load_tensors(data, "x.safetensors"))
    assert res.report is not None and res.report.norms == want.norms
    assert set(res.report.decay) == set(want.decay)  # the loader's key order may vary
    # an upload wins over the sample toggle, and its name is shown as literal text
    up = state_dict.Upload("my`file*.safetensors", data)
    res = sec.run(state_dict.Setup(up), {"use_sample": True}, no_progress)
    assert res.name == up.name
    assert sec.notes(res)[0].startswith("`my'file*.safetensors`: ")
    with pytest.raises(NormConfigError, match=r"junk\.pt was refused"):
        sec.run(state_dict.Setup(state_dict.Upload("junk.pt", b"\x00" * 8)), {}, no_progress)
