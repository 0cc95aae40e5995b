"""Live writers (issue 14, point 1): compactctl never writes into a line still being written.

An agent that pauses mid-line (a model streaming, a runtime flushing a buffer in pieces) used
to be taken for a crashed writer after 2 s, and got compactctl's records inside its line. Now
a last line without a newline is waited for up to ``--lock-timeout`` (then exit 75, nothing
written), and counts as torn only once the file has been quiet for ``--torn-wait`` (default
300 s; ``COMPACTCTL_TORN_WAIT``, config ``torn_wait``).

- a writer pausing 3 s mid-line (a real process; the pause counted from the moment
  compactctl holds the lock, /proc/locks, so a slow start on a busy machine cannot end the
  line before compactctl looks at it): waited for, our record after its line; with a shorter
  ``--lock-timeout``: exit 75 and nothing written;
- a 30 s pause, simulated by dating the file's last change 30 s back (a real 30 s pause runs
  under ``make stress``, ``COMPACTCTL_STRESS=1``): waited for with the default; an explicit
  ``--torn-wait`` shorter than the pause takes the line as torn, as asked;
- the default is minutes (cheap checks: the constant, the resolved options, the help, and a
  line 10 s old that the old 2 s default took as torn);
- trials (``COMPACTCTL_LIVE_TRIALS``, default 10; ``make stress`` runs 1,000): a slow agent
  (tests/system/slow_agent.py) writes lines in pieces with pauses up to 0.7 s while ``rules``
  runs on its transcript; every agent line must be whole, in order, and every line must parse.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import orjson
import pytest

from compactctl.app.config import Settings
from compactctl.app.jobs import OutputOptions, rules_path
from compactctl.app.options import output_options
from compactctl.io.files import TORN_WAIT
from compactctl.layers.options import RulesOptions
from tests.helpers import SAMPLES, run_cli
from tests.system.slow_agent import line

HERE = Path(__file__).resolve().parent
BASE = (SAMPLES / "small-s1.canonical.jsonl").read_bytes()
TRIALS = int(os.environ.get("COMPACTCTL_LIVE_TRIALS", "10"))
STRESS = os.environ.get("COMPACTCTL_STRESS") == "1"
EXEC_EVERY = 25
"""Every 25th trial runs ``python -m compactctl rules`` instead of the job in this process."""

HALF = b'{"type":"message","uuid":"slow-1","role":"assistant","content":"thinking'
REST = b' about it"}\n'

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="uses O_APPEND timing")


@pytest.fixture
def default_torn_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default quiet time (tests/conftest.py sets 0.2 s for the other tests)."""
    monkeypatch.delenv("COMPACTCTL_TORN_WAIT", raising=False)


class PausingWriter:
    """An agent in another process: it appends HALF (``O_APPEND``), pauses mid-line until
    :meth:`finish` (the test decides how long the pause is, from the moment compactctl is
    waiting), then appends REST."""

    CODE = (
        "import os, sys\n"
        "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)\n"
        f"os.write(fd, {HALF!r})\n"
        "print('half', flush=True)\n"
        "sys.stdin.readline()\n"
        f"os.write(fd, {REST!r})\n"
    )

    def __init__(self, path: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", self.CODE, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None and self.proc.stdout.readline() == "half\n"
        self.half_at = time.monotonic()

    def finish(self) -> None:
        """End the line (REST) and wait for the process."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.close()
        assert self.proc.wait(30) == 0


def _compactctl(path: Path, lock_timeout: float) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "compactctl", "rules", "--no-store", "--lock-timeout",
         str(lock_timeout), str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip


def _wait_for_the_lock(proc: subprocess.Popen[bytes], path: Path) -> None:
    """Wait until ``proc`` holds its ``flock`` on ``path`` (/proc/locks): it has read and
    planned, and is in its append, looking at the unfinished last line."""
    inode = f":{path.stat().st_ino}"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        with open("/proc/locks") as fh:
            if any(x.split()[1] == "FLOCK" and x.split()[5].endswith(inode) for x in fh):
                return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.005)
    raise AssertionError("compactctl never took the lock")


def _our_lines(data: bytes) -> list[dict[str, object]]:
    """The records after BASE, HALF and REST (ours), each parsed whole."""
    assert data.startswith(BASE + HALF + REST), data[len(BASE) : len(BASE) + 200]
    tail = data[len(BASE + HALF + REST) :]
    assert tail.endswith(b"\n")
    return [orjson.loads(x) for x in tail.split(b"\n")[:-1]]


# --- one slow writer -------------------------------------------------------------------------


def _paused_mid_line(path: Path, pause: float, lock_timeout: float) -> tuple[int, bytes]:
    """An agent pauses ``pause`` seconds mid-line, counted from the moment compactctl holds
    the lock and is waiting for the line (however long its start took on a busy machine):
    compactctl's exit code and stderr; the agent's line is ended after ``pause`` or once
    compactctl has exited, whichever is later."""
    path.write_bytes(BASE)
    writer = PausingWriter(path)
    proc = _compactctl(path, lock_timeout)
    try:
        _wait_for_the_lock(proc, path)
        locked = time.monotonic()
        while time.monotonic() - locked < pause and proc.poll() is None:
            time.sleep(0.01)
        running = proc.poll() is None
        if pause > lock_timeout:
            proc.wait(120)
        writer.finish()
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    if pause < lock_timeout:
        assert running  # it was still waiting for the line when the pause ended
    return proc.returncode, err


@pytest.mark.usefixtures("default_torn_wait")
def test_a_writer_pausing_3s_mid_line_is_waited_for(tmp_path: Path) -> None:
    path = tmp_path / "live.jsonl"
    code, err = _paused_mid_line(path, 3.0, lock_timeout=20)
    assert code == 0, err
    assert [x["type"] for x in _our_lines(path.read_bytes())] == ["compact"]
    assert b"torn" not in err


@pytest.mark.usefixtures("default_torn_wait")
def test_a_writer_pausing_3s_past_the_lock_timeout_gets_exit_75(tmp_path: Path) -> None:
    path = tmp_path / "live.jsonl"
    code, err = _paused_mid_line(path, 3.0, lock_timeout=1)
    assert code == 75, err
    assert b"another process may still be writing that line" in err
    assert b"nothing was written" in err
    assert path.read_bytes() == BASE + HALF + REST  # nothing of ours, the agent's line whole


def _finish_later(path: Path, delay: float) -> threading.Thread:
    def finish() -> None:
        time.sleep(delay)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        os.write(fd, REST)
        os.close(fd)

    t = threading.Thread(target=finish)
    t.start()
    return t


def _quiet_for(path: Path, seconds: float) -> None:
    """Date the file's last change ``seconds`` back: a writer paused that long mid-line."""
    then = time.time() - seconds
    os.utime(path, (then, then))


@pytest.mark.usefixtures("default_torn_wait")
def test_a_30s_pause_is_waited_for_with_the_default(tmp_path: Path) -> None:
    path = tmp_path / "live.jsonl"
    path.write_bytes(BASE + HALF)
    _quiet_for(path, 30)  # the agent has paused 30 s so far; it writes the rest in 2 s
    t = _finish_later(path, 2.0)
    r = run_cli("rules", "--no-store", "--lock-timeout", "20", str(path))
    t.join()
    assert r.returncode == 0, r.stderr
    assert [x["type"] for x in _our_lines(path.read_bytes())] == ["compact"]


@pytest.mark.usefixtures("default_torn_wait")
def test_a_30s_pause_under_a_configured_quiet_time(tmp_path: Path) -> None:
    """``COMPACTCTL_TORN_WAIT`` above the pause: waited for; ``--torn-wait`` below it: the
    line is taken as torn, as the user asked (the explicit option), and reported so."""
    path = tmp_path / "live.jsonl"
    path.write_bytes(BASE + HALF)
    _quiet_for(path, 30)
    t = _finish_later(path, 1.5)
    r = run_cli("rules", "--no-store", "--lock-timeout", "20", str(path),
                env={"COMPACTCTL_TORN_WAIT": "60"})  # fmt: skip
    t.join()
    assert r.returncode == 0, r.stderr
    assert [x["type"] for x in _our_lines(path.read_bytes())] == ["compact"]

    torn = tmp_path / "torn.jsonl"
    torn.write_bytes(BASE + HALF)
    _quiet_for(torn, 30)
    r = run_cli("rules", "--no-store", "--torn-wait", "20", str(torn))
    assert r.returncode == 0, r.stderr
    assert b"(its torn last line is kept; the new events start on a new line)" in r.stderr
    data = torn.read_bytes()
    assert data.startswith(BASE + HALF + b"\n")
    assert orjson.loads(data[len(BASE + HALF + b"\n") :])["type"] == "compact"


@pytest.mark.skipif(not STRESS, reason="a real 30 s pause: make stress (COMPACTCTL_STRESS=1)")
@pytest.mark.usefixtures("default_torn_wait")
def test_a_writer_pausing_30s_mid_line_for_real(tmp_path: Path) -> None:
    path = tmp_path / "live.jsonl"
    code, err = _paused_mid_line(path, 30.0, lock_timeout=60)
    assert code == 0, err
    assert [x["type"] for x in _our_lines(path.read_bytes())] == ["compact"]
    assert b"torn" not in err


# --- the default is minutes (cheap checks) ---------------------------------------------------


@pytest.mark.usefixtures("default_torn_wait")
def test_the_default_quiet_time_is_five_minutes(tmp_path: Path, monkeypatch) -> None:
    assert TORN_WAIT == 300.0
    assert OutputOptions().torn_wait == 300.0
    path = str(tmp_path / "t.jsonl")
    assert output_options(Settings({}, "rules"), [path], {}).torn_wait == 300.0
    assert output_options(Settings({"torn_wait": 42}, "rules"), [path], {}).torn_wait == 42
    flags = {"torn_wait": 0.0}
    assert output_options(Settings({"torn_wait": 42}, "rules"), [path], flags).torn_wait == 0
    monkeypatch.setenv("COMPACTCTL_TORN_WAIT", "7")
    assert output_options(Settings({"torn_wait": 42}, "rules"), [path], {}).torn_wait == 7
    help_text = run_cli("rules", "--help").stdout.decode()
    assert "--torn-wait" in help_text and "(default 300;" in help_text.replace("\n", " ")


@pytest.mark.usefixtures("default_torn_wait")
def test_a_line_quiet_for_10s_is_not_taken_as_torn_by_default(tmp_path: Path) -> None:
    """The old default (2 s) took this line as torn and appended after it at once."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(BASE + HALF)
    _quiet_for(path, 10)
    r = run_cli("rules", "--no-store", "--lock-timeout", "0.5", str(path))
    assert r.returncode == 75, r.stderr
    assert b"after 300s unchanged)" in r.stderr and b"--torn-wait 0 takes the line" in r.stderr
    assert path.read_bytes() == BASE + HALF


# --- trials with a slow agent ----------------------------------------------------------------


class Agent:
    """tests/system/slow_agent.py, driven through its stdin."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "slow_agent.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._open = False

    def send(self, command: str) -> int | None:
        """Send a command; the lines written to the previous file (``None``: none)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        had_file = self._open
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        self._open = command.startswith("open")
        if not had_file:
            return None
        reply = self.proc.stdout.readline().split()
        assert reply[0] == "done", reply
        return int(reply[1])


def _check_trial(path: Path, seed: int, count: int) -> list[str]:
    """The trial's file: BASE unchanged, then the agent's ``count`` lines whole and in order
    with our records between them, each a whole line. Returns our records' types."""
    data = path.read_bytes()
    assert data.startswith(BASE)
    assert data.endswith(b"\n")
    lines = data[len(BASE) :].split(b"\n")[:-1]
    prefix = f'{{"type":"message","uuid":"a-{seed}-'.encode()
    agent = [x for x in lines if x.startswith(prefix)]
    assert agent == [line(seed, i)[:-1] for i in range(count)], f"an agent line was split: {path}"
    ours = [orjson.loads(x) for x in lines if not x.startswith(prefix)]  # each parses whole
    return [str(x["type"]) for x in ours]


def test_live_writer_trials(tmp_path: Path) -> None:
    """``rules`` against a slow agent, TRIALS times: no agent line is ever split."""
    rng = random.Random(int(os.environ.get("COMPACTCTL_LIVE_SEED", "14")))
    out = OutputOptions(db="", lock_timeout=20.0)  # the default torn_wait: 300 s
    agent = Agent()
    done: list[tuple[Path, int]] = []
    waited = 0
    try:
        for k in range(TRIALS):
            path = tmp_path / f"trial-{k}.jsonl"
            path.write_bytes(BASE)
            count = agent.send(f"open {path} {k}")
            if done:
                done[-1] = (done[-1][0], count or 0)
            done.append((path, -1))
            time.sleep(rng.uniform(0.0, 0.3))
            mid_line = not path.read_bytes().endswith(b"\n")
            if k % EXEC_EVERY == EXEC_EVERY - 1:
                r = run_cli("rules", "--no-store", "--estimate", "--lock-timeout", "20",
                            str(path), env={"COMPACTCTL_TORN_WAIT": "300"})  # fmt: skip
                assert r.returncode == 0, r.stderr
                assert b"torn" not in r.stderr
            else:
                result = rules_path(str(path), RulesOptions(), out, encoding="estimate")
                assert result["appended"] == 1 and not result["tornLine"], result
            waited += mid_line
        last = agent.send("stop")
        done[-1] = (done[-1][0], last or 0)
    finally:
        if agent.proc.poll() is None:
            agent.proc.kill()
    for seed, (path, count) in enumerate(done):
        assert count > 0
        assert _check_trial(path, seed, count) == ["compact"]
    print(f"{TRIALS} live-writer trials, {waited} begun while the agent was mid-line: no split")
