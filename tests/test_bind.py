"""Issue 23: a plain `streamlit run app.py` is reachable from this machine only, so
Streamlit's /_stcore/metrics is not served to the network (.streamlit/config.toml's
server.address). Checked against this machine's own non-loopback addresses."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from benchmarks.common import free_port

ROOT = Path(__file__).resolve().parent.parent


def _own_addresses() -> list[str]:
    """This machine's non-loopback addresses (`hostname -I`)."""
    try:
        out = subprocess.run(["hostname", "-I"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return []
    return [a for a in out.stdout.split() if not a.startswith(("127.", "::1"))]


def _connects(address: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        try:
            s.connect((address, port))
        except OSError:
            return False
    return True


def test_the_default_run_is_not_reachable_from_other_addresses() -> None:
    addresses = _own_addresses()
    if not addresses:
        pytest.fail("this machine has no non-loopback address to check from (hostname -I)")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMLIT_SERVER_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(400):
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                assert proc.poll() is None, "streamlit stopped"
                time.sleep(0.3)
        with urllib.request.urlopen(f"{url}/_stcore/metrics", timeout=5) as r:
            assert r.status == 200  # served, on loopback
        for address in addresses:
            assert not _connects(address, port), address
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
