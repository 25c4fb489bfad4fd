"""A live class: a teacher opens it, students answer the current question, the teacher
reveals the answer and moves on. Anonymous, bounded, and one class per code.

    room = Classroom()                        # NORMVIZ_DB_URL or the SQLite file
    opened = room.open("cells", seed=7)       # opened.info.code, opened.teacher_key
    room.submit(code, question=1, student=sid, answer="3,4")   # last answer wins
    room.counts(code, teacher_key)            # {"3,4": 1}
    room.reveal(code, teacher_key); room.next(code, teacher_key, "name", 8)

Codes are 10 characters of base32 (50 random bits from `secrets`): they cannot
be guessed or listed, and every query goes through the one class a code names.
The teacher's key (never stored, only its hash) guards the teacher's actions.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, and_, delete, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from normviz.classroom.db import CODE_LEN, MAX_ANSWER_CHARS, answers, classes, make_engine

ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"  # base32: no 0/O or 1/I to confuse
_CODE = re.compile(f"[{ALPHABET}]{{{CODE_LEN}}}")
_STUDENT = re.compile(r"[0-9a-f]{16,32}")
_KIND = re.compile(r"[a-z][a-z0-9-]{0,31}")
MAX_SEED = 2**31 - 1


class ClassError(ValueError):
    """What a teacher or student can act on; the message never repeats their input."""


UNKNOWN = ClassError(
    "No open class has this code. Check it with your teacher: codes end when the class "
    "ends or after 12 hours."
)


@dataclass(frozen=True)
class Limits:
    open_classes: int = 200  # unexpired, unclosed classes on this database
    students: int = 500  # answers to one question of one class
    lifetime_s: float = 12 * 3600  # a code works this long after the class opens


@dataclass(frozen=True)
class ClassInfo:
    """What everyone in a class may know: the code and the current question."""

    code: str
    kind: str  # the exercise kind (a practice section slug)
    seed: int
    question: int  # 1 for the first question, +1 each time the teacher moves on
    revealed: bool
    expires: float  # epoch seconds


@dataclass(frozen=True)
class Opened:
    info: ClassInfo
    teacher_key: str  # shown to the teacher once; resumes the teacher's view


def normalize_code(raw: object) -> str:
    """A typed or linked code in canonical form (case, spaces and dashes forgiven).

    Raises:
        ClassError: not a class code.
    """
    text = str(raw)[:64].upper().replace("-", "").replace(" ", "").strip()
    if not _CODE.fullmatch(text):
        raise ClassError(
            f"That is not a class code: a code is {CODE_LEN} letters and digits from 2 to 7."
        )
    return text


def new_student_id() -> str:
    """An anonymous id for one browser session (no name, nothing personal)."""
    return secrets.token_hex(8)


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class Classroom:
    """The live classes of one database (thread-safe: one engine, a connection per call)."""

    def __init__(
        self,
        url: str | None = None,
        limits: Limits = Limits(),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.engine = make_engine(url)
        self.limits = limits
        self.clock = clock

    # ---- reading ------------------------------------------------------------------

    def _row(self, c: Connection, code: object) -> Any:
        """The open class `code` names (unexpired, not ended), else ClassError."""
        code = normalize_code(code)
        row = c.execute(select(classes).where(classes.c.code == code)).first()
        if row is None or row.closed or row.expires <= self.clock():
            raise UNKNOWN
        return row

    @staticmethod
    def _info(row: Any) -> ClassInfo:
        return ClassInfo(row.code, row.kind, int(row.seed), row.question, row.revealed, row.expires)

    def get(self, code: object) -> ClassInfo:
        """The class `code` names, as a student sees it."""
        with self.engine.begin() as c:
            return self._info(self._row(c, code))

    def _teacher_row(self, c: Connection, code: object, teacher_key: object) -> Any:
        row = self._row(c, code)
        if not hmac.compare_digest(row.teacher_hash, _hash(str(teacher_key)[:128])):
            raise ClassError("That teacher key does not belong to this class.")
        return row

    def teach(self, code: object, teacher_key: object) -> ClassInfo:
        """The class, if `teacher_key` is its teacher's (to resume the teacher's view)."""
        with self.engine.begin() as c:
            return self._info(self._teacher_row(c, code, teacher_key))

    def answer_of(self, code: object, question: int, student: str) -> str | None:
        """The answer this student gave to this question, if any."""
        with self.engine.begin() as c:
            row = self._row(c, code)
            return c.execute(
                select(answers.c.answer).where(
                    answers.c.class_id == row.id,
                    answers.c.question == int(question),
                    answers.c.student == str(student)[:32],
                )
            ).scalar()

    def counts(self, code: object, teacher_key: object, question: int | None = None) -> dict:
        """How many students gave each answer to `question` (default: the current one)."""
        with self.engine.begin() as c:
            row = self._teacher_row(c, code, teacher_key)
            q = row.question if question is None else int(question)
            rows = c.execute(
                select(answers.c.answer, func.count())
                .where(answers.c.class_id == row.id, answers.c.question == q)
                .group_by(answers.c.answer)
            )
            return {a: int(n) for a, n in rows}

    # ---- writing ------------------------------------------------------------------

    def open(self, kind: str, seed: int) -> Opened:
        """Start a class on exercise (`kind`, `seed`); returns its code and teacher key.

        Raises:
            ClassError: too many open classes, or a bad kind or seed.
        """
        self._check_exercise(kind, seed)
        key = secrets.token_urlsafe(16)
        now = self.clock()
        with self.engine.begin() as c:
            self._purge(c, now)
            n_open = c.execute(select(func.count()).select_from(classes)).scalar_one()
            if n_open >= self.limits.open_classes:
                raise ClassError(
                    f"This server already runs {n_open} classes, its limit. End a class you "
                    "no longer need, or try again later."
                )
            for _ in range(8):  # a clash of 50-bit codes is all but impossible; retry anyway
                code = "".join(secrets.choice(ALPHABET) for _ in range(CODE_LEN))
                row = dict(code=code, teacher_hash=_hash(key), kind=kind, seed=int(seed))
                row |= dict(question=1, revealed=False, closed=False, created=now)
                try:
                    with c.begin_nested():
                        c.execute(
                            insert(classes).values(**row, expires=now + self.limits.lifetime_s)
                        )
                    break
                except IntegrityError:
                    continue
            info = self._info(self._row(c, code))
        return Opened(info, key)

    def submit(self, code: object, question: int, student: object, answer: object) -> None:
        """Store a student's answer to the current question (a second answer replaces it).

        Raises:
            ClassError: unknown code, another question, answers closed, full, bad input.
        """
        student = str(student)
        if not _STUDENT.fullmatch(student):
            raise ClassError("This browser session has no valid student id: reload the page.")
        answer = str(answer)
        if len(answer) > MAX_ANSWER_CHARS:
            raise ClassError("That answer is too long to store.")
        with self.engine.begin() as c:
            row = self._row(c, code)
            if int(question) != row.question:
                raise ClassError("The teacher has moved on: answer the new question.")
            if row.revealed:
                raise ClassError("The answer is revealed: this question takes no more answers.")
            mine = and_(
                answers.c.class_id == row.id,
                answers.c.question == row.question,
                answers.c.student == student,
            )
            now = self.clock()
            if c.execute(update(answers).where(mine).values(answer=answer, at=now)).rowcount:
                return
            n = c.execute(
                select(func.count()).where(
                    answers.c.class_id == row.id, answers.c.question == row.question
                )
            ).scalar_one()
            if n >= self.limits.students:
                raise ClassError(f"This question already has {n} answers, the limit for a class.")
            values = dict(class_id=row.id, question=row.question, student=student)
            try:
                with c.begin_nested():
                    c.execute(insert(answers).values(**values, answer=answer, at=now))
            except IntegrityError:  # the same student, at the same moment, elsewhere
                c.execute(update(answers).where(mine).values(answer=answer, at=now))

    def reveal(self, code: object, teacher_key: object) -> ClassInfo:
        """Show the current question's answer to the whole class (answers close)."""
        return self._set(code, teacher_key, revealed=True)

    def next(self, code: object, teacher_key: object, kind: str, seed: int) -> ClassInfo:
        """Move the class on to a new exercise (a new question number, answers open)."""
        self._check_exercise(kind, seed)
        with self.engine.begin() as c:
            row = self._teacher_row(c, code, teacher_key)
            c.execute(
                update(classes)
                .where(classes.c.id == row.id)
                .values(kind=kind, seed=int(seed), question=row.question + 1, revealed=False)
            )
            return self._info(self._row(c, row.code))

    def close(self, code: object, teacher_key: object) -> None:
        """End the class: its code stops working and its answers are deleted."""
        with self.engine.begin() as c:
            row = self._teacher_row(c, code, teacher_key)
            c.execute(delete(answers).where(answers.c.class_id == row.id))
            c.execute(delete(classes).where(classes.c.id == row.id))

    def _set(self, code: object, teacher_key: object, **values: object) -> ClassInfo:
        with self.engine.begin() as c:
            row = self._teacher_row(c, code, teacher_key)
            c.execute(update(classes).where(classes.c.id == row.id).values(**values))
            return self._info(self._row(c, row.code))

    def _purge(self, c: Connection, now: float) -> None:
        """Delete expired and ended classes with their answers."""
        gone = select(classes.c.id).where(or_(classes.c.expires <= now, classes.c.closed))
        c.execute(delete(answers).where(answers.c.class_id.in_(gone)))
        c.execute(delete(classes).where(or_(classes.c.expires <= now, classes.c.closed)))

    @staticmethod
    def _check_exercise(kind: str, seed: int) -> None:
        if not isinstance(kind, str) or not _KIND.fullmatch(kind):
            raise ClassError("Unknown exercise kind.")
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
            raise ClassError(f"The seed must be a whole number from 0 to {MAX_SEED}.")
