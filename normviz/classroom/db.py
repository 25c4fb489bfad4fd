"""The live class's tables, and an engine for any SQLAlchemy URL (SQLite by default).

The URL comes from the environment variable NORMVIZ_DB_URL; without it the
classes live in a SQLite file under the repository (`.normviz/classes.db`),
created on first use. No call may freeze a page:

- SQLite runs in WAL mode, so readers never wait for the writer; a read is a plain
  (deferred) transaction and only a write starts with BEGIN IMMEDIATE (so a
  read-then-write cannot lose an update between processes); every wait for a lock
  gives up after BUSY_TIMEOUT_S.
- PostgreSQL (psycopg 3) gets a connect timeout and statement and lock timeouts of the
  same size, and a pool that does not wait long for a free connection.

Whatever goes wrong below (locked, down, read-only, disk full) is turned into one
error a student can read, `ClassUnavailable`, by `unavailable()`.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Engine,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    UniqueConstraint,
    create_engine,
    event,
)
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import SQLAlchemyError

ENV = "NORMVIZ_DB_URL"
ROOT = Path(__file__).resolve().parent.parent.parent
DEFAULT_PATH = ROOT / ".normviz" / "classes.db"
CODE_LEN = 10
MAX_ANSWER_CHARS = 2000
BUSY_TIMEOUT_S = 1.5  # the longest any call waits for a lock, a connection or a statement
WRITE = "normviz_write"  # execution option: this transaction writes (BEGIN IMMEDIATE)

metadata = MetaData()
# v2 tables (the idle clock, the opener's and answerer's client keys): a database of
# the first version keeps its old tables untouched beside them.
classes = Table(
    "classroom_classes",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("code", String(CODE_LEN), nullable=False, unique=True),
    Column("teacher_hash", String(64), nullable=False),  # sha256 of the teacher's key
    Column("client", String(64), nullable=False),  # sha256 of the opener's client key
    Column("kind", String(32), nullable=False),
    Column("seed", BigInteger, nullable=False),
    Column("question", Integer, nullable=False),  # 1, 2, ... as the teacher moves on
    Column("revealed", Boolean, nullable=False),
    Column("closed", Boolean, nullable=False),
    Column("created", Float, nullable=False),  # epoch seconds
    Column("active", Float, nullable=False),  # last activity (idle classes expire)
    Column("expires", Float, nullable=False),  # the hard end (created + lifetime)
    Index("classes_by_client", "client", "created"),
)
answers = Table(
    "classroom_answers",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column(
        "class_id",
        Integer,
        ForeignKey("classroom_classes.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("question", Integer, nullable=False),
    Column("student", String(64), nullable=False),  # the browser's token for this class
    Column("client", String(64), nullable=False),  # unused since answers are per browser: ""
    Column("answer", String(MAX_ANSWER_CHARS), nullable=False),
    Column("at", Float, nullable=False),
    UniqueConstraint("class_id", "question", "student", name="one_answer_per_token"),
    Index("answers_by_question", "class_id", "question", "client"),
)
# added beside the v2 tables (create_all makes them in an older database too)
teachers = Table(  # the browsers that teach a class: its opener's, and any resumed with the key
    "classroom_teachers",
    metadata,
    Column(
        "class_id",
        Integer,
        ForeignKey("classroom_classes.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("token", String(64), nullable=False),  # sha256 of the class and the browser's id
    UniqueConstraint("class_id", "token", name="one_row_per_teacher"),
)
openings = Table(  # one row per opened class and per key that opened it (browser, address)
    "classroom_openings",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("client", String(64), nullable=False),  # sha256 of "browser:..." or "address:..."
    Column("at", Float, nullable=False),
    Index("openings_by_client", "client", "at"),
)


class ClassError(ValueError):
    """What a teacher or student can act on; the message never repeats their input."""


class ClassUnavailable(ClassError):
    """The class's database cannot be used right now; nothing was (or will be) saved."""

    def __init__(self, reason: str) -> None:
        super().__init__(
            f"The live class is unavailable right now ({reason}). Nothing was saved by "
            "this step: try again in a minute; the rest of the app works as usual."
        )
        self.reason = reason


REASONS = (  # words in a driver's message -> what the student reads
    (
        ("locked", "busy", "lock timeout", "statement timeout", "canceling statement"),
        "its database is busy",
    ),
    (("readonly", "read-only", "read only"), "its database is read-only"),
    (("full", "no space"), "its database's disk is full"),
    (
        ("timeout", "timed out", "connect", "refused", "server closed", "terminat"),
        "its database server does not answer",
    ),
)


def default_url() -> str:
    """NORMVIZ_DB_URL, else the SQLite file under the repository."""
    return os.environ.get(ENV) or f"sqlite:///{DEFAULT_PATH}"


def sqlite_path(url: URL) -> Path | None:
    """The file a SQLite URL names (plain or `file:` URI), None for memory or others."""
    if url.get_backend_name() != "sqlite" or not url.database:
        return None
    name = url.database.removeprefix("file:").split("?")[0]
    return None if name in ("", ":memory:") or "mode=memory" in url.database else Path(name)


def unavailable(error: BaseException) -> ClassUnavailable:
    """The student-readable error for a failure below the store (never its raw text).

    The chain is read from the first error on: a failed rollback after a full disk
    ("no such savepoint") names the disk, not the rollback.
    """
    chain: list[BaseException] = []
    e: BaseException | None = error
    while e is not None and e not in chain:
        chain.append(e)
        e = e.__context__
    for e in reversed(chain):
        text = str(getattr(e, "orig", None) or e).lower()
        for words, reason in REASONS:
            if any(w in text for w in words):
                return ClassUnavailable(reason)
    return ClassUnavailable("its database failed")


def _sqlite_pragmas(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def connect(dbapi_connection, record) -> None:  # type: ignore[no-untyped-def]
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves (below)
        cur = dbapi_connection.cursor()
        cur.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
        with contextlib.suppress(sqlite3.OperationalError):  # a read-only file keeps its mode
            cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def begin(conn) -> None:  # type: ignore[no-untyped-def]
        # a write takes the write lock up front: a deferred transaction that reads, then
        # writes, can fail at once with "database is locked" when another process wrote
        # between; a read stays deferred, so it never waits for a writer (WAL)
        write = conn.get_execution_options().get(WRITE, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def make_engine(url: str | None = None, create: bool = True) -> Engine:
    """An engine for `url` (default: `default_url()`); `create`: create the tables now."""
    u = make_url(url or default_url())
    if u.get_backend_name() == "sqlite":
        path = sqlite_path(u)
        if path is not None and create:
            path.parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(u, connect_args={"timeout": BUSY_TIMEOUT_S}, pool_timeout=2)
        _sqlite_pragmas(engine)
    else:
        ms = int(BUSY_TIMEOUT_S * 1000)
        args: dict[str, object] = {}
        if u.get_backend_name() == "postgresql":
            args = {
                "connect_timeout": 2,  # whole seconds (libpq's unit); psycopg enforces it
                "options": f"-c statement_timeout={ms} -c lock_timeout={ms}",
            }
        engine = create_engine(u, connect_args=args, pool_pre_ping=True, pool_timeout=2)
    if create:
        create_tables(engine)
    return engine


def create_tables(engine: Engine) -> None:
    """Create the tables that are missing (raises SQLAlchemyError if the database fails)."""
    for attempt in range(3):  # two processes starting at once may race on CREATE TABLE
        try:
            metadata.create_all(engine.execution_options(**{WRITE: True}))
            return
        except SQLAlchemyError:
            if attempt == 2:
                raise
