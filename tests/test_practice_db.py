"""The live class's database layer (normviz.classroom), on SQLite and on PostgreSQL.

Every test taking `url` runs twice: on a SQLite file and on a throwaway local PostgreSQL
cluster (tests/pgcluster.py), or on the database NORMVIZ_TEST_DB_URL names (tests only:
its tables are dropped before each test).
"""

from __future__ import annotations

import math
import multiprocessing
import re
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pgcluster import db_url, pg_server  # noqa: F401  (fixtures)

from normviz.classroom import ClassError, Classroom, Limits, new_student_id, normalize_code
from normviz.classroom.store import ALPHABET

MANY = Limits(opens_per_client=1000, opens_per_address=1000)  # many classes from one client


@pytest.fixture
def url(db_url: str) -> str:  # noqa: F811
    return db_url


class Clock:
    def __init__(self) -> None:
        self.t = 1_000_000.0

    def __call__(self) -> float:
        return self.t


def test_a_class_round_trip(url: str) -> None:
    room = Classroom(url)
    opened = room.open("cells", 7)
    code, key = opened.info.code, opened.teacher_key
    assert (opened.info.kind, opened.info.seed, opened.info.question) == ("cells", 7, 1)
    a, b, c = (new_student_id() for _ in range(3))
    room.submit(code, 1, a, "1,2")
    room.submit(code, 1, b, "1,2")
    room.submit(code, 1, c, "3")
    assert room.counts(code, key) == {"1,2": 2, "3": 1}
    room.submit(code, 1, c, "1,2")  # last answer wins: still one answer per student
    assert room.counts(code, key) == {"1,2": 3}
    assert room.answer_of(code, 1, c) == "1,2"
    info = room.reveal(code, key)
    assert info.revealed and room.get(code).revealed
    with pytest.raises(ClassError, match="revealed"):
        room.submit(code, 1, a, "9")
    info = room.next(code, key, "name", 8)
    assert (info.kind, info.seed, info.question, info.revealed) == ("name", 8, 2, False)
    with pytest.raises(ClassError, match="moved on"):
        room.submit(code, 1, a, "9")
    assert room.counts(code, key) == {}
    assert room.counts(code, key, question=1) == {"1,2": 3}
    room.close(code, key)
    with pytest.raises(ClassError, match="No open class"):
        room.get(code)


def test_a_restart_keeps_the_answers(url: str) -> None:
    room = Classroom(url)
    o = room.open("count", 3)
    sid = new_student_id()
    room.submit(o.info.code, 1, sid, "4;6")
    room.engine.dispose()
    again = Classroom(url)  # a new process would build exactly this
    assert again.counts(o.info.code, o.teacher_key) == {"4;6": 1}
    assert again.teach(o.info.code, o.teacher_key).kind == "count"


def test_one_class_never_sees_anothers_answers(url: str) -> None:
    room = Classroom(url)
    one, two = room.open("cells", 1), room.open("cells", 1)
    sid = new_student_id()
    room.submit(one.info.code, 1, sid, "5")
    assert room.counts(two.info.code, two.teacher_key) == {}
    assert room.answer_of(two.info.code, 1, sid) is None
    with pytest.raises(ClassError, match="teacher key"):
        room.counts(one.info.code, two.teacher_key)
    for act in (room.reveal, room.close):
        with pytest.raises(ClassError):
            act(one.info.code, "guess")
    with pytest.raises(ClassError):
        room.next(one.info.code, two.teacher_key, "cells", 2)


def test_codes_are_random_base32_and_not_enumerable(url: str) -> None:
    room = Classroom(url, MANY)
    codes = [room.open("cells", 0).info.code for _ in range(40)]
    assert len(set(codes)) == len(codes)
    assert all(re.fullmatch(f"[{ALPHABET}]{{10}}", c) for c in codes)
    assert 10 * math.log2(len(ALPHABET)) >= 40  # bits per code
    # no order: codes do not count up, and their letters spread over the alphabet
    assert codes != sorted(codes)
    assert len(Counter("".join(codes))) > 24
    # a near miss is no way in
    first = codes[0]
    near = first[:-1] + ("A" if first[-1] != "A" else "B")
    if near not in codes:
        with pytest.raises(ClassError, match="No open class"):
            room.get(near)


@settings(max_examples=80, deadline=None)
@given(st.text(max_size=80))
def test_hostile_codes_get_a_message_without_the_input(raw: str) -> None:
    try:
        code = normalize_code(raw)
    except ClassError as e:
        assert str(e).startswith("That is not a class code: a code is 10 letters")
        return
    assert re.fullmatch(f"[{ALPHABET}]{{10}}", code)


def test_codes_forgive_case_spaces_and_dashes(url: str) -> None:
    room = Classroom(url)
    code = room.open("cells", 0).info.code
    assert room.get(f" {code[:5].lower()}-{code[5:]} ").code == code


def test_limits_on_classes_answers_and_lifetime(url: str) -> None:
    clock = Clock()
    limits = Limits(
        open_classes=3, students=4, lifetime_s=100, opens_per_client=1000, opens_per_address=1000
    )
    room = Classroom(url, limits, clock)
    opened = [room.open("cells", i) for i in range(3)]
    with pytest.raises(ClassError, match="limit"):
        room.open("cells", 9)
    code = opened[0].info.code
    sids = [new_student_id() for _ in range(5)]
    for s in sids[:4]:
        room.submit(code, 1, s, "1")
    room.submit(code, 1, sids[0], "2")  # changing an answer is not a new one
    with pytest.raises(ClassError, match="limit"):
        room.submit(code, 1, sids[4], "1")
    room.close(opened[1].info.code, opened[1].teacher_key)
    room.open("cells", 9)  # a closed class frees its place
    clock.t += 101  # every code expires
    with pytest.raises(ClassError, match="No open class"):
        room.get(code)
    with pytest.raises(ClassError, match="No open class"):
        room.submit(code, 1, sids[0], "1")
    for i in range(3):
        room.open("cells", i)  # expired classes are purged and free their places


def test_bad_inputs_are_refused(url: str) -> None:
    room = Classroom(url)
    o = room.open("cells", 0)
    code = o.info.code
    with pytest.raises(ClassError, match="student token"):
        room.submit(code, 1, "Robert'); DROP TABLE practice_answers;--", "1")
    with pytest.raises(ClassError, match="too long"):
        room.submit(code, 1, new_student_id(), "1" * 5000)
    for kind, seed in (("", 0), ("x" * 40, 0), ("cells", -1), ("cells", 2**40), ("cells", True)):
        with pytest.raises(ClassError):
            room.open(kind, seed)  # type: ignore[arg-type]
    assert room.counts(code, o.teacher_key) == {}


def _submit_many(url: str, code: str, n: int, answer: str) -> None:
    room = Classroom(url)
    for _ in range(n):
        room.submit(code, 1, new_student_id(), answer)


def test_two_processes_share_one_database(url: str) -> None:
    room = Classroom(url)
    o = room.open("choose", 0)
    room.engine.dispose()  # no open connection crosses the fork
    ctx = multiprocessing.get_context("fork")  # no re-import of torch in the children
    procs = [ctx.Process(target=_submit_many, args=(url, o.info.code, 25, ans)) for ans in "ab"]
    for p in procs:
        p.start()
    _submit_many(url, o.info.code, 25, "c")  # and this process at the same time
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    assert room.counts(o.info.code, o.teacher_key) == {"a": 25, "b": 25, "c": 25}


def test_default_url_is_a_sqlite_file_under_the_repo(monkeypatch) -> None:
    from normviz.classroom import DEFAULT_PATH, ENV, default_url

    monkeypatch.delenv(ENV, raising=False)
    assert default_url() == f"sqlite:///{DEFAULT_PATH}"
    assert DEFAULT_PATH.parent.name == ".normviz"
    monkeypatch.setenv(ENV, "postgresql://example/db")
    assert default_url() == "postgresql://example/db"


def test_sqlite_runs_in_wal_mode(tmp_path: Path) -> None:
    """The SQLite set-up (on a SQLite file whatever NORMVIZ_TEST_DB_URL names)."""
    room = Classroom(f"sqlite:///{tmp_path / 'classes.db'}")
    with room.engine.connect() as c:
        assert c.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
