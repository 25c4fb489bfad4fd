"""The live class's database: classes, their current question, anonymous answers.

`store.py` holds the API (`Classroom`: open, get, submit, counts, reveal, next,
close), `db.py` the tables, the engine (SQLAlchemy Core; SQLite by default, any URL
from NORMVIZ_DB_URL) and its one error, `ClassUnavailable`. Pure Python: no Streamlit.
"""

from __future__ import annotations

from normviz.classroom.codes import ClassInfo, Limits, Opened, new_student_id, normalize_code
from normviz.classroom.db import (
    DEFAULT_PATH,
    ENV,
    ClassError,
    ClassUnavailable,
    default_url,
    make_engine,
)
from normviz.classroom.store import Classroom

__all__ = [
    "DEFAULT_PATH",
    "ENV",
    "ClassError",
    "ClassInfo",
    "ClassUnavailable",
    "Classroom",
    "Limits",
    "Opened",
    "default_url",
    "make_engine",
    "new_student_id",
    "normalize_code",
]
