"""The live class's database cannot freeze a page, and the store's abuse limits.

Failures (a write-locked SQLite file, a read-only or full database, a deleted file, a
PostgreSQL server that accepts and never answers, or refuses) raise ClassUnavailable,
and each call returns while the failure is still there: the test holds the lock or the
silent connection until the call is back, so a call that waited it out would hang the
test instead of passing. No call holds the page-run turn while it waits.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from pgcluster import db_url, pg_server  # noqa: F401  (fixtures)
from sqlalchemy import event, select

from normviz.classroom import ClassError, Classroom, ClassUnavailable, Limits, new_student_id
from normviz.classroom.db import classes, teachers

GUARD_S = 60  # a deadlock guard only: a passing call returns long before it


class Clock:
    def __init__(self) -> None:
        self.t = 1_000_000.0

    def __call__(self) -> float:
        return self.t


def _sqlite(tmp_path: Path) -> tuple[str, Path]:
    path = tmp_path / "classes.db"
    return f"sqlite:///{path}", path


LOCKER = """
import sqlite3, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("BEGIN EXCLUSIVE")
c.execute("UPDATE classroom_classes SET seed = seed")
print("locked", flush=True)
sys.stdin.readline()
c.execute("ROLLBACK")
"""


def test_a_write_locked_sqlite_file_reads_on_and_refuses_writes_clearly(tmp_path: Path) -> None:
    url, path = _sqlite(tmp_path)
    room = Classroom(url)
    o = room.open("cells", 1, client="t")
    code, sid = o.info.code, new_student_id()
    room.submit(code, 1, sid, "1")
    locker = subprocess.Popen(
        [sys.executable, "-c", LOCKER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert locker.stdout is not None and locker.stdout.readline() == "locked\n"
        # while the other process holds the write lock: reads answer (WAL readers) ...
        assert room.get(code).question == 1
        assert room.answer_of(code, 1, sid) == "1"
        assert room.counts(code, o.teacher_key) == {"1": 1}
        # ... and writes fail with the clear error, before the lock is released
        with pytest.raises(ClassUnavailable, match="busy"):
            room.submit(code, 1, new_student_id(), "2")
        with pytest.raises(ClassUnavailable, match="busy"):
            room.reveal(code, o.teacher_key)
        with pytest.raises(ClassUnavailable, match="busy"):
            room.open("cells", 2, client="t2")
        assert locker.poll() is None  # the lock was still held all along
    finally:
        locker.communicate("go\n", timeout=GUARD_S)
    assert locker.returncode == 0
    room.submit(code, 1, new_student_id(), "2")  # and work again after
    assert room.counts(code, o.teacher_key) == {"1": 1, "2": 1}


def test_a_read_only_database_reads_and_refuses_writes_clearly(tmp_path: Path) -> None:
    url, path = _sqlite(tmp_path)
    room = Classroom(url)
    o = room.open("cells", 1, client="t")
    room.engine.dispose()
    ro = Classroom(f"sqlite:///file:{path}?mode=ro&uri=true")
    assert ro.get(o.info.code).code == o.info.code
    with pytest.raises(ClassUnavailable, match="read-only"):
        ro.submit(o.info.code, 1, new_student_id(), "1")
    with pytest.raises(ClassUnavailable, match="read-only"):
        ro.reveal(o.info.code, o.teacher_key)
    assert not room.get(o.info.code).revealed


def test_a_full_database_refuses_clearly_and_keeps_every_acknowledged_answer(
    tmp_path: Path,
) -> None:
    url, _ = _sqlite(tmp_path)
    room = Classroom(url)
    o = room.open("cells", 1, client="t")
    room.engine.dispose()

    @event.listens_for(room.engine, "connect")
    def full(dbapi_connection, record) -> None:  # type: ignore[no-untyped-def]
        pages = dbapi_connection.execute("PRAGMA page_count").fetchone()[0]
        dbapi_connection.execute(f"PRAGMA max_page_count={pages + 2}")  # "the disk is full"

    acked: list[str] = []
    with pytest.raises(ClassUnavailable, match="full"):
        for i in range(500):
            acked.append(room.submit(o.info.code, 1, new_student_id(), f"{i:04d}" + "x" * 1900))
    assert acked  # some fitted before the disk filled
    room.engine.dispose()
    fresh = Classroom(url)  # a restart: every acknowledged answer is there, no other
    assert fresh.counts(o.info.code, o.teacher_key) == dict.fromkeys(acked, 1)


def test_a_deleted_database_file_is_detected_and_reported(tmp_path: Path) -> None:
    url, path = _sqlite(tmp_path)
    room = Classroom(url)
    o = room.open("cells", 1, client="t")
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    for call in (
        lambda: room.submit(o.info.code, 1, new_student_id(), "1"),
        lambda: room.get(o.info.code),
        lambda: room.open("cells", 2, client="t2"),
    ):
        with pytest.raises(ClassUnavailable, match="deleted"):
            call()
    assert not path.exists()  # and no empty file was made in its place


class Silent:
    """A loopback server that accepts connections and never says a word."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.held: list[socket.socket] = []
        self.accepted = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)
            self.accepted.set()

    def close(self) -> None:
        for c in self.held:
            c.close()
        self.sock.close()


def _in_thread(call) -> BaseException | None:  # type: ignore[no-untyped-def]
    """Run `call`; what it raised (the thread is a deadlock guard, not a time limit)."""
    got: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            got.append(None)
        except BaseException as e:
            got.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(GUARD_S)
    assert got, "the call never came back"
    return got[0]


def test_a_postgresql_that_never_answers_gives_the_clear_error() -> None:
    server = Silent()
    try:
        room = Classroom(f"postgresql+psycopg://u@127.0.0.1:{server.port}/normviz")
        for call in (lambda: room.get("AAAAAAAAAA"), lambda: room.open("cells", 1, "t")):
            err = _in_thread(call)
            assert isinstance(err, ClassUnavailable), err
            assert "does not answer" in str(err)
        assert server.accepted.is_set()  # it did connect, and the server stayed silent
        assert all(c.fileno() >= 0 for c in server.held)  # ... never hung up
    finally:
        server.close()


def test_a_refused_postgresql_gives_the_clear_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # free, and nothing listens once closed
    room = Classroom(f"postgresql+psycopg://u@127.0.0.1:{port}/normviz")
    err = _in_thread(lambda: room.submit("AAAAAAAAAA", 1, new_student_id(), "1"))
    assert isinstance(err, ClassUnavailable) and "does not answer" in str(err), err


def test_a_bystander_run_is_not_queued_behind_a_waiting_database_call(tmp_path: Path) -> None:
    from ui.runs import RUNS

    assert RUNS.slots == 1
    url, _ = _sqlite(tmp_path)
    room = Classroom(url)
    code = room.open("cells", 1, client="t").info.code
    release, waiting, order = threading.Event(), threading.Event(), []

    @event.listens_for(room.engine, "before_cursor_execute")
    def stall(*args: object) -> None:
        waiting.set()
        release.wait(GUARD_S)  # the database "hangs" until the test lets it go

    def student() -> None:
        with RUNS.enter():
            room.get(code)
            order.append("student")

    def bystander() -> None:
        with RUNS.enter():
            order.append("bystander")

    a = threading.Thread(target=student)
    a.start()
    assert waiting.wait(GUARD_S)  # the student's run is in its database call
    b = threading.Thread(target=bystander)
    b.start()
    b.join(GUARD_S)  # comes back only if the turn was free while the database waited
    release.set()
    a.join(GUARD_S)
    assert order == ["bystander", "student"]


# ---- identity and limits (on SQLite and PostgreSQL) -------------------------------------


def test_classes_end_when_idle_as_well_as_at_the_lifetime(db_url: str) -> None:  # noqa: F811
    clock = Clock()
    room = Classroom(db_url, Limits(idle_s=600, lifetime_s=3600), clock)
    o = room.open("cells", 1, client="t")
    code = o.info.code
    for _ in range(4):  # activity keeps it open: a student answers every 9 minutes
        clock.t += 540
        room.submit(code, 1, new_student_id(), "1")
    clock.t += 599
    assert room.get(code).code == code
    clock.t += 1  # ten minutes without activity
    with pytest.raises(ClassError, match="10 minutes without activity"):
        room.get(code)
    busy = room.open("cells", 1, client="t")
    for _ in range(6):  # busy, yet ended at the lifetime
        clock.t += 540
        room.submit(busy.info.code, 1, new_student_id(), "1")
    clock.t += 400  # an hour after it opened, 400 s after its last answer
    with pytest.raises(ClassError, match="No open class"):
        room.get(busy.info.code)


def test_a_teachers_view_keeps_a_quiet_class_open(db_url: str) -> None:  # noqa: F811
    clock = Clock()
    room = Classroom(db_url, Limits(idle_s=600), clock)
    o = room.open("cells", 1, client="t")
    for _ in range(5):
        clock.t += 300
        assert room.teach(o.info.code, o.teacher_key).question == 1
    assert room.get(o.info.code).question == 1  # 25 minutes on, no student said a word


def test_one_browser_and_one_address_open_a_limited_number_of_classes(
    db_url: str,  # noqa: F811
) -> None:
    clock = Clock()
    limits = Limits(opens_per_client=2, opens_per_address=3, open_window_s=3600)
    room = Classroom(db_url, limits, clock)
    first = room.open("cells", 1, client="browser-a", address="203.0.113.5")
    room.open("cells", 1, client="browser-a", address="203.0.113.5")
    with pytest.raises(ClassError, match="This browser has opened 2 classes in the last 60 min"):
        room.open("cells", 1, client="browser-a", address="198.51.100.7")
    room.close(first.info.code, "browser-a")  # ending one does not give it back
    with pytest.raises(ClassError, match="This browser has opened 2 classes"):
        room.open("cells", 1, client="browser-a", address="198.51.100.7")
    room.open("cells", 1, client="browser-b", address="203.0.113.5")  # a colleague, same NAT
    with pytest.raises(ClassError, match="This address has opened 3 classes"):  # fresh cookies
        room.open("cells", 1, client="browser-c", address="203.0.113.5")
    room.open("cells", 1, client="browser-c", address="198.51.100.7")  # elsewhere: not held up
    clock.t += 3601
    room.open("cells", 1, client="browser-a", address="203.0.113.5")  # a new window


def test_300_browsers_behind_one_address_all_answer_once(db_url: str) -> None:  # noqa: F811
    """Answers are keyed on the browser: a hall behind one NAT is 300 students, and one
    browser (any number of its sessions, reloads, processes) is one answer."""
    limits = Limits()
    assert limits.students >= 300
    room = Classroom(db_url)
    o = room.open("cells", 1, client="teacher", address="10.0.0.1")
    browsers = [new_student_id() for _ in range(300)]
    for i, b in enumerate(browsers):
        room.submit(o.info.code, 1, b, str(i % 3))
    for b in browsers[:100]:  # a reload or a second tab sends again: never counted twice
        room.submit(o.info.code, 1, b, "0")
    assert sum(room.counts(o.info.code, "teacher").values()) == 300
    moved = sum(1 for i in range(100) if i % 3)  # these changed their answer to "0"
    assert room.counts(o.info.code, "teacher")["0"] == 100 + moved  # replaced, not added


def test_the_opener_teaches_and_another_browser_only_with_the_key(
    db_url: str,  # noqa: F811
) -> None:
    room = Classroom(db_url)
    o = room.open("cells", 1, client="teacher-browser", address="10.0.0.1")
    code = o.info.code
    assert room.is_teacher(code, "teacher-browser")  # a reload, a restart: the same cookie
    assert not room.is_teacher(code, "student-browser")
    with pytest.raises(ClassError, match="Only this class's teacher"):
        room.reveal(code, "student-browser")
    with pytest.raises(ClassError, match="teacher key does not belong"):
        room.resume(code, o.teacher_key[:-1], "student-browser")
    assert not room.is_teacher(code, "student-browser")
    room.resume(code, o.teacher_key, "laptop")  # another device, with the key
    assert room.is_teacher(code, "laptop") and room.reveal(code, "laptop").revealed
    new = room.rekey(code, "teacher-browser")  # a new key: the old one stops working
    with pytest.raises(ClassError, match="teacher key does not belong"):
        room.resume(code, o.teacher_key, "phone")
    room.resume(code, new, "phone")
    assert room.is_teacher(code, "laptop") and room.is_teacher(code, "phone")
    with room.engine.connect() as c:
        stored = " ".join(" ".join(map(str, r)) for r in c.execute(select(teachers)))
    assert "teacher-browser" not in stored and "laptop" not in stored  # hashed, per class


def test_the_teacher_key_is_never_stored(db_url: str) -> None:  # noqa: F811
    room = Classroom(db_url)
    o = room.open("cells", 1, client="t")
    with room.engine.connect() as c:
        rows = [tuple(map(str, r)) for r in c.execute(select(classes))]
    assert rows and not any(o.teacher_key in field for r in rows for field in r)
    with pytest.raises(ClassError, match="teacher key"):
        room.reveal(o.info.code, o.teacher_key[:-1])
    assert room.reveal(o.info.code, o.teacher_key).revealed


def test_a_database_that_cannot_be_made_fails_at_first_use_clearly(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    room = Classroom(f"sqlite:///{tmp_path / 'file' / 'classes.db'}")  # no call yet
    with pytest.raises(ClassUnavailable, match="database failed"):
        room.get("AAAAAAAAAA")


def test_the_readme_states_the_caps_in_force() -> None:
    readme = " ".join((Path(__file__).resolve().parent.parent / "README.md").read_text().split())
    lim = Limits()
    assert lim.open_window_s == 3600  # "an hour" below
    for words in (
        f"ends after {lim.idle_s / 60:g} minutes without activity",
        f"at the latest {lim.lifetime_s / 3600:g} hours after it opened",
        f"at most {lim.open_classes} open classes",
        f"one browser opens at most {lim.opens_per_client} classes an hour",
        f"one address (as nginx passes it on) at most {lim.opens_per_address},",
        f"a question takes at most {lim.students} answers",
    ):
        assert words in readme, words


def test_a_browser_is_one_student_per_class_under_a_per_class_token(
    db_url: str,  # noqa: F811
) -> None:
    from sqlalchemy import select as sel

    from normviz.classroom.db import answers

    room = Classroom(db_url)
    one, two = (room.open("cells", 1, client="t") for _ in range(2))
    browser = new_student_id()
    for answer in ("1", "2", "3"):  # a reload or another process sends it again
        room.submit(one.info.code, 1, browser, answer)
    room.submit(two.info.code, 1, browser, "1")
    assert room.counts(one.info.code, one.teacher_key) == {"3": 1}
    assert room.answer_of(one.info.code, 1, browser) == "3"
    with room.engine.connect() as c:
        stored = [r.student for r in c.execute(sel(answers))]
    assert len(set(stored)) == 2 and browser not in " ".join(stored)  # per class, not the id
