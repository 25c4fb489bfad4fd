"""The live class's tables, and an engine for any SQLAlchemy URL (SQLite by default).

The URL comes from the environment variable NORMVIZ_DB_URL; without it the
classes live in a SQLite file under the repository (`.normviz/classes.db`),
created on first use. SQLite runs in WAL mode (readers never wait for the
writer) with a busy timeout, and every transaction starts with BEGIN IMMEDIATE,
so several server processes can share one file without a lost update. Any other
URL (PostgreSQL for several machines) is used as it is.
"""

from __future__ import annotations

import os
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
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

ENV = "NORMVIZ_DB_URL"
ROOT = Path(__file__).resolve().parent.parent.parent
DEFAULT_PATH = ROOT / ".normviz" / "classes.db"
CODE_LEN = 10
MAX_ANSWER_CHARS = 2000
BUSY_TIMEOUT_S = 30

metadata = MetaData()
classes = Table(
    "practice_classes",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("code", String(CODE_LEN), nullable=False, unique=True),
    Column("teacher_hash", String(64), nullable=False),  # sha256 of the teacher's key
    Column("kind", String(32), nullable=False),
    Column("seed", BigInteger, nullable=False),
    Column("question", Integer, nullable=False),  # 1, 2, ... as the teacher moves on
    Column("revealed", Boolean, nullable=False),
    Column("closed", Boolean, nullable=False),
    Column("created", Float, nullable=False),  # epoch seconds
    Column("expires", Float, nullable=False),
)
answers = Table(
    "practice_answers",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column(
        "class_id",
        Integer,
        ForeignKey("practice_classes.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("question", Integer, nullable=False),
    Column("student", String(32), nullable=False),  # a random id per browser session
    Column("answer", String(MAX_ANSWER_CHARS), nullable=False),
    Column("at", Float, nullable=False),
    UniqueConstraint("class_id", "question", "student", name="one_answer_per_student"),
    Index("answers_by_question", "class_id", "question"),
)


def default_url() -> str:
    """NORMVIZ_DB_URL, else the SQLite file under the repository."""
    return os.environ.get(ENV) or f"sqlite:///{DEFAULT_PATH}"


def _sqlite_pragmas(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def connect(dbapi_connection, record) -> None:  # type: ignore[no-untyped-def]
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves (below)
        cur = dbapi_connection.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_S * 1000}")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def begin(conn) -> None:  # type: ignore[no-untyped-def]
        # take the write lock up front: a deferred transaction that reads, then writes,
        # can fail at once with "database is locked" when another process wrote between
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def make_engine(url: str | None = None) -> Engine:
    """An engine for `url` (default: `default_url()`), with the tables created."""
    u = make_url(url or default_url())
    if u.get_backend_name() == "sqlite":
        if u.database and u.database != ":memory:":
            Path(u.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(u, connect_args={"timeout": BUSY_TIMEOUT_S})
        _sqlite_pragmas(engine)
    else:
        engine = create_engine(u, pool_pre_ping=True)
    for attempt in range(3):  # two processes starting at once may race on CREATE TABLE
        try:
            metadata.create_all(engine)
            break
        except SQLAlchemyError:
            if attempt == 2:
                raise
    return engine
