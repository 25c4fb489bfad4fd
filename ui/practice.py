"""The Practice page's interaction: answer widgets, feedback, the score, the live class.

Grading, generation and words live in normviz.practice; the database in
normviz.classroom. Here: which widget takes which answer form, what a click on the
grid does, what the session remembers, and the two polling views of a live class.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go
import streamlit as st

from normviz import practice
from normviz.classroom import (
    ClassError,
    ClassInfo,
    Classroom,
    ClassUnavailable,
    default_url,
    new_student_id,
)
from normviz.practice import Exercise, Verdict, live
from ui import browser, runner, safe, state
from ui.safe import md_text

PAGE = "practice"
_DONE = "pr_done"  # tag -> (answer, correct): this session's checked answers
_TEACHING = "pr_teaching"  # class code -> teacher key, for the classes this session runs
_STUDENT = "pr_student"  # this session's anonymous id


@st.cache_resource(show_spinner=False)
def _room(url: str) -> Classroom:
    return Classroom(url)


def room() -> Classroom:
    """The live classes' database (NORMVIZ_DB_URL, else the SQLite file)."""
    return _room(default_url())


def params() -> dict[str, Any]:
    """The page's URL values. A class link carries only `class`: the exercise comes from
    the class, so the missing `kind` is not worth a warning."""
    if "class" in st.query_params and "kind" not in st.query_params:
        st.session_state.setdefault("kind", practice.KNOBS[0].default)
    if "class" not in st.query_params:  # joining a class is the exception, not a setting
        st.session_state.setdefault("class", "")
    return state.page_params(PAGE)


def exercise(kind: str, seed: int) -> Exercise | None:
    """The exercise (cached by the runner), or None after showing why it cannot run."""
    section = practice.by_slug(practice.SECTIONS, kind)
    return runner.result(PAGE, section, practice.Setup(seed), {})


# ---- the grid -----------------------------------------------------------------------------


# a resource, as the runner's figures: cache_data would unpickle (and so re-validate) the
# figure on every rerun, which cost more than building it
@st.cache_resource(max_entries=64, show_spinner=False)
def _grid(
    kind: str,
    seed: int,
    picked: tuple[int, ...],
    marks: tuple[tuple[int, ...], tuple[int, ...]] | None,
    presenter: bool,
    max_height: int | None = None,
) -> go.Figure:
    """The grid, keyed on plain values: the picked cells, and the missed and extra ones."""
    verdict = Verdict(False, "", *marks) if marks is not None else None
    ex = practice.exercise(kind, seed)
    return practice.make_grid_figure(ex, picked, verdict, presenter, max_height)


def _names(ex: Exercise) -> list[str]:
    assert ex.case is not None
    return list(practice.cell_names(ex.case))


def _on_pick(key: str, chart: str, names: Sequence[str]) -> None:
    """A click or box on the grid: add the cells, or drop them when all were picked."""
    picks = [p.get("customdata") for p in safe.points(st.session_state.get(chart))]
    hit = [names[i] for i in sorted(safe.offered_all(picks, range(len(names))))]
    if not hit:
        return
    now = safe.offered_all(st.session_state.get(key), names)
    if all(n in now for n in hit):
        now = [n for n in now if n not in hit]
    else:
        now += [n for n in hit if n not in now]
    st.session_state[key] = [n for n in names if n in now]
    st.session_state[key + "_n"] = st.session_state.get(key + "_n", 0) + 1  # a fresh chart


def grid(
    ex: Exercise,
    tag: str,
    verdict: Verdict | None,
    answer: str | None = None,
    max_height: int | None = None,
) -> None:
    """The exercise's grid: clickable while a cells answer is open, else for looking (at
    most `max_height` px tall if given: the projector's view)."""
    if ex.case is None:
        return
    key = f"pr_cells_{tag}"
    picked: tuple[int, ...] = ()
    if ex.form == "cells":
        names = _names(ex)
        chosen = answer.split(",") if answer else None
        picked = (
            tuple(int(i) for i in chosen if i.isdigit() and int(i) < len(names))
            if chosen is not None
            else tuple(names.index(n) for n in safe.offered_all(st.session_state.get(key), names))
        )
    marks = (verdict.missed, verdict.extra) if verdict is not None else None
    fig = _grid(ex.kind, ex.seed, picked, marks, state.presenter(), max_height)
    words = practice.grid_alt(ex, picked, verdict)
    if ex.form != "cells" or verdict is not None or answer is not None:
        runner.chart(fig, f"pr_grid_{tag}", words, width="content")
        return
    chart = f"{key}_chart{st.session_state.get(key + '_n', 0)}"
    runner.chart(
        fig,
        chart,
        words,
        width="content",
        on_select=functools.partial(_on_pick, key, chart, names),
        selection_mode=("points", "box"),
    )


# ---- answers --------------------------------------------------------------------------------


def answer_input(ex: Exercise, tag: str, disabled: bool = False) -> str | None:
    """The widget(s) for the exercise's answer form; the answer string, or None if unset."""
    if ex.form == "cells":
        names = _names(ex)
        got = st.multiselect(
            "Picked cells (or type a cell's name)",
            names,
            key=f"pr_cells_{tag}",
            disabled=disabled,
            placeholder="click cells in the grid, or type e.g. " + names[-1],
        )
        return ",".join(str(names.index(n)) for n in safe.offered_all(got, names))
    if ex.form == "choice":
        labels = dict(ex.options)
        return safe.offered(
            st.radio(
                "Your answer",
                list(labels),
                index=None,
                format_func=labels.__getitem__,
                key=f"pr_choice_{tag}",
                disabled=disabled,
            ),
            labels,
            None,
        )
    cols = st.columns(len(ex.fields))
    nums = []
    for col, field, tol in zip(cols, ex.fields, ex.tolerance, strict=True):
        whole = tol == 0
        nums.append(
            col.number_input(
                field.capitalize(),
                value=None,
                step=1 if whole else 0.01,
                format=None if whole else "%.3f",
                key=f"pr_num_{tag}_{field}",
                disabled=disabled,
            )
        )
    return None if any(v is None for v in nums) else ";".join(str(v) for v in nums)


def feedback(ex: Exercise, verdict: Verdict | None) -> None:
    """The grade's headline, then the explained answer and the exercise's table."""
    if verdict is not None:
        if verdict.correct:
            st.success(verdict.message, icon=":material/check_circle:")
        else:
            st.error(verdict.message, icon=":material/cancel:")
    for note in practice.notes(ex):
        st.markdown(note)


def table(ex: Exercise) -> None:
    df = practice.exercise_table(ex)
    if df is not None:
        runner.table(df)


def checked(tag: str) -> tuple[str, bool] | None:
    return st.session_state.get(_DONE, {}).get(tag)


def check(ex: Exercise, tag: str, answer: str | None) -> None:
    """Grade `answer` once per exercise and count it in the session's score."""
    try:
        v = practice.grade(ex, answer)
    except practice.AnswerError as e:
        st.warning(f"That answer cannot be read: {md_text(e)}.", icon=":material/warning:")
        return
    st.session_state.setdefault(_DONE, {}).setdefault(tag, (answer, v.correct))


def score() -> str:
    done = st.session_state.get(_DONE, {}).values()
    return live.score_text(sum(ok for _, ok in done), len(done))


def next_seed(seed: int) -> None:
    """Callback of "next": the shared seed moves on (before the sidebar is drawn)."""
    st.session_state["seed"] = seed + 1


# ---- live class ------------------------------------------------------------------------------


def student_id() -> str:
    """The browser's id (its cookie, ui/browser.py), else this session's own."""
    if (held := browser.browser_id()) is not None:
        return held
    if _STUDENT not in st.session_state:
        st.session_state[_STUDENT] = new_student_id()
    return st.session_state[_STUDENT]


def client_key() -> str:
    """Who asks, for the class's per-client limits: the address (behind nginx, the last
    X-Forwarded-For entry, which nginx appends), else this session on a local server."""
    fwd = (st.context.headers.get("X-Forwarded-For") or "").split(",")[-1].strip()
    return st.context.ip_address or fwd or "session:" + student_id()


def submit(info: ClassInfo, ex: Exercise, answer: str | None) -> str | None:
    """Send this session's answer to the class; the stored answer, or None after a message."""
    try:
        key = practice.parse_answer(ex, answer)
        room().submit(info.code, info.question, student_id(), key, client_key())
    except (ClassError, practice.AnswerError) as e:
        st.error(md_text(e, limit=300), icon=":material/block:")
        return None
    return key


def teacher_key(code: str) -> str | None:
    return st.session_state.get(_TEACHING, {}).get(code)


def join(code: str) -> ClassInfo | None:
    """The class a link or this session names, or None (after a clear message)."""
    if not code:
        return None
    try:
        return room().get(code)
    except ClassError as e:
        st.error(md_text(e, limit=300), icon=":material/block:")
        if not isinstance(e, ClassUnavailable):  # a busy database keeps the class
            st.session_state["class"] = ""
        return None


def start(kind: str, seed: int) -> None:
    """Callback: open a class on this exercise; this session becomes its teacher."""
    try:
        opened = room().open(kind, seed, client_key())
    except ClassError as e:
        st.session_state["pr_error"] = str(e)
        return
    st.session_state.setdefault(_TEACHING, {})[opened.info.code] = opened.teacher_key
    st.session_state["pr_new_key"] = opened.teacher_key
    st.session_state["class"] = opened.info.code


def resume(code_key: str, teacher_key_key: str) -> None:
    """Callback: take up a class's teacher view again with its code and teacher key."""
    code, key = st.session_state.get(code_key, ""), st.session_state.get(teacher_key_key, "")
    try:
        info = room().teach(code, key)
    except ClassError as e:
        st.session_state["pr_error"] = str(e)
        return
    st.session_state.setdefault(_TEACHING, {})[info.code] = key
    st.session_state["class"] = info.code


def teacher_action(action: str, code: str, kind: str = "", seed: int = 0) -> None:
    """Callback of the teacher's buttons: reveal, next question, end the class."""
    key = teacher_key(code) or ""
    try:
        if action == "reveal":
            room().reveal(code, key)
        elif action == "next":  # the kind as picked now (args are from the last run)
            room().next(code, key, st.session_state.get("pr_next_kind", kind), seed)
        else:
            room().close(code, key)
            st.session_state["class"] = ""
    except ClassError as e:
        st.session_state["pr_error"] = str(e)


def start_button(kind: str, seed: int) -> None:
    """The teacher's way in, beside the exercise: open a live class on it."""
    st.button(
        live.START,
        key="pr_start",
        icon=":material/groups:",
        help=live.TEACH,
        on_click=start,
        args=(kind, seed),
    )


def teach_form() -> None:
    """Resume a class with its code and teacher key (at the page's foot)."""
    with st.expander("Resume teaching a class", icon=":material/key:"):
        c1, c2 = st.columns(2)
        c1.text_input("Class code", key="pr_resume_code", max_chars=16)
        c2.text_input("Teacher key", key="pr_resume_key", type="password", max_chars=64)
        st.button(
            "Resume teaching",
            key="pr_resume",
            on_click=resume,
            args=("pr_resume_code", "pr_resume_key"),
        )


def errors() -> None:
    """A message left by a callback (class limits, a wrong key), shown once."""
    msg = st.session_state.pop("pr_error", None)
    if msg:
        st.error(md_text(msg, limit=300), icon=":material/block:")


@st.fragment(run_every=live.POLL_S)
def poll(code: str, shown: tuple[int, bool]) -> None:
    """A student's view: rerun the page when the teacher reveals or moves on."""
    try:
        info = room().get(code)
    except ClassUnavailable as e:  # keep polling: the page shows the class again after
        st.caption(md_text(e, limit=300))
        return
    except ClassError:
        st.rerun()
        return
    if (info.question, info.revealed) != shown:
        st.rerun()
