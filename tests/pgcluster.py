"""A throwaway PostgreSQL cluster for the live class's database tests, and `db_url`.

`pg_server` (session scope) runs Debian's `initdb` and `pg_ctl` (package `postgresql`,
which scripts/test.sh installs) on a free loopback port, as the `postgres` user when the
tests run as root, with trust authentication on 127.0.0.1 only and no Unix socket
outside its own folder; it stops the cluster and deletes its folder at the end.
NORMVIZ_TEST_DB_URL, when set, names a PostgreSQL database to use instead (for tests
only: each test drops the tables).

`db_url` gives each test fresh tables on SQLite and on PostgreSQL (parametrized). Import
both into a test module: `from pgcluster import db_url, pg_server  # noqa: F401`.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from normviz.classroom.db import make_engine, metadata

EXTERNAL = os.environ.get("NORMVIZ_TEST_DB_URL")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """The URL of a database on a fresh local cluster (stopped after the session)."""
    if EXTERNAL:
        yield EXTERNAL
        return
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        pytest.fail("PostgreSQL is not installed: scripts/test.sh installs Debian's postgresql")
    bin_dir = Path(found[-1]).parent
    base = Path(tempfile.mkdtemp(prefix="normviz-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root
        pw = pwd.getpwnam("postgres")
        os.chown(base, pw.pw_uid, pw.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    data, port = base / "data", _free_port()

    def run(*args: object) -> None:
        subprocess.run([*as_user, *map(str, args)], check=True, capture_output=True, cwd=base)

    run(bin_dir / "initdb", "-D", data, "-A", "trust", "-U", "normviz", "-E", "UTF8", "--no-sync")
    opts = f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c fsync=off"
    try:
        run(bin_dir / "pg_ctl", "-D", data, "-l", base / "log", "-w", "-o", opts, "start")
        yield f"postgresql+psycopg://normviz@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(
            [*as_user, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
            capture_output=True,
            cwd=base,
        )
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database URL with no tables yet: a SQLite file, or the cluster's database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'classes.db'}"
    url = request.getfixturevalue("pg_server")
    engine = make_engine(url, create=False)
    metadata.drop_all(engine)
    engine.dispose()
    return url
