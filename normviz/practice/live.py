"""The words of the live class (the page's teacher and student views), in one place."""

from __future__ import annotations

POLL_S = 2.0  # seconds between the live views' database reads
START = "Start a live class with this question"
TEACH = (
    "For a teacher: open a class on the exercise shown. You get a code, a QR code and a "
    "short address to project. Students who scan or type it answer the same question; you "
    "see their answers arrive, reveal the answer to everyone, then move the class on. "
    "Answers are anonymous."
)
TEACHER_KEY = (
    "Your teacher key makes another browser a teacher of this class (type it under "
    "\"Resume teaching\" there). Keep it to yourself: whoever has it can end the class."
)
BACK = (
    "Your teacher view is back: this browser teaches this class, after a reload, a lost "
    "connection or a server restart too. Answers already sent are kept. If you had just "
    "clicked a button, check that it took effect, and click it again if not."
)
KEY_HELP = (
    "This browser stays the class's teacher after a reload or a server restart; the key "
    "is needed only to teach from another device."
)
KEY_GONE = (
    "This browser no longer holds the key (only its hash is stored). A new key replaces "
    "it: the old one stops working; browsers already teaching keep teaching."
)
STUDENT = "You are in a live class: answer, and wait for your teacher to reveal the answer."
SENT = "Your answer is in. You may change it until the teacher reveals the answer."
NOT_ANSWERED = "You did not answer this question."
WAITING = "Answers arrive here as students send them (updated every few seconds)."
NEXT_HELP = "The class moves on to a new exercise of the kind chosen above."
END_HELP = "The code stops working and the class's answers are deleted."


def share_link(base: str, code: str) -> str:
    """The link students open: the page's URL with only the class code."""
    return f"{base.rstrip('/')}/practice?class={code}"


def short_address(link: str) -> str:
    """The link as a student types it: no scheme, no "www." (browsers add them back)."""
    bare = link.split("://", 1)[-1]
    return bare.removeprefix("www.")


def qr_alt(link: str) -> str:
    """The QR code's text alternative: what it holds."""
    return f"QR code of the class's join link, {short_address(link)}"


def score_text(correct: int, answered: int) -> str:
    """ "3 of 5 right (60 %)", or the invitation before the first answer."""
    if not answered:
        return "No answers checked yet in this session."
    return f"{correct} of {answered} right ({round(100 * correct / answered)} %) in this session."
