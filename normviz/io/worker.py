"""Decoding a visitor's bytes in a bounded worker process: bytes in, plain arrays out.

    run("normviz.io:load_arrays", data, name, Budget(10, 2**30), TensorLoadError)

A decoder that a crafted file can keep busy (a progressive JPEG of ten thousand
scans, a parser's worst case) runs in a process of its own, with a CPU-time limit (an
ITIMER_PROF timer, RLIMIT_CPU behind it), an address-space limit (RLIMIT_AS) and a
wall-clock deadline for one that hangs. Whatever the file does, the server process
pays a socket, a copy of the result, and nothing else.

One warm parent (`serve`, started at the first job, torch,
NumPy and Pillow imported once) forks a fresh child per job: a job starts in
milliseconds, not the 1.3 CPU-s of importing torch, and no job sees another's state.
Each job's connection is a socket pair whose one end is handed over (SCM_RIGHTS).

Nothing is pickled either way. The request is one line of JSON (the job, the file
name, the budget, the byte count) and the file's bytes; the answer is the child's pid,
one line of JSON (the error's message, or each array's key, dtype and shape) and the
arrays' raw bytes, which the server checks against a short list of dtypes and the
shapes before viewing them as read-only NumPy arrays. A job is "module:function",
taking (bytes, name) and returning an array or a dict of arrays; a ValueError it
raises is the refusal's message.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import math
import os
import resource
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
# what a worker may send back: the dtypes the decoders produce
DTYPES = frozenset({"uint8", "float32", "float64"})
_THREADS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
_ENV = frozenset({"PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "VIRTUAL_ENV"})
_MAIN = "import sys, normviz.io.worker as w; w.serve(int(sys.argv[1]))"
PRELOAD = ("normviz.io", "normviz.pretrained.photos")  # imported once, by the warm parent


@dataclass(frozen=True)
class Budget:
    """What one decoding may cost: CPU seconds, bytes of address space beyond what the
    warm parent maps (its imports), and a wall-clock deadline for a hung worker."""

    cpu_s: float
    memory: int
    deadline_s: float = 120.0


class _Parent:
    """The warm parent: started once, restarted if it died; jobs are handed to it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._ctrl: socket.socket | None = None

    def connect(self) -> socket.socket:
        """A new connection to a fresh child of the warm parent."""
        with self._lock:
            for attempt in (0, 1):
                if self._proc is None or self._proc.poll() is not None:
                    self._start()
                mine, theirs = socket.socketpair()
                try:
                    assert self._ctrl is not None
                    socket.send_fds(self._ctrl, [b"j"], [theirs.fileno()])
                    return mine
                except OSError:
                    mine.close()
                    self._stop()
                    if attempt:
                        raise
                finally:
                    theirs.close()
        raise OSError("no worker")

    def _start(self) -> None:
        self._stop()
        ctrl, theirs = socket.socketpair()
        # a small environment of its own: no secret (a cookie secret) and nothing large
        env = {k: v for k, v in os.environ.items() if k in _ENV}
        env.update(PYTHONPATH=str(ROOT), **dict.fromkeys(_THREADS, "1"))
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _MAIN, str(theirs.fileno())],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            cwd=ROOT,
            env=env,
        )
        theirs.close()
        self._ctrl = ctrl

    def _stop(self) -> None:
        if self._ctrl is not None:
            self._ctrl.close()  # the warm parent exits when this closes
            self._ctrl = None
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None


_PARENT = _Parent()


def run(
    job: str, data: bytes, name: str, budget: Budget, error: type[ValueError]
) -> dict[str, np.ndarray]:
    """The job's arrays for `data`, decoded in a bounded worker (read-only arrays).

    Raises:
        error: the job refused the file (its message), or the worker ran out of CPU
            time, memory or time, or stopped, or sent an answer that does not check.
    """
    data = bytes(data)
    request = {"job": job, "name": name, "cpu_s": budget.cpu_s, "mem": budget.memory}
    request["size"] = len(data)
    conn = _PARENT.connect()
    chunks: list[bytes] = []
    try:
        end = time.monotonic() + budget.deadline_s
        conn.settimeout(budget.deadline_s)
        conn.sendall(json.dumps(request).encode() + b"\n")
        conn.sendall(data)
        conn.shutdown(socket.SHUT_WR)
        while chunk := conn.recv(1 << 20):
            chunks.append(chunk)
            conn.settimeout(max(0.01, end - time.monotonic()))
    except TimeoutError:
        _kill(_pid(b"".join(chunks)))
        raise error(f"reading the file took more than {budget.deadline_s:g} s: refused") from None
    except OSError:
        chunks = []  # the child stopped while it was being sent the file
    finally:
        conn.close()
    answer_bytes = b"".join(chunks)
    _, _, rest = answer_bytes.partition(b"\n")
    head, newline, payload = rest.partition(b"\n")
    try:
        answer = json.loads(head) if newline else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        raise error(
            f"reading the file stopped before it finished: it needs more than "
            f"{budget.cpu_s:g} s of the server's CPU or more memory than allowed (refused)"
        )
    if answer.get("error") is not None:
        raise error(str(answer["error"])[:600])
    return _arrays(answer.get("arrays"), payload, error)


def _pid(answer: bytes) -> int:
    line = answer.partition(b"\n")[0]
    return int(line) if line.isdigit() else 0


def _kill(pid: int) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)


def _arrays(specs: object, payload: bytes, error: type[ValueError]) -> dict[str, np.ndarray]:
    """The answer's arrays, each checked (key, dtype, shape, byte count) before it is viewed."""
    out: dict[str, np.ndarray] = {}
    offset = 0
    for spec in specs if isinstance(specs, list) else [None]:
        ok = isinstance(spec, list) and len(spec) == 3
        key, dtype, shape = spec if ok else ("", "", [])
        ok = ok and isinstance(key, str) and dtype in DTYPES and isinstance(shape, list)
        ok = ok and all(type(d) is int and d >= 0 for d in shape)
        if not ok:
            raise error("the file could not be read (its reader's answer is malformed): refused")
        size = math.prod(shape) * np.dtype(dtype).itemsize
        if offset + size > len(payload):
            raise error("the file could not be read (its reader's answer is short): refused")
        arr = np.frombuffer(payload, np.dtype(dtype), math.prod(shape), offset).reshape(shape)
        arr.setflags(write=False)  # shared by every session that sends this file
        out[key] = arr
        offset += size
    if offset != len(payload):
        raise error("the file could not be read (its reader's answer is long): refused")
    return out


# ---- the worker's side ----------------------------------------------------------------


def _vm_size() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


def _limit(cpu_s: float, memory: int) -> None:
    """From now on: at most `cpu_s` CPU seconds, and `memory` more bytes of address space."""
    signal.setitimer(signal.ITIMER_PROF, cpu_s)  # default action: terminate (SIGPROF)
    used = sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
    hard = math.ceil(used + cpu_s) + 1  # RLIMIT_CPU counts whole seconds: the backstop
    resource.setrlimit(resource.RLIMIT_CPU, (hard, hard))
    room = _vm_size() + memory
    resource.setrlimit(resource.RLIMIT_AS, (room, room))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _answer(out: object) -> tuple[dict, list[bytes]]:
    arrays = out if isinstance(out, dict) else {"": out}
    specs, chunks = [], []
    for key, a in arrays.items():
        a = np.asarray(a)
        if a.dtype.name not in DTYPES:
            a = a.astype(np.float32)
        specs.append([str(key), a.dtype.name, list(a.shape)])
        chunks.append(a.tobytes())
    return {"arrays": specs}, chunks


def _child(conn: socket.socket) -> None:
    """One job, in a fresh fork: read the request, limit, decode, answer."""
    out = conn.makefile("wb")
    out.write(f"{os.getpid()}\n".encode())
    out.flush()
    inp = conn.makefile("rb")
    request = json.loads(inp.readline())
    data = inp.read(int(request["size"]))
    module, _, func = str(request["job"]).partition(":")
    fn = getattr(importlib.import_module(module), func)  # imports before the CPU budget
    _limit(float(request["cpu_s"]), int(request["mem"]))
    chunks: list[bytes] = []
    try:
        answer, chunks = _answer(fn(data, request["name"]))
    except MemoryError:
        answer = {"error": "reading the file needs more memory than the server allows: refused"}
    except ValueError as e:
        answer = {"error": str(e) or "the file was refused"}
    except Exception as e:  # a decoder's own failure on a broken file
        answer = {"error": f"the file could not be read ({type(e).__name__}): refused"}
    out.write(json.dumps(answer).encode() + b"\n")
    for chunk in chunks:
        out.write(chunk)
    out.flush()


def serve(fd: int) -> None:
    """The warm parent: fork a child per connection handed over, until `fd` closes."""
    ctrl = socket.socket(fileno=fd)
    for module in PRELOAD:
        importlib.import_module(module)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    while True:
        select.select([ctrl], [], [])
        try:
            _, fds, _, _ = socket.recv_fds(ctrl, 1, 1)
        except OSError:
            return
        if not fds:
            return  # the server closed its end: it has stopped
        conn = socket.socket(fileno=fds[0])
        if os.fork() == 0:
            ctrl.close()
            code = 1
            try:
                _child(conn)
                code = 0
            finally:
                os._exit(code)
        conn.close()
