"""Issue 23: a plain `streamlit run app.py` is reachable from this machine only, so
Streamlit's /_stcore/metrics is not served to the network (.streamlit/config.toml's
server.address). Checked in the kernel's table of listening sockets."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from benchmarks.common import free_port

ROOT = Path(__file__).resolve().parent.parent


def _listening(port: int) -> set[str]:
    """The local addresses this machine listens on at `port` (/proc/net/tcp and tcp6).

    Read from the kernel's socket table rather than by connecting to the machine's
    other addresses: a test sends traffic to loopback only."""
    found: set[str] = set()
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            local, state = row.split()[1], row.split()[3]
            address, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                raw = bytes.fromhex(address)
                # the kernel writes each 32-bit word in host (little-endian) order
                words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
                family = socket.AF_INET if width == 8 else socket.AF_INET6
                found.add(socket.inet_ntop(family, words))
    return found


def test_the_default_run_is_not_reachable_from_other_addresses() -> None:
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
        listening = _listening(port)
        assert listening, "the server's socket is not in the kernel's table"
        # only loopback: not 0.0.0.0 or :: (every interface), nor any other address
        assert listening <= {"127.0.0.1", "::1"}, listening
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
