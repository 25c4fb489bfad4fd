"""The teacher's screen of a live class, laid out for a projector (1280×720, presenter).

One screen holds what the room needs: a header row with the join QR code, the class
code and a short address to type, and the teacher's buttons; below it the question
beside the answers arriving live. The teacher key is drawn only when the teacher asks
for it (ui.practice.key_panel): the screen is projected. The class's state and the
teacher's actions are ui/practice.py's (and normviz.classroom's); this module only lays
them out.
"""

from __future__ import annotations

import functools

import pandas as pd
import segno
import streamlit as st

from normviz import practice
from normviz.classroom import ClassError, ClassInfo
from normviz.practice import Exercise, live
from ui import comeback, identity, runner, state
from ui import practice as ui
from ui.safe import md_text

QR_PX = 150  # the QR code's side on the page
LABELS = {s.slug: s.label for s in practice.SECTIONS}


def link(code: str) -> str:
    """The join link: this page's address with only the class code (`class=`)."""
    url = (st.context.url or "").split("?")[0]
    base = url.rsplit("/practice", 1)[0] if "/practice" in url else url
    return live.share_link(base, code)


@functools.lru_cache(maxsize=64)
def qr_svg(url: str) -> str:
    """The QR code of `url` as an SVG string (segno: pure Python; error level M)."""
    return segno.make(url, error="m").svg_inline(scale=4, border=2, dark="#000", light="#fff")


def header(info: ClassInfo) -> None:
    """QR code | the question's number, the code and the short address | the buttons."""
    url = link(info.code)
    qr, ids, act = st.columns([QR_PX + 30, 600, 250], vertical_alignment="top")
    with qr.container(key="pr_qr"):
        st.image(qr_svg(url), width=QR_PX, alt=live.qr_alt(url))
    with ids:
        st.markdown(f"**Live class, question {info.question}** ({LABELS[info.kind]}). Class code:")
        st.metric("Class code", info.code, label_visibility="collapsed")
        with st.container(key="pr_link_box"):
            st.code(live.short_address(url), language=None, wrap_lines=True)
    act.button(
        "Reveal the answer",
        key="pr_reveal",
        type="primary",
        disabled=info.revealed,
        on_click=ui.teacher_action,
        args=("reveal", info.code),
        width="stretch",
    )
    with act.popover("Next question", icon=":material/arrow_forward:", width="stretch"):
        kind = st.selectbox(
            "Next exercise",
            list(LABELS),
            format_func=LABELS.__getitem__,
            index=list(LABELS).index(info.kind),
            key="pr_next_kind",
        )
        st.button(
            "Move the class on",
            key="pr_push",
            help=live.NEXT_HELP,
            on_click=ui.teacher_action,
            args=("next", info.code, kind, info.seed + 1),
            type="primary",
        )
    act.button(
        "End the class",
        key="pr_end",
        help=live.END_HELP,
        on_click=ui.teacher_action,
        args=("end", info.code),
        width="stretch",
    )
    with act:
        ui.key_panel(info.code)  # off unless asked for: the screen is projected


def question(ex: Exercise, info: ClassInfo) -> None:
    """The question as the class sees it: the prompt, the grid and table, the answer."""
    st.markdown(ex.prompt)
    shown = ",".join(map(str, ex.to_pick)) if info.revealed and ex.form == "cells" else ""
    ui.grid(ex, f"t-{info.code}-{info.question}", None, shown)
    ui.table(ex)
    if info.revealed:
        ui.feedback(ex, None)


def teacher(info: ClassInfo) -> None:
    """The teacher's screen: the header row, then the question beside the live tally."""
    ex = ui.exercise(info.kind, info.seed)
    if ex is None:
        return
    header(info)
    left, right = st.columns([3, 2], gap="medium")
    with left.container(key="pr_question"):
        question(ex, info)
    with right.container(key="pr_tally_box"):
        tally(ex, info.code)


@st.fragment(run_every=live.POLL_S)
def tally(ex: Exercise, code: str) -> None:
    """The teacher's view of the answers, read again every few seconds."""
    try:
        info = ui.room().teach(code, identity.browser())
        counts = ui.room().counts(code, identity.browser())
    except ClassError as e:
        st.error(md_text(e, limit=300), icon=":material/block:")
        return
    comeback.beat()  # the page comes back by itself if this fragment's session is lost
    rows = practice.tally(ex, counts)
    fig = practice.make_tally_figure(rows, info.revealed, state.presenter())
    runner.chart(fig, "pr_tally")
    st.caption(live.WAITING)
    if rows:
        df = pd.DataFrame(
            [(r.label, r.count, "✔" if r.correct else "") for r in rows],
            columns=["answer", "students", "right" if info.revealed else ""],
        )
        if not info.revealed:
            df = df.iloc[:, :2]
        st.table(df.set_index("answer"))
