"""Crash trials (docs/design.md section 6): SIGKILL compactctl at random points.

Each trial copies a fixture, starts a command, kills it with SIGKILL after a random delay,
then checks what a crash may leave:

- the fixture's bytes are an unchanged prefix of the file (``-o`` runs: the input is
  untouched), so no byte is ever lost;
- every complete line parses (orjson), except lines already malformed in the fixture; a
  torn last line is allowed only right after a kill (a record cut short by the kill);
- ``-o`` targets are absent or complete; a ``.compactctl-*.tmp`` left by the killed
  ``write_output`` is counted (acceptable: the target is intact);
- a re-run completes, and its final result (the effective context, as ``inspect
  --effective`` prints it, and the appended event types and uuids) equals an uninterrupted
  run's (timestamps of the new events aside).

Most trials run the command in a child forked from a warm server (``tests/crash_server.py``)
so that the random delay lands in compactctl's own work rather than in Python's startup; a
few each run are real ``python -m compactctl`` processes. Nothing in compactctl is hooked:
where the kill landed is observed from outside (``/proc/locks`` shows the transcript's
``flock`` held: during the append; a ``.compactctl-*.tmp``: during an ``-o`` write).

``COMPACTCTL_CRASH_TRIALS`` sets the number of trials (default 100; ``make stress`` runs
1,000); ``COMPACTCTL_CRASH_SEED`` replays a run's random choices.
"""

from __future__ import annotations

import json
import os
import random
import select
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest

from compactctl.app.inspect import effective_lines
from compactctl.app.jobs import OutputOptions, compact_path, rules_path
from compactctl.io.jsonl import parse_line
from compactctl.model import BadLine
from tests.helpers import SAMPLES, run_cli

HERE = Path(__file__).resolve().parent
TRIALS = int(os.environ.get("COMPACTCTL_CRASH_TRIALS", "100"))
SEED = int(os.environ.get("COMPACTCTL_CRASH_SEED", str(random.randrange(1 << 30))))
EXEC_EVERY = 20
"""Every 20th trial is a real ``python -m compactctl`` process instead of a forked one."""

SMALL = (SAMPLES / "small-s1.canonical.jsonl").read_bytes()
FOREIGN = SAMPLES / "small-s1.claude-code.jsonl"
MALFORMED = b'{"type":"message","uuid":"broken","role":"user","content":"cut'
TORN = b'{"type":"message","uuid":"torn-tail","role":"assistant","content":"caf\xc3'


def _with_bad_lines(data: bytes) -> bytes:
    """The sample with a malformed line in the middle and a torn last line (no newline)."""
    lines = data.split(b"\n")[:-1]
    return b"\n".join(lines[:30] + [MALFORMED] + lines[30:]) + b"\n" + TORN


# --- the fork server ------------------------------------------------------------------------


class ForkServer:
    """Client of tests/crash_server.py."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.log = open(workdir / "server.log", "wb")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "crash_server.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            cwd=workdir,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._in = self.proc.stdin
        self._fd = self.proc.stdout.fileno()
        self._buf = b""

    def send(self, obj: Any) -> None:
        self._in.write(json.dumps(obj).encode() + b"\n")
        self._in.flush()

    def recv(self, timeout: float | None = 120.0) -> Any:
        """The next answer, or ``None`` when ``timeout`` seconds pass first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self._fd], [], [], left)[0]:
                return None
            chunk = os.read(self._fd, 65536)
            if not chunk:
                raise RuntimeError(f"fork server died: {(self.workdir / 'server.log').read_text()}")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def warm(self, argvs: list[list[str]]) -> None:
        self.send({"warm": argvs})
        assert self.recv(600) == {"warmed": len(argvs)}

    def start(self, argv: list[str]) -> int:
        self.send(
            {
                "argv": argv,
                "stdout": str(self.workdir / "child.out"),
                "stderr": str(self.workdir / "child.err"),
            }
        )
        answer = self.recv()
        assert answer is not None
        return int(answer["pid"])

    def reap(self) -> int:
        self.send("reap")
        answer = self.recv()
        assert answer is not None
        return int(answer["status"])

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(30)
        self.log.close()


def _holds_flock(pid: int) -> bool:
    """True when ``pid`` holds an ``flock`` (``/proc/locks``): it is inside the append."""
    try:
        text = Path("/proc/locks").read_text()
    except OSError:
        return False
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 5 and f[1] == "FLOCK" and f[4] == str(pid):
            return True
    return False


# --- scenarios ------------------------------------------------------------------------------


@dataclass
class Scenario:
    """One command under trial. ``argv`` uses SRC, OUT and DB as placeholders."""

    name: str
    argv: list[str]
    fixture: bytes = b""
    source: Path | None = None  # a read-only input used in place (foreign sample)
    writes_output: bool = False
    # filled in by the baseline run:
    events: list[tuple[str, str]] = field(default_factory=list)
    view: list[dict[str, Any]] = field(default_factory=list)
    output: list[dict[str, Any]] = field(default_factory=list)
    duration: float = 0.0
    exec_duration: float | None = None


def _scenarios(compacted: bytes) -> list[Scenario]:
    return [
        Scenario("compact --force", ["compact", "--force", "--db", "DB", "SRC"], SMALL),
        Scenario("rules", ["rules", "--no-store", "SRC"], SMALL),
        Scenario(
            "dedup (torn + malformed lines)", ["dedup", "--no-store", "SRC"], _with_bad_lines(SMALL)
        ),
        Scenario("tiers after compact", ["tiers", "--db", "DB", "SRC"], compacted),
        Scenario(
            "compact --force --materialize -o",
            ["compact", "--force", "--no-store", "--materialize", "-o", "OUT", "SRC"],
            SMALL,
            writes_output=True,
        ),
        Scenario(
            "compact --force -o (claude-code)",
            ["compact", "--force", "--no-store", "-o", "OUT", "SRC"],
            source=FOREIGN,
            writes_output=True,
        ),
    ]


@dataclass
class Paths:
    dir: Path
    src: Path
    out: Path
    db: Path

    def argv(self, template: list[str]) -> list[str]:
        sub = {"SRC": str(self.src), "OUT": str(self.out), "DB": str(self.db)}
        return [sub.get(a, a) for a in template]

    def temps(self) -> list[Path]:
        return [
            self.dir / n
            for n in os.listdir(self.dir)
            if n.startswith(".compactctl-") and n.endswith(".tmp")
        ]


def _prepare(sc: Scenario, base: Path, n: int) -> Paths:
    d = base / f"t{n}"
    if d.exists():
        shutil.rmtree(d)
    d.mkdir()
    src = d / "s.jsonl"
    if sc.source is not None:
        src = sc.source  # read only, never written: -o goes to OUT
    else:
        src.write_bytes(sc.fixture)
    return Paths(d, src, d / "out.jsonl", base / f"{sc.name.split()[0]}.db")


# --- what a file holds ----------------------------------------------------------------------


def _norm(record: dict[str, Any]) -> dict[str, Any]:
    """A record without the timestamp of a new event (differs between runs)."""
    if record.get("type") in {"compact", "summary"} or "summaryOf" in record:
        return {k: v for k, v in record.items() if k != "timestamp"}
    return record


def _view(path: Path) -> list[dict[str, Any]]:
    return [_norm(orjson.loads(line)) for line in effective_lines(str(path))]


def _appended(data: bytes, fixture: bytes) -> list[tuple[str, str]]:
    """(type, uuid) of the whole records after the fixture's bytes."""
    out = []
    for line in data[len(fixture) :].split(b"\n"):
        e = parse_line(line)
        if line and not isinstance(e, BadLine):
            out.append((e.type, e.uuid or ""))
    return out


def _bad_complete_lines(data: bytes, allowed: set[int]) -> list[int]:
    """Line numbers (1-based) of complete lines that do not parse, outside ``allowed``."""
    bad = []
    for i, line in enumerate(data.split(b"\n")[:-1], 1):
        if i in allowed:
            continue
        try:
            if not isinstance(orjson.loads(line), dict):
                bad.append(i)
        except orjson.JSONDecodeError:
            bad.append(i)
    return bad


def _fixture_bad_lines(fixture: bytes) -> set[int]:
    """Line numbers of the fixture that do not parse, its torn last line included."""
    return {
        i
        for i, line in enumerate(fixture.split(b"\n"), 1)
        if line and isinstance(parse_line(line), BadLine)
    }


def _output_records(path: Path, src: Path) -> list[dict[str, Any]]:
    """The records of an output, normalised; a materialized summary names the transcript's
    path (the frame for the resuming agent), which differs between trials: it reads SRC."""
    data = path.read_bytes()
    assert data.endswith(b"\n"), f"{path} is not complete"
    data = data.replace(str(src).encode(), b"SRC")
    return [_norm(orjson.loads(line)) for line in data.split(b"\n")[:-1]]


# --- the harness ----------------------------------------------------------------------------


@dataclass
class Tally:
    trials: int = 0
    exec_trials: int = 0
    where: Counter[str] = field(default_factory=Counter)
    plans: Counter[str] = field(default_factory=Counter)
    by_scenario: Counter[str] = field(default_factory=Counter)
    bytes_lost: int = 0
    torn_records: int = 0
    temp_leftovers: int = 0
    reruns_matching: int = 0
    failures: list[str] = field(default_factory=list)


class Harness:
    """Runs a scenario's command and kills it (SIGKILL) by one of three plans.

    - ``timed``: after a random delay between 0 and 1.1 times an uninterrupted run;
    - ``in-write``: as soon as the critical section is seen from outside (``/proc/locks``
      shows the child's ``flock`` on the transcript: plus 0 to 0.5 ms; an ``-o`` run's
      ``.compactctl-*.tmp`` exists: at once);
    - ``after-write``: once the append is done (the file grew, the lock is released: plus
      0 to 5 ms, while the store update and the report run) or OUT exists (plus 0 to 1 ms).

    No plan touches compactctl: the kill time comes from the clock or from what any other
    process could see. Where the kill landed is then read from the same outside signs.
    """

    PLANS = (("timed", 0.4), ("in-write", 0.35), ("after-write", 0.25))

    def __init__(self, base: Path) -> None:
        self.base = base
        self.server = ForkServer(base)

    def plan(self, rng: random.Random) -> str:
        r = rng.random()
        for name, share in self.PLANS:
            if r < share:
                return name
            r -= share
        return "timed"

    def run(self, sc: Scenario, p: Paths, plan: str | None, rng: random.Random) -> str:
        """Run once in a forked child and kill it by ``plan`` (None: let it finish).

        Returns where the kill landed (``before``, ``during``, ``after``, ``finished before
        the kill``), or ``ok`` / ``failed`` for an uninterrupted run.
        """
        pid = self.server.start(p.argv(sc.argv))
        t0 = time.monotonic()
        if plan is None:
            return "ok" if self.server.reap() == 0 else "failed"

        def alive() -> bool:
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                return False
            return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has finished

        in_append = self._kill_time(sc, p, pid, plan, rng, t0, alive)
        os.kill(pid, signal.SIGKILL)  # the child is not reaped yet: the pid is still its own
        return self._where(sc, p, self.server.reap(), in_append)

    def run_exec(self, sc: Scenario, p: Paths, plan: str, rng: random.Random) -> str:
        """The same with a real ``python -m compactctl`` process."""
        proc = subprocess.Popen(
            [sys.executable, "-m", "compactctl", *p.argv(sc.argv)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        t0 = time.monotonic()
        assert sc.exec_duration is not None
        timing = Scenario(sc.name, sc.argv, sc.fixture, writes_output=sc.writes_output)
        timing.duration = sc.exec_duration
        in_append = self._kill_time(timing, p, proc.pid, plan, rng, t0, lambda: proc.poll() is None)
        proc.kill()
        proc.wait(60)
        status = -proc.returncode if proc.returncode < 0 else proc.returncode << 8
        return self._where(sc, p, status, in_append)

    def _kill_time(
        self,
        sc: Scenario,
        p: Paths,
        pid: int,
        plan: str,
        rng: random.Random,
        t0: float,
        alive: Callable[[], bool],
    ) -> bool:
        """Wait until the plan's moment; return whether the child held the lock then."""
        # (an -o run holds no lock; reading /proc/locks can take milliseconds then)
        locked = (lambda: False) if sc.writes_output else (lambda: _holds_flock(pid))
        if plan == "timed":
            time.sleep(max(0.0, t0 + rng.uniform(0.0, 1.1 * sc.duration) - time.monotonic()))
            return locked()
        if sc.writes_output:
            cond = (lambda: bool(p.temps())) if plan == "in-write" else p.out.exists
        elif plan == "in-write":
            cond = lambda: _holds_flock(pid)  # noqa: E731
        else:
            cond = lambda: (  # noqa: E731
                p.src.stat().st_size != len(sc.fixture) and not _holds_flock(pid)
            )
        deadline = time.monotonic() + 60
        spins = 0
        while not cond():  # a busy poll: an -o write can last well under a millisecond
            spins += 1
            if spins % 64 == 0 and (not alive() or time.monotonic() > deadline):
                return False
        # an -o write lasts well under a millisecond: kill at once, or soon after it
        if plan == "in-write":
            extra = 0.0 if sc.writes_output else rng.uniform(0.0, 0.0005)
        else:
            extra = rng.uniform(0.0, 0.001 if sc.writes_output else 0.005)
        if extra > 0.0001:
            time.sleep(extra)
        return locked()

    def _where(self, sc: Scenario, p: Paths, status: int, in_append: bool) -> str:
        if not os.WIFSIGNALED(status):
            return "finished before the kill"
        if sc.writes_output:
            if p.temps():
                return "during"
            return "after" if p.out.exists() else "before"
        data = p.src.read_bytes()
        if in_append or (len(data) > len(sc.fixture) and not data.endswith(b"\n")):
            return "during"
        return "after" if len(data) > len(sc.fixture) else "before"

    def calibrate(self, sc: Scenario) -> Paths:
        """Three uninterrupted runs: the median duration; the last run's paths (holding its
        result) are returned."""
        durations = []
        for _ in range(3):
            p = _prepare(sc, self.base, 0)
            started = time.monotonic()
            assert self.run(sc, p, None, random.Random()) == "ok", self.child_err()
            durations.append(time.monotonic() - started)
        sc.duration = sorted(durations)[1]
        return p

    def child_err(self) -> str:
        return (self.base / "child.err").read_text(errors="replace")


def _baseline(h: Harness, sc: Scenario) -> None:
    p = h.calibrate(sc)
    if sc.writes_output:
        sc.output = _output_records(p.out, p.src)
        assert p.temps() == []
    else:
        data = p.src.read_bytes()
        assert data.startswith(sc.fixture)
        sc.events = _appended(data, sc.fixture)
        assert sc.events, f"{sc.name}: the uninterrupted run appended nothing"
        sc.view = _view(p.src)


def _exec_baseline(sc: Scenario, base: Path) -> None:
    """A real ``python -m compactctl`` run: its duration, and the same result as the fork."""
    p = _prepare(sc, base, -1)
    started = time.monotonic()
    r = run_cli(*p.argv(sc.argv))
    sc.exec_duration = time.monotonic() - started
    assert r.returncode == 0, r.stderr.decode()
    if sc.writes_output:
        assert _output_records(p.out, p.src) == sc.output
    else:
        data = p.src.read_bytes()
        assert _appended(data, sc.fixture) == sc.events
        shown = run_cli("inspect", "--effective", str(p.src))
        assert shown.returncode == 0, shown.stderr.decode()
        assert [_norm(orjson.loads(x)) for x in shown.stdout.splitlines()] == sc.view


def _trial(h: Harness, sc: Scenario, n: int, rng: random.Random, tally: Tally) -> None:
    p = _prepare(sc, h.base, 1 + n % 2)
    source_before = p.src.read_bytes()
    plan = h.plan(rng)
    if n % EXEC_EVERY == EXEC_EVERY - 1:
        if sc.exec_duration is None:
            _exec_baseline(sc, h.base)
        where = h.run_exec(sc, p, plan, rng)
        tally.exec_trials += 1
    else:
        where = h.run(sc, p, plan, rng)
    tally.plans[plan] += 1
    tally.trials += 1
    tally.where[where] += 1
    tally.by_scenario[f"{sc.name}: {where}"] += 1
    problems: list[str] = []

    def check(ok: bool, what: str) -> None:
        if not ok:
            problems.append(what)

    # 1. the state the kill left
    if sc.writes_output:
        check(p.src.read_bytes() == source_before, "the input changed")
        leftovers = p.temps()
        tally.temp_leftovers += len(leftovers)
        if p.out.exists():
            check(_output_records(p.out, p.src) == sc.output, "a killed run left a wrong OUT")
        for t in leftovers:
            t.unlink()
    else:
        killed = p.src.read_bytes()
        lost = len(sc.fixture) - len(os.path.commonprefix([killed, sc.fixture]))
        tally.bytes_lost += lost
        check(lost == 0, f"{lost} bytes of the original lost")
        allowed = _fixture_bad_lines(sc.fixture)
        check(_bad_complete_lines(killed, allowed) == [], "a complete line does not parse")
        if len(killed) > len(sc.fixture) and not killed.endswith(b"\n"):
            tally.torn_records += 1  # a record cut short by the kill (a short write)
        check(p.temps() == [], "a temporary file was left next to the transcript")
    # 2. a re-run completes, and its result equals an uninterrupted run's
    if h.run(sc, p, None, rng) != "ok":
        check(False, f"the re-run failed: {h.child_err()}")
    if sc.writes_output:
        check(_output_records(p.out, p.src) == sc.output, "the re-run's OUT differs")
        check(p.temps() == [], "the re-run left a temporary file")
    else:
        final = p.src.read_bytes()
        check(final.startswith(killed), "the re-run changed bytes already in the file")
        torn = {len(killed.split(b"\n"))} if not killed.endswith(b"\n") else set()
        bad = _bad_complete_lines(final, _fixture_bad_lines(sc.fixture) | torn)
        check(bad == [], f"complete lines {bad} do not parse after the re-run")
        events = _appended(final, sc.fixture)
        check(sorted(events) == sorted(sc.events), f"appended {events}, not {sc.events}")
        check(len({u for _, u in events}) == len(events), "an event was appended twice")
        check(_view(p.src) == sc.view, "the effective context differs")
    if problems:
        tally.failures.append(f"trial {n} ({sc.name}, killed {where}): {'; '.join(problems)}")
    else:
        tally.reruns_matching += 1


def test_crash_trials(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    h = Harness(tmp_path)
    tally = Tally()
    started = time.monotonic()
    try:
        # warm the server: every command once, so each child starts with modules loaded
        warm = tmp_path / "warm.jsonl"
        warm.write_bytes(SMALL)
        h.server.warm(
            [
                ["compact", "--force", "--no-store", "--materialize", "-o", "-", str(warm)],
                ["compact", "--force", "--no-store", "-o", "-", str(FOREIGN)],
                ["rules", "--no-store", "-o", "-", str(warm)],
                ["dedup", "--no-store", "-o", "-", str(warm)],
                ["compact", "--force", "--no-store", str(warm)],
                ["tiers", "--no-store", "-o", "-", str(warm)],
                ["inspect", "--json", str(warm)],
            ]
        )
        scenarios = _scenarios(warm.read_bytes())
        for sc in scenarios:
            _baseline(h, sc)
        for n in range(TRIALS):
            _trial(h, scenarios[n % len(scenarios)], n, rng, tally)
    finally:
        h.server.close()
    elapsed = time.monotonic() - started
    lines = [
        f"crash trials: {tally.trials} run ({tally.exec_trials} as python -m compactctl), "
        f"seed {SEED}, {elapsed:.1f}s",
        "  plans: "
        + ", ".join(f"{k} {v}" for k, v in sorted(tally.plans.items()))
        + "; killed before the write: {b}, during: {d}, after: {a}; finished first: {f}".format(
            b=tally.where["before"],
            d=tally.where["during"],
            a=tally.where["after"],
            f=tally.where["finished before the kill"],
        ),
        f"  bytes lost: {tally.bytes_lost}; records cut by a kill: {tally.torn_records}; "
        f".compactctl-*.tmp left by killed -o writes: {tally.temp_leftovers} (targets intact)",
        f"  re-runs matching an uninterrupted run: {tally.reruns_matching}/{tally.trials}",
        *(f"  {k}: {v}" for k, v in sorted(tally.by_scenario.items())),
    ]
    print("\n" + "\n".join(lines))
    assert tally.failures == [], "\n".join(tally.failures[:20])
    assert tally.bytes_lost == 0
    assert tally.reruns_matching == tally.trials == TRIALS
    assert tally.where["before"] > 0 and tally.where["during"] + tally.where["after"] > 0


# --- crash states by construction ------------------------------------------------------------


def _cut_points(old: int, new: int, data: bytes) -> list[int]:
    """Offsets inside the appended region: every record boundary +-1, inside each uuid,
    and a spread of others."""
    points = {old + 1, new - 1}
    start = old
    for line in data[old:new].split(b"\n")[:-1]:
        u = line.find(b'"uuid":')
        points.update({start + u + 4, start + u + 12, start + u + 30, start + len(line)})
        start += len(line) + 1
        points.update({start - 1, start, start + 1})
    points.update(range(old + 1, new, max(1, (new - old) // 12)))
    return sorted(p for p in points if old < p < new)


@pytest.mark.parametrize(
    "name, run",
    [
        (  # torn_wait: a crash a moment ago, the quiet time tests/conftest.py gives the CLI
            "compact",
            lambda path: compact_path(
                path, _compact_options(), OutputOptions(db="", torn_wait=0.2)
            ),
        ),
        (
            "rules",
            lambda path: rules_path(path, _rules_options(), OutputOptions(db="", torn_wait=0.2)),
        ),
    ],
)
def test_every_crash_state_of_an_append_recovers(
    tmp_path: Path, name: str, run: Callable[[str], dict[str, Any]]
) -> None:
    """A kill during the one ``write()`` can leave any prefix of the payload (a short write).

    For cut points across the appended records (inside the uuid field too), the re-run must
    append the events whole and reach the uninterrupted result: a torn record that merely
    contains an event's uuid must not make the re-run skip that event.
    """
    full = tmp_path / "full.jsonl"
    full.write_bytes(SMALL)
    run(str(full))
    data = full.read_bytes()
    events = _appended(data, SMALL)
    view = _view(full)
    cuts = _cut_points(len(SMALL), len(data), data)
    assert len(cuts) > 12
    for cut in cuts:
        p = tmp_path / f"cut{cut}.jsonl"
        p.write_bytes(data[:cut])
        result = run(str(p))
        after = p.read_bytes()
        assert after.startswith(data[:cut])
        got = _appended(after, SMALL)
        assert sorted(got) == sorted(events), (cut, result)
        assert _view(p) == view, cut
        torn = not data[:cut].endswith(b"\n")
        assert result["tornLine"] == torn, cut
        p.unlink()


def _compact_options() -> Any:
    from compactctl.layers.summary import CompactOptions

    return CompactOptions(force=True)


def _rules_options() -> Any:
    from compactctl.layers.rules import RulesOptions

    return RulesOptions()
