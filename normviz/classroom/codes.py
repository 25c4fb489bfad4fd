"""The live class's plain values: codes, student tokens, the caps, what a class shows."""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass

from normviz.classroom.db import CODE_LEN, ClassError

ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"  # base32: no 0/O or 1/I to confuse
_CODE = re.compile(f"[{ALPHABET}]{{{CODE_LEN}}}")
STUDENT_RE = re.compile(r"[0-9A-Za-z_-]{16,64}")
KIND_RE = re.compile(r"[a-z][a-z0-9-]{0,31}")
MAX_SEED = 2**31 - 1


@dataclass(frozen=True)
class Limits:
    """The caps, sized for a 300-seat hall."""

    open_classes: int = 200  # unexpired, unended classes on this database
    students: int = 400  # answers to one question of one class
    opens_per_client: int = 5  # classes one browser may open per window
    opens_per_address: int = 20  # ... and one address (a school's NAT: several teachers)
    open_window_s: float = 3600.0
    lifetime_s: float = 12 * 3600  # a code works at most this long after the class opens
    idle_s: float = 45 * 60  # ... and ends after this long without activity


def unknown(limits: Limits) -> ClassError:
    return ClassError(
        "No open class has this code. Check it with your teacher: codes end when the class "
        f"ends, after {limits.idle_s / 60:g} minutes without activity, or after "
        f"{limits.lifetime_s / 3600:g} hours."
    )


@dataclass(frozen=True)
class ClassInfo:
    """What everyone in a class may know: the code and the current question."""

    code: str
    kind: str  # the exercise kind (a practice section slug)
    seed: int
    question: int  # 1 for the first question, +1 each time the teacher moves on
    revealed: bool
    expires: float  # epoch seconds: the hard end (idleness may end it sooner)


@dataclass(frozen=True)
class Opened:
    info: ClassInfo
    teacher_key: str  # shown on request; makes another browser a teacher ("Resume")


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


def check_exercise(kind: str, seed: int) -> None:
    """Raises ClassError unless (`kind`, `seed`) can name a class's exercise."""
    if not isinstance(kind, str) or not KIND_RE.fullmatch(kind):
        raise ClassError("Unknown exercise kind.")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise ClassError(f"The seed must be a whole number from 0 to {MAX_SEED}.")


def new_student_id() -> str:
    """An anonymous token for one browser (no name, nothing personal)."""
    return secrets.token_hex(8)


# ---- what is stored of a key: its sha256, per class for the browsers -----------------------


def sha(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def student_token(code: str, student: object) -> str:
    """The per-class token stored for a browser's id: the same browser is one student
    in a class, and its rows in two classes cannot be linked (nor the id read back)."""
    return sha(f"student:{code}:{str(student)[:64]}")


def teacher_token(code: str, browser: object) -> str:
    """The per-class token of a browser that teaches the class (not a student's)."""
    return sha(f"teacher:{code}:{str(browser)[:64]}")


def client_hash(key: object) -> str:
    """An opener's browser or address, for the rate limit (`Limits`)."""
    return sha("client:" + str(key)[:256])
