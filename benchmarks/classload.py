"""A live class in a lecture hall: one teacher and N students on scripts/serve.sh's nginx.

Starts `scripts/serve.sh 2` (two app processes behind nginx, loopback only) with a fresh
SQLite file, then plays the class over Streamlit's websocket protocol, as
benchmarks/load.py's light clients do (its affinity cookie and run reading are reused):

1. a teacher opens /practice?kind=choose and presses "Start a live class";
2. N students open the class link and poll as a browser does (the page's polling
   fragment, rerun every `live.POLL_S` seconds on the page's own clock, started by the
   server's auto-rerun message: `_ticks`);
3. each answers (picks an option, then "Send my answer") at a random moment of
   `--spread` seconds, while the teacher's tally polls;
4. the teacher reveals, waits for every student to see the answer, then moves the
   class on to the next question and waits again; then ends the class.

It prints p50/p90/max for an answer to reach the teacher's tally (from sending it to the
first tally that counts it), for the reveal and the next question to reach the
students, how long the teacher's reveal click took, the server's CPU seconds per poll
(both processes, over a window with polls only, before the reveal and after it) with
this client's own CPU share, and each process's RSS. Everything is bounded: at most
`--students` clients (≤ the class's 400 answers a question), and `--deadline` seconds
in all, after which it stops and reports what it has. Run (the full hall on a quiet machine):

    python -m benchmarks.classload --students 300
    python -m benchmarks.classload --students 20      # a quick check on a shared machine

The last lines are a block to paste into docs/serving.md.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import math
import random
import statistics
import tempfile
import time
import urllib.request
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.common import cpu_seconds, rss_mb, serve_balanced
from benchmarks.load import RUN_FINISHED_EARLY, _p90
from normviz import practice
from normviz.classroom import Limits
from normviz.practice import live

KIND = "choose"  # a choice exercise: one radio, one button
PAGE = "practice"
RUN_TIMEOUT_S = 120.0  # a run that sends nothing for this long has failed


def _cookies(url: str) -> dict[str, str]:
    """A browser's first request, the page itself: nginx's affinity cookie, and the app's
    browser-id cookie where the app sets one. Headers for the websocket."""
    with urllib.request.urlopen(f"{url}/{PAGE}", timeout=60) as r:
        cookies = [c.split(";", 1)[0] for c in r.headers.get_all("Set-Cookie") or []]
    return {"Cookie": "; ".join(cookies)} if cookies else {}


@dataclass
class Run:
    """What one script run (or fragment run) sent back."""

    elements: list = field(default_factory=list)  # (fragment id, element) per new element
    query: str = ""

    def widget(self, suffix: str, kind: str):  # type: ignore[no-untyped-def]
        """The widget proto of type `kind` whose id ends with "-suffix"."""
        for _frag, el in self.elements:
            if el.WhichOneof("type") == kind and getattr(el, kind).id.endswith("-" + suffix):
                return getattr(el, kind)
        return None

    def texts(self) -> str:
        out = []
        for _frag, el in self.elements:
            kind = el.WhichOneof("type")
            if kind in ("markdown", "alert"):
                out.append(getattr(el, kind).body)
            elif kind == "metric":
                out.append(el.metric.body)
        return "\n".join(out)

    def tally_total(self) -> int | None:
        """The teacher's tally: the answer count in its chart's title ("12 answers")."""
        for _frag, el in self.elements:
            if el.WhichOneof("type") == "plotly_chart" and el.plotly_chart.id.endswith("pr_tally"):
                title = json.loads(el.plotly_chart.spec)["layout"]["title"]["text"]
                return int(title.split()[0])
        return None


class Client:
    """One browser over the websocket: a run at a time (its polls wait their turn)."""

    def __init__(self, ws, page: str = PAGE) -> None:  # type: ignore[no-untyped-def]
        self.ws = ws
        self.page = page  # its URL path (tests/test_classroom.py's students open others)
        self.lock = asyncio.Lock()
        self.query = ""
        self.states: dict[str, object] = {}  # widget id -> WidgetState (held values)
        self.poll: tuple[str, float] = ("", live.POLL_S)  # the page's polling fragment
        self.poll_since = 0.0  # perf_counter: when the server asked for this fragment's timer
        # the page's script hash, as a browser sends it back: a fragment's st.rerun()
        # reruns this page (without it, the server's default page: home)
        self.page_hash = ""
        self.runs = 0

    async def run(self, widgets: tuple = (), poll: bool = False) -> Run:  # type: ignore[type-arg]
        """Rerun the page (or, with `poll`, its polling fragment) with the held widget
        values and `widgets` ((WidgetState setter, ...)); read to the end of the run,
        through any st.rerun. The fragment's id is the latest the server sent: it moves
        when the page above it changes (a student's "answer is in" note)."""
        from streamlit.proto.BackMsg_pb2 import BackMsg
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        async with self.lock:
            msg = BackMsg()
            msg.rerun_script.query_string = self.query
            msg.rerun_script.page_name = self.page
            msg.rerun_script.page_script_hash = self.page_hash
            if poll:  # as the browser's run_every timer does
                msg.rerun_script.fragment_id = self.poll[0]
                msg.rerun_script.is_auto_rerun = True
            for state in self.states.values():
                msg.rerun_script.widget_states.widgets.add().CopyFrom(state)
            for set_state in widgets:
                w = msg.rerun_script.widget_states.widgets.add()
                set_state(w)
                if not w.HasField("trigger_value"):  # a value: held for the next runs
                    self.states[w.id] = w
            await self.ws.send(msg.SerializeToString())
            self.runs += 1
            out = Run()
            seen: list[str] = []  # what arrived, for the error if the run never ends
            while True:
                f = ForwardMsg()
                try:
                    f.ParseFromString(await asyncio.wait_for(self.ws.recv(), RUN_TIMEOUT_S))
                except TimeoutError:
                    msg = f"no end of run in {RUN_TIMEOUT_S:g} s after {seen[-6:]}"
                    raise RuntimeError(msg) from None
                kind = f.WhichOneof("type")
                seen.append(f"{kind}:{f.script_finished}" if kind == "script_finished" else kind)
                if kind == "navigation" and f.navigation.page_script_hash:
                    self.page_hash = f.navigation.page_script_hash
                elif kind == "page_info_changed":
                    self.query = out.query = f.page_info_changed.query_string
                elif kind == "auto_rerun":  # each page has one polling fragment
                    if f.auto_rerun.fragment_id != self.poll[0]:  # the browser starts a timer
                        self.poll_since = time.perf_counter()
                    self.poll = (f.auto_rerun.fragment_id, f.auto_rerun.interval)
                elif kind == "delta" and f.delta.WhichOneof("type") == "new_element":
                    out.elements.append((f.delta.fragment_id, f.delta.new_element))
                elif kind == "script_finished" and f.script_finished != RUN_FINISHED_EARLY:
                    return out


def _click(wid: str):  # type: ignore[no-untyped-def]
    def set_state(w) -> None:  # type: ignore[no-untyped-def]
        w.id, w.trigger_value = wid, True

    return set_state


def _pick(wid: str, label: str):  # type: ignore[no-untyped-def]
    def set_state(w) -> None:  # type: ignore[no-untyped-def]
        w.id, w.string_value = wid, label

    return set_state


async def _connect(url: str):  # type: ignore[no-untyped-def]
    import websockets

    headers = await asyncio.to_thread(_cookies, url)
    return await websockets.connect(
        url.replace("http", "ws") + "/_stcore/stream",
        subprotocols=["streamlit"],  # type: ignore[list-item]
        additional_headers=headers,
        max_size=None,
        open_timeout=120,
    )


@dataclass
class Student:
    i: int
    joined: float = float("nan")  # s: the class link's first run
    sent: float = float("nan")  # perf_counter: "Send my answer" sent
    acked: float = float("nan")  # ... and the run said "Your answer is in"
    saw: dict[str, float] = field(default_factory=dict)  # event -> perf_counter seen
    polls: int = 0
    error: str = ""


@dataclass
class Hall:
    """The shared clock of the class: when the teacher acted, what the tally showed."""

    t_reveal: float = float("nan")
    t_next: float = float("nan")
    teacher_reveal: float = float("nan")  # s: the teacher's click run, reveal committed
    tally: list[tuple[float, int]] = field(default_factory=list)  # (seen at, total)
    over: asyncio.Event = field(default_factory=asyncio.Event)


async def _ticks(c: Client, hall: Hall) -> AsyncIterator[None]:
    """The polling fragment's reruns as a browser asks for them: Streamlit's frontend
    starts a `setInterval` of the fragment's interval when the auto-rerun message for
    it arrives, so each page polls on its own fixed clock, whatever the server's speed.
    A tick during a run still in flight is folded by the server into one rerun after it
    (Streamlit's ScriptRequests coalesces pending reruns), so that rerun starts at once.

    Not "wait the interval after each run", as this benchmark did before: then every
    client's next poll starts when its last one ends, and a server that finishes a
    burst of polls together (the GIL hands the runs round) aligns every client on one
    clock. The 300 students then polled in bursts of 300, and every one of them saw
    the reveal at the same moment, that burst's end (docs/serving.md)."""
    served = -math.inf  # the tick the last poll answered
    while not hall.over.is_set():
        interval, now = c.poll[1], time.perf_counter()
        due = c.poll_since + interval * math.floor((now - c.poll_since) / interval)
        if due <= max(served, c.poll_since):  # no tick since the last poll: the next one
            due += interval
            await asyncio.sleep(due - now)
        served = due
        if c.poll[0] and not hall.over.is_set():
            yield


async def _poll(c: Client, s: Student, hall: Hall, code: str) -> None:
    """A student's page: rerun the polling fragment as the browser does (`_ticks`); note
    when the reveal ("**Answer:**") and the next question ("Question 2") arrive."""
    async for _ in _ticks(c, hall):
        r = await c.run(poll=True)
        s.polls += 1
        text = r.texts()
        now = time.perf_counter()
        if "**Answer:**" in text and "reveal" not in s.saw:
            s.saw["reveal"] = now
        if "Question 2" in text and "next" not in s.saw:
            s.saw["next"] = now


async def student(url: str, s: Student, hall: Hall, code: str, args: argparse.Namespace) -> None:
    """Join (at a random moment of --join-spread), answer (of --spread), poll to the end."""
    ex = practice.exercise(KIND, 0)
    labels = [label for _k, label in ex.options]
    try:
        await asyncio.sleep(random.uniform(0, args.join_spread))
        async with await _connect(url) as ws:
            c = Client(ws)
            c.query = f"class={code}"
            t0 = time.perf_counter()
            first = await c.run()
            s.joined = time.perf_counter() - t0
            radio = first.widget(f"pr_choice_{code}-1", "radio")
            if radio is None:
                raise RuntimeError("no answer widget: " + first.texts()[:120])
            poller = asyncio.create_task(_poll(c, s, hall, code))
            await asyncio.sleep(random.uniform(0, args.spread))
            await c.run((_pick(radio.id, labels[s.i % len(labels)]),))
            button = first.widget("pr_submit", "button")
            s.sent = time.perf_counter()
            done = await c.run((_click(button.id),))
            if live.SENT.split(".")[0] not in done.texts():
                raise RuntimeError("not in: " + done.texts()[-160:])
            s.acked = time.perf_counter()
            await poller
    except Exception as e:  # a failed student is a result, not a crash of the benchmark
        s.error = f"{type(e).__name__}: {str(e)[:160]}"


async def _tally_polls(c: Client, hall: Hall) -> None:
    async for _ in _ticks(c, hall):
        r = await c.run(poll=True)
        total = r.tally_total()
        if total is not None:
            hall.tally.append((time.perf_counter(), total))


async def _until(cond, deadline: float) -> bool:  # type: ignore[no-untyped-def]
    while not cond():
        if time.perf_counter() > deadline:
            return False
        await asyncio.sleep(0.1)
    return True


def _quantiles(xs: list[float]) -> str:
    if not xs:
        return "-"
    return f"p50 {statistics.median(xs):.2f} s, p90 {_p90(xs):.2f} s, max {max(xs):.2f} s"


def _answer_latencies(students: list[Student], tally: list[tuple[float, int]]) -> list[float]:
    """The k-th committed answer reached the tally at the first poll counting k answers."""
    acked = sorted((s.acked, s.sent) for s in students if s.acked == s.acked)
    out = []
    for k, (ack, sent) in enumerate(acked, start=1):
        seen = next((t for t, total in tally if total >= k and t >= ack), None)
        if seen is not None:
            out.append(seen - sent)
    return out


async def hall_class(url: str, pids: tuple[int, ...], args: argparse.Namespace) -> dict:
    deadline = time.perf_counter() + args.deadline
    hall = Hall()
    async with await _connect(url) as ws:
        t = Client(ws)
        t.query = f"kind={KIND}"
        solo = await t.run()
        start = solo.widget("pr_start", "button")
        if start is None:
            raise SystemExit("no start button on /practice: " + solo.texts()[:200])
        view = await t.run((_click(start.id),))
        code = next((p.split("=", 1)[1] for p in t.query.split("&") if p.startswith("class=")), "")
        if not code:
            raise SystemExit("the class did not open: " + view.texts()[:200])
        reveal, push = view.widget("pr_reveal", "button"), view.widget("pr_push", "button")
        tally = asyncio.create_task(_tally_polls(t, hall))
        students = [Student(i) for i in range(args.students)]
        joined = asyncio.gather(*(student(url, s, hall, code, args) for s in students))
        answered = lambda: all(s.acked == s.acked or s.error for s in students)  # noqa: E731
        ok = await _until(answered, deadline)
        n_in = sum(s.acked == s.acked for s in students)
        # this one process stands for 300 browsers: a full collection of its own (0.3 s
        # on the loaded machine, over the pages every student keeps) would delay every
        # student's clock at once. Browsers collect each on their own.
        gc.collect()
        gc.freeze()
        await _until(lambda: bool(hall.tally) and hall.tally[-1][1] >= n_in, deadline)
        polls = lambda: t.runs + sum(s.polls for s in students)  # noqa: E731
        before = await _window(pids, polls, args.window)  # polls only: the CPU per poll
        rss_class = [rss_mb(p) for p in pids]
        hall.t_reveal = time.perf_counter()
        await t.run((_click(reveal.id),))
        hall.teacher_reveal = time.perf_counter() - hall.t_reveal  # committed in its callback
        live_students = [s for s in students if not s.error]
        await _until(lambda: all("reveal" in s.saw for s in live_students), deadline)
        after = await _window(pids, polls, args.window)  # each poll draws the revealed view
        hall.t_next = time.perf_counter()
        await t.run((_click(push.id),))
        await _until(lambda: all("next" in s.saw for s in live_students), deadline)
        hall.over.set()  # every loop ends at its next turn
        left = max(10.0, deadline - time.perf_counter())
        _done, pending = await asyncio.wait([tally, joined], timeout=left)
        for task in pending:  # past the deadline: stop, and report what was measured
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        if not pending:
            await t.run((_click(view.widget("pr_end", "button").id),))
    return {
        "students": students,
        "hall": hall,
        "answered_in_time": ok,
        "windows": (before, after),
        "rss_class": rss_class,
        "rss_end": [rss_mb(p) for p in pids],
    }


async def _window(pids: tuple[int, ...], polls, seconds: float) -> tuple[float, float, float]:  # type: ignore[no-untyped-def]
    """(server CPU s per poll, polls per s, this client's CPU share of one core) over
    `seconds` of polls only. The client's share says whether the measuring process
    (one asyncio loop for every student) keeps up."""
    cpu0, polls0, mine0 = sum(map(cpu_seconds, pids)), polls(), time.process_time()
    await asyncio.sleep(seconds)
    cpu, n = sum(map(cpu_seconds, pids)) - cpu0, polls() - polls0
    return cpu / max(1, n), n / seconds, (time.process_time() - mine0) / seconds


def report(r: dict, n: int, processes: int) -> list[str]:
    students, hall = r["students"], r["hall"]
    failed = [s for s in students if s.error]
    answers = _answer_latencies(students, hall.tally)
    reveal = [s.saw["reveal"] - hall.t_reveal for s in students if "reveal" in s.saw]
    nxt = [s.saw["next"] - hall.t_next for s in students if "next" in s.saw]
    acked = [s.acked - s.sent for s in students if s.acked == s.acked]
    joins = [s.joined for s in students if s.joined == s.joined]
    mb = "+".join(f"{v:.0f}" for v in r["rss_class"])
    lines = [
        f"classload: {n} students, {processes} processes behind nginx, poll every "
        f"{live.POLL_S:g} s",
        f"- joined: {len(joins)} of {n}; the class link's first run {_quantiles(joins)}",
        f"- answers in: {len(acked)} of {n} ({len(failed)} failed); send -> 'answer is in' "
        f"{_quantiles(acked)}",
        f"- answer -> teacher's tally: {_quantiles(answers)}",
        f"- reveal -> students: {len(reveal)} of {n} saw it, {_quantiles(reveal)}",
        f"- next question -> students: {len(nxt)} of {n} saw it, {_quantiles(nxt)}",
        f"- the teacher's reveal run: {hall.teacher_reveal:.2f} s (the reveal is committed in it)",
        *(
            f"- server CPU per poll {when}: {1000 * cpu:.1f} ms ({rate:.1f} polls/s over all "
            f"processes; this client {100 * mine:.0f}% of a core)"
            for when, (cpu, rate, mine) in zip(
                ("before the reveal", "after it"), r["windows"], strict=True
            )
        ),
        f"- RSS per process: {mb} MB during the class, "
        + "+".join(f"{v:.0f}" for v in r["rss_end"])
        + " MB at the end",
    ]
    for s in failed[:5]:
        lines.append(f"  student {s.i}: {s.error}")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cap = Limits().students
    ap.add_argument("--students", type=int, default=300, help=f"1..{cap} (the answer cap)")
    ap.add_argument("--processes", type=int, default=2, help="scripts/serve.sh N (1..4)")
    ap.add_argument("--join-spread", type=float, default=20.0, help="s over which they join")
    ap.add_argument("--spread", type=float, default=20.0, help="s over which they answer")
    ap.add_argument("--window", type=float, default=10.0, help="s of polls only, for CPU/poll")
    ap.add_argument("--deadline", type=float, default=600.0, help="s in all, then stop")
    args = ap.parse_args()
    random.seed(0)
    if not 1 <= args.students <= cap or not 1 <= args.processes <= 4:
        raise SystemExit(f"--students 1..{cap}, --processes 1..4")
    db = Path(tempfile.mkdtemp(prefix="normviz-classload-")) / "classes.db"
    env = {"NORMVIZ_DB_URL": f"sqlite:///{db}"}
    with serve_balanced(args.processes, env=env) as d:
        print(f"serving on {d.url} (pids {', '.join(map(str, d.pids))})", flush=True)
        r = asyncio.run(asyncio.wait_for(hall_class(d.url, d.pids, args), args.deadline + 60))
    lines = report(r, args.students, args.processes)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
