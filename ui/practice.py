"""The Practice page's interaction: answer widgets, feedback, the score, the live class.

Grading, generation and words live in normviz.practice; the database in
normviz.classroom. Here: which widget takes which answer form, what a click on the
grid does, what the session remembers, and the two polling views of a live class.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import streamlit as st

from normviz import practice
from normviz.axes import gridview
from normviz.classroom import (
    ClassError,
    ClassInfo,
    Classroom,
    ClassUnavailable,
    default_url,
)
from normviz.practice import Exercise, Verdict, live
from ui import comeback, identity, runner, safe, state, tensorgrid
from ui.safe import md_text

PAGE = "practice"
KIND, CLASS = state.key(PAGE, "kind"), state.key(PAGE, "class")  # the page knobs' session keys
_DONE = "pr_done"  # tag -> (answer, correct): this session's checked answers


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
        st.session_state.setdefault(KIND, practice.KNOBS[0].default)
    if "class" not in st.query_params:  # joining a class is the exception, not a setting
        st.session_state.setdefault(CLASS, "")
    return state.page_params(PAGE)


def question(ex: Exercise) -> None:
    """The exercise's heading, intro and prompt."""
    s = practice.by_slug(practice.SECTIONS, ex.kind)
    st.subheader(s.label)
    st.markdown(s.intro)
    st.markdown(ex.prompt)


@functools.lru_cache(maxsize=64)
def class_exercise(kind: str, seed: int) -> Exercise:
    """A live class's exercise (its kind checked when the class opened), for the student's
    view, which draws it again at every poll: the runner's cached result is a copy made
    on every read (st.cache_data), this is the one frozen object."""
    return practice.exercise(kind, seed)


def exercise(kind: str, seed: int) -> Exercise | None:
    """The exercise (cached by the runner), or None after showing why it cannot run."""
    section = practice.by_slug(practice.SECTIONS, kind)
    return runner.result(PAGE, section, practice.Setup(seed), {})


# ---- the grid -----------------------------------------------------------------------------


@st.cache_resource(max_entries=64, show_spinner=False)
def _grid(
    kind: str,
    seed: int,
    picked: tuple[int, ...],
    marks: tuple[tuple[int, ...], tuple[int, ...]] | None,
    open_: bool,
) -> gridview.Grid:
    """The grid's data, keyed on plain values: the picked cells, and the missed and extra ones."""
    verdict = Verdict(False, "", *marks) if marks is not None else None
    return gridview.exercise_grid(practice.exercise(kind, seed), picked, verdict, open_)


def _names(ex: Exercise) -> list[str]:
    assert ex.case is not None
    return list(practice.cell_names(ex.case))


def _on_pick(key: str, grid_key: str, names: Sequence[str]) -> None:
    """A click or tap on the grid toggled a cell: the grid sends the cells now picked."""
    got = tensorgrid.picked_cells(grid_key, len(names))
    if got is not None:  # else a crafted value: nothing changes
        st.session_state[key] = [names[i] for i in got]


def grid(ex: Exercise, tag: str, verdict: Verdict | None, answer: str | None = None) -> None:
    """The exercise's grid (ui/tensorgrid.py): cells toggle on a click or tap while a cells
    answer is open, else it is for looking."""
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
    open_ = ex.form == "cells" and verdict is None and answer is None
    data = _grid(ex.kind, ex.seed, picked, marks, open_)
    grid_key = f"pr_grid_{tag}"
    pick = functools.partial(_on_pick, key, grid_key, _names(ex)) if open_ else None
    tensorgrid.show(data, grid_key, pick)


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


def submit(info: ClassInfo, ex: Exercise, answer: str | None) -> str | None:
    """Send this browser's answer to the class; the stored answer, or None after a message."""
    try:
        key = practice.parse_answer(ex, answer)
        room().submit(info.code, info.question, identity.browser(), key)
    except (ClassError, practice.AnswerError) as e:
        st.error(md_text(e, limit=300), icon=":material/block:")
        return None
    return key


def teaches(code: str) -> bool:
    """Does this browser teach the class? A reload, a lost process or a restart keeps
    that: a session that did not start the class says once that the view is back."""
    try:
        mine = room().is_teacher(code, identity.browser())
    except ClassError as e:
        st.error(md_text(e, limit=300), icon=":material/block:")
        return False
    if mine and identity.first_teacher_run(code):
        st.info(live.BACK, icon=":material/restart_alt:")
    return mine


def join(code: str) -> ClassInfo | None:
    """The class a link or this session names, or None (after a clear message). A class's
    page comes back by itself after its session is lost (ui.comeback)."""
    if not code:
        return None
    comeback.watch()
    try:
        return room().get(code)
    except ClassError as e:
        st.error(md_text(e, limit=300), icon=":material/block:")
        if not isinstance(e, ClassUnavailable):  # a busy database keeps the class
            st.session_state[CLASS] = ""
        return None


def start(kind: str, seed: int) -> None:
    """Callback: open a class on this exercise; this browser becomes its teacher."""
    try:
        opened = room().open(kind, seed, identity.browser(), identity.address())
    except ClassError as e:
        st.session_state["pr_error"] = str(e)
        return
    identity.keep_key(opened.info.code, opened.teacher_key)
    st.session_state[CLASS] = opened.info.code


def resume(code_key: str, teacher_key_key: str) -> None:
    """Callback: make this browser a teacher of a class, with its code and teacher key."""
    code, key = st.session_state.get(code_key, ""), st.session_state.get(teacher_key_key, "")
    try:
        info = room().resume(code, key, identity.browser())
    except ClassError as e:
        st.session_state["pr_error"] = str(e)
        return
    identity.keep_key(info.code, key)
    st.session_state[CLASS] = info.code


def teacher_action(action: str, code: str, kind: str = "", seed: int = 0) -> None:
    """Callback of the teacher's buttons: reveal, next question, end the class, new key."""
    me = identity.browser()
    try:
        if action == "reveal":
            room().reveal(code, me)
        elif action == "next":  # the kind as picked now (args are from the last run)
            room().next(code, me, st.session_state.get("pr_next_kind", kind), seed)
        elif action == "rekey":
            identity.keep_key(code, room().rekey(code, me))
        else:
            room().close(code, me)
            st.session_state[CLASS] = ""
    except ClassError as e:
        st.session_state["pr_error"] = str(e)


def key_panel(code: str) -> None:
    """The teacher key, only when asked for (off by default: never projected unasked)."""
    if not st.toggle("Show teacher key", key=f"pr_show_key_{code}", help=live.KEY_HELP):
        return
    key = identity.held_key(code)
    if key is None:  # only its hash is stored: a new one replaces it
        st.caption(live.KEY_GONE)
        st.button(
            "Make a new teacher key", key="pr_rekey", on_click=teacher_action, args=("rekey", code)
        )
        return
    st.info(live.TEACHER_KEY, icon=":material/key:")
    with st.container(key="pr_key_box"):
        st.code(key, language=None)


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
