"""Caches sized by bytes: every section's cached result is small by construction.

st.cache_data keeps each result serialized, per entry, and gives every session its
own copy; `max_entries` cannot size by bytes. So results hold only what is drawn
(binned histograms, small tables, the downloads' setup rather than their bytes),
and this test runs every page through app.py at cap-sized shapes and checks the
largest entry of every cache (ui/runner.py also caps `_run` at 64 MB in all, and
.streamlit/config.toml every st.cache_data at 256 MB).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import streamlit as st
from streamlit.runtime.caching.cache_data_api import get_data_cache_stats_provider

from benchmarks.common import app_test, cap_shapes, page_ids, query_for, url_path
from ui import state

MAX_ENTRY_BYTES = 2 * 2**20  # the largest cached result allowed, at the element cap

CASES = [
    ("distributions", "BTC", "max C", "layer"),  # 1024 groups
    ("distributions", "BTC", "max B", "instance"),
    ("distributions", "NCHW", "max C", "instance"),  # 32768 groups
    ("distributions", "NCHW", "balanced", "batch"),
    *((p, "BTC", "balanced", "layer") for p in page_ids() if url_path(p)),
]


def _largest_entry() -> tuple[int, str]:
    stats = [s for fam in get_data_cache_stats_provider().get_stats().values() for s in fam]
    return max(((s.byte_length, s.cache_name) for s in stats), default=(0, ""))


@pytest.mark.parametrize(("page", "layout", "profile", "method"), CASES)
def test_largest_cached_result_at_the_cap(page: str, layout: str, profile: str, method: str):
    st.cache_data.clear()
    shape = cap_shapes(layout)[profile]
    at = app_test(page, query_for(layout, shape, method)).run()
    assert not at.exception, at.exception
    size, name = _largest_entry()
    assert size <= MAX_ENTRY_BYTES, f"{page} {shape} {method}: {name} holds {size:,} bytes"


def test_generated_inputs_are_cached_by_bytes() -> None:
    # at most INPUTS_BYTES of generated inputs, whatever their number
    assert state._INPUTS.budget == state.INPUTS_BYTES <= 64 * 2**20
    state._INPUTS.clear()
    s = state.ns.Settings(layout="BTC", sizes={"B": 128, "T": 128, "C": 256}, seed=1)
    for seed in range(6):  # six cap-sized inputs: 16 MB each
        a = state.input_tensor(replace(s, seed=seed))
        b = state.input_tensor(replace(s, seed=seed))
        assert a.data_ptr() != b.data_ptr() and bool((a == b).all())  # a copy per caller
    assert state._INPUTS.nbytes <= state.INPUTS_BYTES


def test_a_sections_cache_key_is_its_settings_digest() -> None:
    """ui.runner keys a section's result and figure on one digest of (page, slug, setup,
    knob values): equal settings share it, any change in them makes another, and a part
    that cannot be pickled is handed to Streamlit's hashing as it is."""
    from normviz.distributions.setup import Generated
    from ui.runner import _key

    src = Generated("channels", "BTC", (4, 6, 8), 5)
    key = _key("distributions", "eps", src, (("eps", 1e-5),))
    assert key == _key("distributions", "eps", replace(src), (("eps", 1e-5),))
    others = [
        _key("axes", "eps", src, (("eps", 1e-5),)),
        _key("distributions", "gamma-beta", src, (("eps", 1e-5),)),
        _key("distributions", "eps", replace(src, seed=6), (("eps", 1e-5),)),
        _key("distributions", "eps", replace(src, shape=(4, 8, 6)), (("eps", 1e-5),)),
        _key("distributions", "eps", src, (("eps", 1e-3),)),
    ]
    assert isinstance(key, str) and key not in others and len(set(others)) == len(others)
    unpicklable = ("distributions", "eps", lambda: None)
    assert _key(*unpicklable) == unpicklable
