"""A live class: a teacher opens it, students answer the current question, the teacher
reveals the answer and moves on. Anonymous, bounded, and one class per code.

    room = Classroom()                        # NORMVIZ_DB_URL or the SQLite file
    opened = room.open("cells", seed=7, client=browser, address="203.0.113.5")
    room.submit(code, question=1, student=token, answer="3,4")
    room.counts(code, browser)                # {"3,4": 1}: the opener's browser teaches
    room.reveal(code, browser); room.next(code, browser, "name", 8)
    room.resume(code, opened.teacher_key, other_browser)   # another device teaches too

Codes are 10 characters of base32 (50 random bits from `secrets`): they cannot
be guessed or listed, and every query goes through the one class a code names.
A teacher is a browser: the one that opened the class, and any other that gave the
class's teacher key (`resume`), each stored as a per-class token (a hash of the class
and the browser's id). Every teacher call takes that browser id, or the key itself;
the key is never stored, only its sha256 (compared with `hmac.compare_digest`). A
student is the id their browser holds, stored as a per-class token too: one answer per
token and question, a later one replaces it. The opener's browser and address (stored
hashed) bound how many classes one browser and one address open (`Limits`).

Every call waits at most about 1.5 s on the database, steps out of the page-run turn
meanwhile (`normviz.gate.around`), and raises `ClassUnavailable` (a `ClassError`) when
the database fails; `submit` returns only once the answer is committed.
"""

from __future__ import annotations

import hmac
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from typing import Any

from sqlalchemy import Connection, and_, delete, func, insert, or_, select, update
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from normviz import gate
from normviz.classroom.codes import (
    ALPHABET,
    STUDENT_RE,
    ClassInfo,
    Limits,
    Opened,
    check_exercise,
    client_hash,
    normalize_code,
    sha,
    student_token,
    teacher_token,
    unknown,
)
from normviz.classroom.db import (
    CODE_LEN,
    MAX_ANSWER_CHARS,
    WRITE,
    ClassError,
    ClassUnavailable,
    answers,
    classes,
    create_tables,
    make_engine,
    openings,
    sqlite_path,
    teachers,
    unavailable,
)

FAILURES = (SQLAlchemyError, sqlite3.Error, OSError)
DEFAULT_LIMITS = Limits()
TOUCH_S = 60.0  # a teacher's view marks the class active at most this often


@contextmanager
def aside() -> Iterator[None]:
    """Step out of the page-run turn (and any gate slot) while waiting on the database."""
    with ExitStack() as stack:
        for hook in gate.around:
            stack.enter_context(hook())
        yield


class Classroom:
    """The live classes of one database (thread-safe: one engine, a connection per call)."""

    def __init__(
        self,
        url: str | None = None,
        limits: Limits = DEFAULT_LIMITS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.engine = make_engine(url, create=False)  # no database call before the first use
        self.limits = limits
        self.clock = clock
        self._path = sqlite_path(make_url(url) if url else self.engine.url)
        self._file: tuple[int, int] | None = None  # (device, inode) of the file in use
        self._ready = False
        self._lock = threading.Lock()

    # ---- the one way to the database -----------------------------------------------

    @contextmanager
    def _tx(self, write: bool = False) -> Iterator[Connection]:
        """A transaction (BEGIN IMMEDIATE if `write`), committed when the block ends.

        Raises:
            ClassUnavailable: the database failed (locked, down, read-only, full, deleted).
        """
        with aside():
            try:
                self._setup()
                engine = self.engine.execution_options(**{WRITE: True}) if write else self.engine
                with engine.connect() as c:
                    tx = c.begin()
                    try:
                        yield c
                    except BaseException:
                        # SQLite may have rolled back already (a full disk): the first
                        # error is the one to report, not the rollback's
                        with suppress(*FAILURES):
                            tx.rollback()
                        raise
                    tx.commit()  # an answer is acknowledged only once this returns
            except FAILURES as e:
                raise unavailable(e) from e

    def _setup(self) -> None:
        """Create the tables once; then check the SQLite file is still the one in use."""
        if not self._ready:
            with self._lock:
                if not self._ready:
                    if self._path is not None:
                        self._path.parent.mkdir(parents=True, exist_ok=True)
                    create_tables(self.engine)
                    if self._path is not None:
                        st = os.stat(self._path)
                        self._file = (st.st_dev, st.st_ino)
                    self._ready = True
        if self._file is not None:
            try:
                st = os.stat(self._path)  # type: ignore[arg-type]
            except FileNotFoundError:
                raise ClassUnavailable("its database file was deleted") from None
            if (st.st_dev, st.st_ino) != self._file:
                raise ClassUnavailable("its database file was replaced")

    # ---- reading ------------------------------------------------------------------

    def _row(self, c: Connection, code: object) -> Any:
        """The open class `code` names (unexpired, not idle, not ended), else ClassError."""
        code = normalize_code(code)
        row = c.execute(select(classes).where(classes.c.code == code)).first()
        now = self.clock()
        if row is None or row.closed or row.expires <= now:
            raise unknown(self.limits)
        if row.active + self.limits.idle_s <= now:
            raise unknown(self.limits)
        return row

    @staticmethod
    def _info(row: Any) -> ClassInfo:
        return ClassInfo(row.code, row.kind, int(row.seed), row.question, row.revealed, row.expires)

    def get(self, code: object) -> ClassInfo:
        """The class `code` names, as a student sees it."""
        with self._tx() as c:
            return self._info(self._row(c, code))

    def _teacher_row(self, c: Connection, code: object, teacher: object) -> Any:
        """The class, if `teacher` is one of its teachers' browser ids or its key."""
        row = self._row(c, code)
        if not (self._teaches(c, row, teacher) or self._key_fits(row, teacher)):
            raise ClassError(
                "Only this class's teacher can do that: resume teaching with its teacher key."
            )
        return row

    @staticmethod
    def _key_fits(row: Any, key: object) -> bool:
        return hmac.compare_digest(row.teacher_hash, sha(str(key)[:128]))

    @staticmethod
    def _teaches(c: Connection, row: Any, browser: object) -> bool:
        mine = and_(
            teachers.c.class_id == row.id, teachers.c.token == teacher_token(row.code, browser)
        )
        return c.execute(select(func.count()).where(mine)).scalar_one() > 0

    def is_teacher(self, code: object, browser: object) -> bool:
        """Does this browser teach the class (it opened it, or resumed it with the key)?"""
        with self._tx() as c:
            return self._teaches(c, self._row(c, code), browser)

    def resume(self, code: object, teacher_key: object, browser: object) -> ClassInfo:
        """Make `browser` a teacher of the class, if `teacher_key` is the class's key."""
        with self._tx(write=True) as c:
            row = self._row(c, code)
            if not self._key_fits(row, teacher_key):
                raise ClassError("That teacher key does not belong to this class.")
            if not self._teaches(c, row, browser):
                c.execute(
                    insert(teachers).values(class_id=row.id, token=teacher_token(row.code, browser))
                )
            return self._info(row)

    def rekey(self, code: object, teacher: object) -> str:
        """A new teacher key for the class (the old one stops working); returns it."""
        key = secrets.token_urlsafe(16)
        with self._tx(write=True) as c:
            row = self._teacher_row(c, code, teacher)
            c.execute(update(classes).where(classes.c.id == row.id).values(teacher_hash=sha(key)))
        return key

    def teach(self, code: object, teacher: object) -> ClassInfo:
        """The class, if `teacher` (a browser id or the key) teaches it.

        A teacher's view keeps the class active (marked at most once a minute).
        """
        with self._tx() as c:
            row = self._teacher_row(c, code, teacher)
        if row.active + TOUCH_S <= self.clock():
            with suppress(ClassUnavailable), self._tx(write=True) as c:  # busy: the next view
                c.execute(update(classes).where(classes.c.id == row.id).values(active=self.clock()))
        return self._info(row)

    def answer_of(self, code: object, question: int, student: object) -> str | None:
        """The answer this student's token gave to this question, if any."""
        with self._tx() as c:
            return self._answer(c, self._row(c, code), question, student)

    def seen_by(self, code: object, student: object) -> tuple[ClassInfo, str | None]:
        """The class and this student's answer to its current question: one read (a poll)."""
        with self._tx() as c:
            row = self._row(c, code)
            return self._info(row), self._answer(c, row, row.question, student)

    @staticmethod
    def _answer(c: Connection, row: Any, question: int, student: object) -> str | None:
        mine = answers.c.student == student_token(row.code, student)
        where = and_(answers.c.class_id == row.id, answers.c.question == int(question), mine)
        return c.execute(select(answers.c.answer).where(where)).scalar()

    def counts(self, code: object, teacher: object, question: int | None = None) -> dict:
        """How many students gave each answer to `question` (default: the current one)."""
        with self._tx() as c:
            row = self._teacher_row(c, code, teacher)
            q = row.question if question is None else int(question)
            rows = c.execute(
                select(answers.c.answer, func.count())
                .where(answers.c.class_id == row.id, answers.c.question == q)
                .group_by(answers.c.answer)
            )
            return {a: int(n) for a, n in rows}

    # ---- writing ------------------------------------------------------------------

    def open(self, kind: str, seed: int, client: object = "", address: object = "") -> Opened:
        """Start a class on exercise (`kind`, `seed`); returns its code and teacher key.

        `client`: the opener's browser id, which becomes the class's teacher; `address`
        the opener's address. Each is rate-limited (`opens_per_client`, `_per_address`).

        Raises:
            ClassError: too many open classes, this browser or address opened too many,
                bad kind or seed.
        """
        check_exercise(kind, seed)
        key = secrets.token_urlsafe(16)
        lim, who = self.limits, client_hash(client)
        keys = [
            (client_hash("browser:" + str(client)), lim.opens_per_client, "This browser"),
            (client_hash("address:" + str(address)), lim.opens_per_address, "This address"),
        ]
        with self._tx(write=True) as c:
            now = self.clock()
            self._purge(c, now)
            for hashed, most, name in keys:
                mine = c.execute(
                    select(func.count()).where(
                        openings.c.client == hashed, openings.c.at > now - lim.open_window_s
                    )
                ).scalar_one()
                if mine >= most:
                    raise ClassError(
                        f"{name} has opened {mine} classes in the last "
                        f"{lim.open_window_s / 60:g} minutes, the limit. Resume one of them "
                        "with its teacher key, or try again later."
                    )
            n_open = c.execute(select(func.count()).where(classes.c.closed.is_(False))).scalar_one()
            if n_open >= lim.open_classes:
                raise ClassError(
                    f"This server already runs {n_open} classes, its limit. End a class you "
                    "no longer need, or try again later."
                )
            for _ in range(8):  # a clash of 50-bit codes is all but impossible; retry anyway
                code = "".join(secrets.choice(ALPHABET) for _ in range(CODE_LEN))
                row = dict(code=code, teacher_hash=sha(key), client=who, kind=kind)
                row |= dict(seed=int(seed), question=1, revealed=False, closed=False)
                row |= dict(created=now, active=now, expires=now + lim.lifetime_s)
                try:
                    with c.begin_nested():
                        c.execute(insert(classes).values(**row))
                    break
                except IntegrityError:
                    continue
            info = self._info(row := self._row(c, code))
            c.execute(insert(teachers).values(class_id=row.id, token=teacher_token(code, client)))
            c.execute(insert(openings), [dict(client=h, at=now) for h, _, _ in keys])
        return Opened(info, key)

    def submit(self, code: object, question: int, student: object, answer: object) -> str:
        """Store a student's answer to the current question; returns it once committed.

        `student` is the browser's id: one answer per browser and question, a second
        one replaces the first.

        Raises:
            ClassError: unknown code, another question, answers closed, full, bad input.
            ClassUnavailable: the database failed: the answer is not in.
        """
        student = str(student)
        if not STUDENT_RE.fullmatch(student):
            raise ClassError("This browser has no valid student token: reload the page.")
        answer = str(answer)
        if len(answer) > MAX_ANSWER_CHARS:
            raise ClassError("That answer is too long to store.")
        with self._tx(write=True) as c:
            row = self._row(c, code)
            if int(question) != row.question:
                raise ClassError("The teacher has moved on: answer the new question.")
            if row.revealed:
                raise ClassError("The answer is revealed: this question takes no more answers.")
            now = self.clock()
            c.execute(update(classes).where(classes.c.id == row.id).values(active=now))
            this_q = and_(answers.c.class_id == row.id, answers.c.question == row.question)
            student = student_token(row.code, student)
            mine = and_(this_q, answers.c.student == student)
            if c.execute(update(answers).where(mine).values(answer=answer, at=now)).rowcount:
                return answer
            n = c.execute(select(func.count()).where(this_q)).scalar_one()
            if n >= self.limits.students:
                raise ClassError(f"This question already has {n} answers, the limit for a class.")
            values = dict(class_id=row.id, question=row.question, student=student, client="")
            try:
                with c.begin_nested():
                    c.execute(insert(answers).values(**values, answer=answer, at=now))
            except IntegrityError:  # the same token, at the same moment, elsewhere
                c.execute(update(answers).where(mine).values(answer=answer, at=now))
        return answer

    def reveal(self, code: object, teacher: object) -> ClassInfo:
        """Show the current question's answer to the whole class (answers close)."""
        return self._set(code, teacher, revealed=True)

    def next(self, code: object, teacher: object, kind: str, seed: int) -> ClassInfo:
        """Move the class on to a new exercise (a new question number, answers open)."""
        check_exercise(kind, seed)
        with self._tx(write=True) as c:
            row = self._teacher_row(c, code, teacher)
            values = dict(kind=kind, seed=int(seed), question=row.question + 1, revealed=False)
            c.execute(
                update(classes).where(classes.c.id == row.id).values(**values, active=self.clock())
            )
            return self._info(self._row(c, row.code))

    def close(self, code: object, teacher: object) -> None:
        """End the class: its code stops working and its answers are deleted.

        The ended class's row (no answers) stays until its opener's window is over, so
        ending and reopening does not change what it counts.
        """
        with self._tx(write=True) as c:
            row = self._teacher_row(c, code, teacher)
            c.execute(delete(answers).where(answers.c.class_id == row.id))
            c.execute(update(classes).where(classes.c.id == row.id).values(closed=True))

    def _set(self, code: object, teacher: object, **values: object) -> ClassInfo:
        with self._tx(write=True) as c:
            row = self._teacher_row(c, code, teacher)
            c.execute(
                update(classes).where(classes.c.id == row.id).values(**values, active=self.clock())
            )
            return self._info(self._row(c, row.code))

    def _purge(self, c: Connection, now: float) -> None:
        """Delete expired and idle classes' answers; drop their rows after the window."""
        lim = self.limits
        over = or_(classes.c.expires <= now, classes.c.active + lim.idle_s <= now)
        c.execute(update(classes).where(over, classes.c.closed.is_(False)).values(closed=True))
        gone = select(classes.c.id).where(classes.c.closed)
        c.execute(delete(answers).where(answers.c.class_id.in_(gone)))
        c.execute(
            delete(classes).where(classes.c.closed, classes.c.created <= now - lim.open_window_s)
        )
        c.execute(delete(openings).where(openings.c.at <= now - lim.open_window_s))
