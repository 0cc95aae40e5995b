"""``make bench``: compactctl against baselines measured in the same run, over one corpus.

Writes (or reuses) a corpus of realistic sessions (:mod:`bench.gen_corpus`) of ``BENCH_MB``
MB (default 200) under ``bench/corpus/``, then measures, on the same files:

- baselines: orjson ``loads`` of every line; orjson loads + dumps + write; ``jq -c .`` (when
  installed); tiktoken ``encode_ordinary`` alone on the distinct message texts of each file
  (the encoding ``inspect`` picks), on 1 and on 2 threads;
- compactctl, one subprocess per measured command over all files: ``inspect --estimate``
  and ``inspect`` (exact tokens) with ``--jobs 1`` and ``--jobs 2`` (best of 3 and of 2
  runs, as the baselines they are compared with); on the largest session, in one process,
  ``inspect --estimate`` against orjson ``loads`` of it (target: at most 2.0x the time) and
  exact ``inspect`` against tiktoken alone on its distinct texts (at most 1.3x), then both
  as commands on it for their peak RSS (:meth:`Bench.largest`); ``eval`` against
  ``inspect`` with the same flags on the same files, on the corpus as generated and on a
  compacted copy (``compact --force``, not timed), as a ratio of their times; ``rules``, ``dedup``,
  ``compact --force`` (extractive), each on a fresh copy of the corpus (they append in
  place; the copy is made outside the timed region), and the chain
  ``rules - | dedup - | compact --micro-only -`` from stdin to stdout, file by file;
- ``compactctl --help`` startup (median of 10) against ``python -c pass``, and whether
  ``--help``, ``inspect``, ``rules``, ``dedup`` and ``compact --micro-only`` import litellm;
- redaction (:func:`compactctl.summarize.redact.redact`) of every message text of the corpus
  (content and tool call arguments, as a summary request holds them), in MB/s of text
  (target: 50 MB/s or more), compared with orjson ``loads`` of the files;
- dedup of 20k and 100k texts (:mod:`bench.gen_dups`): ``find_duplicates`` directly and the
  ``dedup`` command on a session holding them, with recall against exact Jaccard;
- many files: ``--jobs 2`` over 100 and over 1,000 small sessions, peak RSS of the parent and
  of the workers.

Prints one table (stdout) and writes ``bench/results/bench-<UTC time>.json``. Ratios, not
absolute times, are what to compare across machines: the baselines run in the same minutes.

Environment: ``BENCH_MB`` (corpus size, default 200), ``BENCH_SEED`` (default 1),
``BENCH_DEDUP_N`` (comma-separated sizes, default ``20000,100000``), ``BENCH_MANY``
(the large file count, default 1000), ``BENCH_SKIP`` (comma-separated section names to skip:
``baselines``, ``inspect``, ``eval``, ``layers``, ``chain``, ``startup``, ``redact``, ``dedup``,
``many``, ``peers``).

``bench/run.py --only eval`` (or ``--only eval,peers``, any of the section names) runs only
those sections, on the same corpus.

- peers (:mod:`bench.peers`): compactctl ``compact --force`` side by side with cozempic
  (``treat -rx aggressive --execute``, installed into ``bench/.venv-peers`` on first use) on
  a ``BENCH_PEERS_MB`` MB (default 32) Claude Code session with planted facts: wall time,
  tokens left (one tokenizer for both), planted facts kept (issue 15).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `python bench/run.py` puts bench/, not the root, on the path
    sys.path.insert(0, str(ROOT))

import orjson  # noqa: E402

MB = 1e6
"""Throughputs are in MB/s of input, 10^6 bytes."""

CORPUS_DIR = ROOT / "bench" / "corpus"

CHAIN = "rules - | dedup - | compact --micro-only -"
FLOOR_PYTHON = "python cat | python cat | python cat"
FLOOR_IMPORT = "the same, importing compactctl.cli"
_CAT = "import shutil, sys\nshutil.copyfileobj(sys.stdin.buffer, sys.stdout.buffer)"
RESULTS_DIR = ROOT / "bench" / "results"


def _log(msg: str) -> None:
    sys.stderr.write(f"[bench {time.strftime('%H:%M:%S')}] {msg}\n")
    sys.stderr.flush()


# --- running and measuring subprocesses -----------------------------------------------------


@dataclass
class Proc:
    """One measured subprocess (or pipeline).

    ``peak_kb`` is the peak RSS of the command and of every process it waited for (its
    ``--jobs`` workers), as ``/usr/bin/time -f %M`` reports it (``wait4`` rusage; measured
    from a small process, so the benchmark's own memory is not counted). ``parent_kb`` and
    ``worker_kb`` (the largest worker) are sampled from ``/proc/PID/status`` ``VmHWM``
    every 50 ms when sampling is asked for.
    """

    seconds: float
    returncode: int
    peak_kb: int
    parent_kb: int = 0
    worker_kb: int = 0
    stdout: bytes = b""
    stderr: bytes = b""


TIME = "/usr/bin/time" if os.access("/usr/bin/time", os.X_OK) else None


def _ppid_map() -> dict[int, int]:
    out: dict[int, int] = {}
    if not os.path.isdir("/proc"):
        return out
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        out[int(entry.name)] = int(stat[stat.rindex(b")") + 2 :].split()[1])
    return out


def _hwm_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class _Sampler(threading.Thread):
    """Polls the peak RSS (VmHWM) of a command and of its descendants (its workers).

    ``root`` is the process started; when it is ``/usr/bin/time``, the command is its child.
    """

    def __init__(self, root: int, wrapped: bool, interval: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.root = root
        self.wrapped = wrapped
        self.interval = interval
        self.parent_kb = 0
        self.workers: dict[int, int] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        command = None if self.wrapped else self.root
        while not self.stop.is_set():
            ppid = _ppid_map()
            if command is None:
                command = next((c for c, p in ppid.items() if p == self.root), None)
            if command is not None:
                self.parent_kb = max(self.parent_kb, _hwm_kb(command))
                todo, seen = [command], set()
                while todo:
                    parent = todo.pop()
                    for child, pp in ppid.items():
                        if pp == parent and child not in seen:
                            seen.add(child)
                            todo.append(child)
                for child in seen:
                    self.workers[child] = max(self.workers.get(child, 0), _hwm_kb(child))
            self.stop.wait(self.interval)


def _timed(argv: Sequence[str], report: Path) -> list[str]:
    """``argv`` wrapped in ``/usr/bin/time`` writing the peak RSS (KB) to ``report``."""
    if TIME is None:
        return list(argv)
    return [TIME, "-f", "%M", "-o", str(report), *argv]


def _peak_kb(report: Path, usage: Any) -> int:
    if TIME is not None:
        try:
            return int(report.read_text().split()[-1])
        except (OSError, ValueError, IndexError):
            pass
        finally:
            report.unlink(missing_ok=True)
    return int(usage.ru_maxrss)


def run_proc(
    argv: Sequence[str],
    *,
    env: dict[str, str],
    stdin: Any = subprocess.DEVNULL,
    stdout: Any = subprocess.DEVNULL,
    sample: bool = False,
    check: bool = True,
) -> Proc:
    """Run one command; wall time with ``perf_counter``, peak RSS with ``/usr/bin/time``."""
    fd, name = tempfile.mkstemp(prefix="bench-rss-")
    os.close(fd)
    report = Path(name)
    t0 = time.perf_counter()
    p = subprocess.Popen(
        _timed(argv, report), stdin=stdin, stdout=stdout, stderr=subprocess.PIPE, env=env
    )
    sampler = _Sampler(p.pid, TIME is not None) if sample else None
    if sampler is not None:
        sampler.start()
    err_chunks: list[bytes] = []
    stderr = p.stderr
    assert stderr is not None
    reader = threading.Thread(target=lambda: err_chunks.append(stderr.read()), daemon=True)
    reader.start()
    out = b""
    if stdout is subprocess.PIPE:
        assert p.stdout is not None
        out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    seconds = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    reader.join()
    if sampler is not None:
        sampler.stop.set()
        sampler.join()
    err = b"".join(err_chunks)
    if check and p.returncode not in (0, 1):
        tail = err.decode(errors="replace")[-2000:]
        raise RuntimeError(f"{' '.join(argv[:6])} ... exited {p.returncode}: {tail}")
    return Proc(
        seconds,
        p.returncode,
        _peak_kb(report, usage),
        sampler.parent_kb if sampler else 0,
        max(sampler.workers.values(), default=0) if sampler else 0,
        out,
        err,
    )


def run_chain(stages: Sequence[Sequence[str]], src: Path, dst: Path, env: dict[str, str]) -> Proc:
    """``stage1 < src | stage2 | ... > dst``; peak is the largest RSS of any stage."""
    reports = []
    for _ in stages:
        fd, name = tempfile.mkstemp(prefix="bench-rss-")
        os.close(fd)
        reports.append(Path(name))
    t0 = time.perf_counter()
    procs: list[subprocess.Popen[bytes]] = []
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        prev: Any = fin
        for i, argv in enumerate(stages):
            last = i == len(stages) - 1
            p = subprocess.Popen(
                _timed(argv, reports[i]),
                stdin=prev,
                stdout=fout if last else subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=env,
            )
            if prev is not fin:
                prev.close()  # the next stage holds it now
            prev = p.stdout
            procs.append(p)
        peak = 0
        codes = []
        for p, report in zip(procs, reports, strict=True):
            _, status, usage = os.wait4(p.pid, 0)
            p.returncode = os.waitstatus_to_exitcode(status)
            codes.append(p.returncode)
            peak = max(peak, _peak_kb(report, usage))
    seconds = time.perf_counter() - t0
    if any(c not in (0, 1) for c in codes):
        raise RuntimeError(f"chain on {src.name} exited {codes}")
    return Proc(seconds, max(codes), peak)


def compactctl_argv() -> list[str]:
    exe = Path(sys.executable).parent / "compactctl"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "compactctl"]


def bench_env(tmp: Path) -> dict[str, str]:
    """The environment of every measured command: a private store and no user config."""
    env = dict(os.environ)
    env["COMPACTCTL_DB"] = str(tmp / "store.db")
    env["XDG_CONFIG_HOME"] = str(tmp / "config")
    env["XDG_STATE_HOME"] = str(tmp / "state")
    env.pop("COMPACTCTL_DEBUG", None)
    # as an installed tool runs: bytecode cached (some sandboxes set this, so every process
    # would compile compactctl's sources again)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


# --- corpus facts ---------------------------------------------------------------------------


@dataclass
class FileFacts:
    path: Path
    size: int
    lines: int
    messages: int
    unique_messages: int
    longest_line: int
    encoding: str


def file_facts(path: Path) -> FileFacts:
    from compactctl.tokens import encoding_for_model, message_payload

    data = path.read_bytes()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    model = None
    messages = 0
    unique: set[str] = set()
    for raw in lines:
        d = orjson.loads(raw)
        if d.get("type") == "session" and model is None:
            model = d.get("model")
        elif d.get("type") == "message":
            messages += 1
            unique.add(message_payload(d))
    return FileFacts(
        path,
        len(data),
        len(lines),
        messages,
        len(unique),
        max((len(x) for x in lines), default=0),
        encoding_for_model(model),
    )


def budget_mb(facts: Sequence[FileFacts]) -> float:
    """Peak RSS budget of a run over ``facts`` (one session at a time): the largest over the
    files of 64 MB + 1 KB per unique message + 3x the longest line."""
    return max((64 * 2**20 + 1024 * f.unique_messages + 3 * f.longest_line) / 2**20 for f in facts)


def copy_corpus(files: Sequence[Path], dest: Path) -> list[Path]:
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    out = []
    for f in files:
        target = dest / f.name
        shutil.copyfile(f, target)
        out.append(target)
    return out


# --- baselines ------------------------------------------------------------------------------


def baseline_loads(files: Sequence[Path]) -> float:
    loads = orjson.loads
    t0 = time.perf_counter()
    for f in files:
        with open(f, "rb") as fh:
            for line in fh:
                loads(line)
    return time.perf_counter() - t0


def baseline_roundtrip(files: Sequence[Path], out_dir: Path) -> float:
    loads, dumps = orjson.loads, orjson.dumps
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    for f in files:
        with open(f, "rb") as fh, open(out_dir / f.name, "wb") as out:
            for line in fh:
                out.write(dumps(loads(line)) + b"\n")
    seconds = time.perf_counter() - t0
    shutil.rmtree(out_dir)
    return seconds


def baseline_jq(files: Sequence[Path]) -> Proc | None:
    jq = shutil.which("jq")
    if jq is None:
        return None
    with open(os.devnull, "wb") as null:
        return run_proc([jq, "-c", ".", *map(str, files)], env=dict(os.environ), stdout=null)


def _distinct_texts(path: Path) -> list[str]:
    from compactctl.tokens import message_payload

    texts: dict[str, None] = {}
    with open(path, "rb") as fh:
        for line in fh:
            d = orjson.loads(line)
            if d.get("type") == "message":
                t = message_payload(d)
                if t:
                    texts[t] = None
    return list(texts)


def message_texts(path: Path) -> list[str]:
    """The text of every message of ``path`` (content and tool calls, as
    :func:`compactctl.tokens.message_payload` joins them), duplicates kept."""
    from compactctl.tokens import message_payload

    with open(path, "rb") as fh:
        records = [orjson.loads(line) for line in fh]
    return [message_payload(d) for d in records if d.get("type") == "message"]


def _encoders(names: set[str]) -> dict[str, Any]:
    import tiktoken

    from compactctl.tokens import ensure_offline_encodings

    ensure_offline_encodings()
    return {name: tiktoken.get_encoding(name) for name in names}


def _count_all(enc: Any, texts: list[str]) -> int:
    encode = enc.encode_ordinary
    return sum(len(encode(t)) for t in texts)


def baseline_tiktoken(facts: Sequence[FileFacts]) -> float:
    """Seconds to ``encode_ordinary`` each file's distinct message texts on one core, with
    the encoding ``inspect`` picks for the file. Reading and extracting the texts is not
    timed; loading the encodings is not timed either."""
    encoders = _encoders({f.encoding for f in facts})
    total = 0.0
    for f in facts:
        texts = _distinct_texts(f.path)
        t0 = time.perf_counter()
        _count_all(encoders[f.encoding], texts)
        total += time.perf_counter() - t0
    return total


def child_pipeline(out_dir: str, paths: Sequence[str]) -> None:
    """Child of :meth:`Bench.pipeline`: each file through rules, dedup and micro, written
    (unchanged lines as their raw bytes) to ``out_dir``."""
    from compactctl.io.files import read
    from compactctl.io.jsonl import dump_events
    from compactctl.layers.dedup import dedup
    from compactctl.layers.micro import micro
    from compactctl.layers.rules import rules
    from compactctl.pipeline import pipeline

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for p in paths:
        with open(out / Path(p).name, "wb") as fh:
            for line in dump_events(pipeline(read(p), rules(), dedup(), micro())):
                fh.write(line)


def child_tiktoken() -> None:
    """Child of :func:`baseline_tiktoken_procs`: read ``[[path, encoding], ...]`` from
    stdin, extract the texts, say ``ready``, wait for ``go``, encode, say ``done``."""
    jobs = json.loads(sys.stdin.readline())
    encoders = _encoders({enc for _, enc in jobs})
    work = [(encoders[enc], _distinct_texts(Path(path))) for path, enc in jobs]
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    sys.stdin.readline()
    for enc, texts in work:
        _count_all(enc, texts)
    sys.stdout.write("done\n")
    sys.stdout.flush()


def child_largest(path: str, encoding: str) -> None:
    """Child of :meth:`Bench.largest`: in one process, on one file, orjson ``loads`` of every
    line against ``inspect --estimate`` (the library call the command makes per file,
    :func:`compactctl.app.inspect.inspect_path`), and tiktoken ``encode_ordinary`` alone on
    the file's distinct message texts (extracting them not timed, nor loading the encoding)
    against exact ``inspect``; one warm-up call of each first. Prints the median seconds of
    each as JSON, with ``rounds`` and ``clock`` saying how they were measured.

    Each pair is timed in interleaved rounds, one call of each side per round (9 rounds for
    loads and ``--estimate``, 3 for tiktoken and exact), so that the shared machine's load
    weighs on both sides alike, and each side's median is taken: a best of 3 of 20-60 ms
    calls on a loaded 2-core machine gave ratios from 1.6x to 2.6x for the same code.
    ``loads`` and ``--estimate`` are timed in CPU seconds of this process
    (``time.process_time``): both run on one thread from the page cache, so the time
    another process holds the core is charged to neither. tiktoken and exact ``inspect``
    keep wall seconds (the exact count may use more than one thread)."""
    from compactctl.app.inspect import InspectOptions, inspect_path

    def paired(a: Any, b: Any, rounds: int, clock: Any) -> tuple[float, float]:
        a(), b()  # warm-up: page cache, imports, the encoding
        times: tuple[list[float], list[float]] = ([], [])
        for _ in range(rounds):
            for fn, runs in zip((a, b), times, strict=True):
                t0 = clock()
                fn()
                runs.append(clock() - t0)
        return statistics.median(times[0]), statistics.median(times[1])

    file = Path(path)
    texts = _distinct_texts(file)
    enc = _encoders({encoding})[encoding]
    estimate, exact = InspectOptions(encoding="estimate"), InspectOptions()
    loads_s, estimate_s = paired(
        lambda: baseline_loads([file]),
        lambda: inspect_path(path, estimate),
        LARGEST_ROUNDS[0],
        time.process_time,
    )
    tiktoken_s, exact_s = paired(
        lambda: _count_all(enc, texts),
        lambda: inspect_path(path, exact),
        LARGEST_ROUNDS[1],
        time.perf_counter,
    )
    out = {
        "loads": loads_s,
        "estimate": estimate_s,
        "tiktoken": tiktoken_s,
        "exact": exact_s,
        "rounds": list(LARGEST_ROUNDS),
        "clock": ["process_time", "perf_counter"],
    }
    sys.stdout.write(json.dumps(out) + "\n")


LARGEST_ROUNDS = (9, 3)
"""Interleaved rounds of :func:`child_largest`: loads against ``inspect --estimate``, and
tiktoken against exact ``inspect``."""


def baseline_tiktoken_procs(facts: Sequence[FileFacts], procs: int) -> float:
    """Wall seconds for ``procs`` processes to encode the same texts as
    :func:`baseline_tiktoken`, files split between them by size (tiktoken holds the GIL
    while encoding, so threads do not use a second core). Only the encoding is timed."""
    shares: list[list[FileFacts]] = [[] for _ in range(procs)]
    sizes = [0] * procs
    for f in sorted(facts, key=lambda f: f.size, reverse=True):
        i = sizes.index(min(sizes))
        shares[i].append(f)
        sizes[i] += f.size
    code = (
        "import sys\nsys.path.insert(0, sys.argv[1])\n"
        "from bench.run import child_tiktoken\nchild_tiktoken()\n"
    )
    children = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(ROOT)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(procs)
    ]
    for child, share in zip(children, shares, strict=True):
        assert child.stdin is not None
        child.stdin.write(json.dumps([[str(f.path), f.encoding] for f in share]) + "\n")
        child.stdin.flush()
    for child in children:
        assert child.stdout is not None
        if child.stdout.readline().strip() != "ready":
            raise RuntimeError("tiktoken baseline child failed")
    t0 = time.perf_counter()
    for child in children:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    for child in children:
        assert child.stdout is not None
        child.stdout.readline()
    seconds = time.perf_counter() - t0
    for child in children:
        child.communicate()
    return seconds


# --- rows -----------------------------------------------------------------------------------


@dataclass
class Row:
    name: str
    seconds: float
    mb: float = 0.0
    baseline: str = ""
    ratio: float | None = None
    peak_mb: float | None = None
    budget_mb: float | None = None
    target: str = ""
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def mbps(self) -> float | None:
        return self.mb / self.seconds if self.mb and self.seconds > 0 else None


class Bench:
    def __init__(self, files: list[Path], facts: list[FileFacts], tmp: Path) -> None:
        self.files = files
        self.facts = facts
        self.tmp = tmp
        self.env = bench_env(tmp)
        self.cc = compactctl_argv()
        self.total = sum(f.size for f in facts) / MB
        self.budget = budget_mb(facts)
        self.rows: list[Row] = []
        self.base: dict[str, float] = {}  # baseline name -> MB/s

    def add(self, row: Row) -> Row:
        if row.baseline and row.mbps and row.baseline in self.base:
            row.ratio = row.mbps / self.base[row.baseline]
        self.rows.append(row)
        rate = f"{row.mbps:.1f} MB/s" if row.mbps else f"{row.seconds:.3f} s"
        ratio = f", x{row.ratio:.3f} of {row.baseline}" if row.ratio is not None else ""
        _log(f"{row.name}: {rate}{ratio}")
        return row

    def baseline(self, name: str, seconds: float, note: str = "") -> None:
        self.base[name] = self.total / seconds
        self.add(Row(name, seconds, self.total, note=note))

    # -- sections -----------------------------------------------------------------------------

    def baselines(self) -> None:
        """Each baseline is the best of 3 runs (2 for tiktoken), as are the read-only
        ``inspect`` rows compared with them (:meth:`command`); the commands that write run
        once, so on a noisy machine their ratios are, if anything, pessimistic."""
        self.baseline(
            "orjson loads",
            min(baseline_loads(self.files) for _ in range(3)),
            "every line, 1 core; best of 3",
        )
        self.baseline(
            "orjson round trip",
            min(baseline_roundtrip(self.files, self.tmp / "roundtrip") for _ in range(3)),
            "loads + dumps + write, 1 core; best of 3",
        )
        runs = [baseline_jq(self.files) for _ in range(3)]
        jq = min((r for r in runs if r is not None), key=lambda r: r.seconds, default=None)
        if jq is not None:
            self.base["jq -c ."] = self.total / jq.seconds
            self.add(
                Row(
                    "jq -c .",
                    jq.seconds,
                    self.total,
                    peak_mb=jq.peak_kb / 1024,
                    note="one process over all files, output to /dev/null; best of 3",
                )
            )
        self.baseline(
            "tiktoken 1 core",
            min(baseline_tiktoken(self.facts) for _ in range(2)),
            "encode_ordinary, distinct texts of each file; best of 2",
        )
        self.baseline(
            "tiktoken 2 processes",
            min(baseline_tiktoken_procs(self.facts, 2) for _ in range(2)),
            "the same, files split over 2 processes; best of 2",
        )

    def command(
        self,
        name: str,
        args: Sequence[str],
        *,
        baseline: str,
        fresh: bool = False,
        target: str = "",
        note: str = "",
        repeat: int = 1,
    ) -> Row:
        """One command over the corpus folder; with ``repeat`` > 1 (read-only commands), the
        best time of that many runs, as the baselines are measured, and the largest peak."""
        files = self.files
        if fresh:
            files = copy_corpus(self.files, self.tmp / "work")
        argv = [*self.cc, *args, str(files[0].parent)]
        runs = []
        with open(os.devnull, "wb") as null:
            for _ in range(repeat):
                runs.append(run_proc(argv, env=self.env, stdout=null))
        if fresh:
            shutil.rmtree(self.tmp / "work")
        if repeat > 1:
            note = f"{note}; best of {repeat}" if note else f"best of {repeat}"
        return self.add(
            Row(
                name,
                min(r.seconds for r in runs),
                self.total,
                baseline,
                peak_mb=max(r.peak_kb for r in runs) / 1024,
                budget_mb=self.budget,
                target=target,
                note=note,
            )
        )

    def inspect(self) -> None:
        for jobs in (1, 2):
            self.command(
                f"inspect --estimate --jobs {jobs}",
                ["inspect", "--estimate", "--jobs", str(jobs)],
                baseline="orjson loads",
                repeat=3,
            )
        for jobs in (1, 2):
            self.command(
                f"inspect (exact) --jobs {jobs}",
                ["inspect", "--jobs", str(jobs)],
                baseline="tiktoken 2 processes",
                repeat=2,
            )

    def largest(self) -> None:
        """``inspect`` on the largest session of the corpus, in one process (issue 22):
        ``--estimate`` against orjson ``loads`` of the same file (target: at most 2.0x the
        time), exact counts against tiktoken alone on its distinct texts (at most 1.3x),
        both measured in one child process (:func:`child_largest`: interleaved rounds,
        medians; interpreter start-up is not in either time); then the command itself on
        that file, for its wall time with start-up and its peak RSS against the budget of
        that file."""
        facts = max(self.facts, key=lambda f: f.size)
        code = ("import sys\nsys.path.insert(0, sys.argv[1])\nfrom bench.run import "
                "child_largest\nchild_largest(sys.argv[2], sys.argv[3])\n")  # fmt: skip
        done = run_proc([sys.executable, "-c", code, str(ROOT), str(facts.path), facts.encoding],
                        env=self.env, stdout=subprocess.PIPE)  # fmt: skip
        got = json.loads(done.stdout)
        mb, budget = facts.size / MB, budget_mb([facts])
        name = f"{facts.path.name} ({mb:.1f} MB)"
        pairs = (("inspect --estimate", "estimate", "loads", 2.0, "CPU"),
                 ("inspect (exact)", "exact", "tiktoken", 1.3, "wall"))  # fmt: skip
        for (label, key, base, limit, clock), rounds in zip(pairs, LARGEST_ROUNDS, strict=True):
            how = f"median of {rounds} interleaved rounds, {clock} seconds"
            times = got[key] / got[base]  # the target is on the time: at most limit x
            self.add(Row(f"{label}, largest session, 1 process", got[key], mb,
                         baseline=f"{base} (same process)", ratio=got[base] / got[key],
                         target=f"<={limit:.1f}x its time ({times:.2f}x): "
                                f"{'met' if times <= limit else 'NOT met'}",
                         note=f"{name}: {got[base]:.3f} s {base}; {how}", extra=got))  # fmt: skip
        with open(os.devnull, "wb") as null:
            for flags, label in ((["--estimate"], "--estimate"), ([], "(exact)")):
                runs = [run_proc([*self.cc, "inspect", *flags, str(facts.path)], env=self.env,
                                 stdout=null) for _ in range(2)]  # fmt: skip
                self.add(Row(f"inspect {label} FILE, largest session (command)",
                             min(r.seconds for r in runs), mb,
                             peak_mb=max(r.peak_kb for r in runs) / 1024, budget_mb=budget,
                             note=f"{name}, interpreter start-up included; best of 2"))  # fmt: skip

    def evaluate(self) -> None:
        """``eval`` against ``inspect`` on the same files with the same flags (issue 16: eval
        is at least as fast as inspect), each the best of 3 (``--estimate``) or 2 (exact)
        runs, measured in turn: on the corpus as generated (nothing compacted: every probe
        is found in its own message) and on a copy compacted with ``compact --force`` (not
        timed: summaries to search, probes lost). The ratio is inspect's time over eval's:
        1.0 or more means eval is at least as fast."""
        compacted = copy_corpus(self.files, self.tmp / "eval-compacted")
        run_proc([*self.cc, "compact", "--force", "-q", "--jobs", "2", str(compacted[0].parent)],
                 env=self.env)  # fmt: skip
        for label, files in (("", self.files), (", compacted", compacted)):
            for flags, jobs, repeat in ((["--estimate"], 1, 3), ([], 2, 2)):
                mode = "--estimate" if flags else "(exact)"
                args = [*flags, "--jobs", str(jobs)]
                seen = self.timed(f"inspect {mode} --jobs {jobs}{label} (eval's pair)",
                                  ["inspect", *args], files, repeat)  # fmt: skip
                row = self.timed(f"eval {mode} --jobs {jobs}{label}", ["eval", *args],
                                 files, repeat)  # fmt: skip
                row.baseline = seen.name
                row.ratio = seen.seconds / row.seconds
                row.target = f">=1.00 of inspect: {'met' if row.ratio >= 1 else 'NOT met'}"
        shutil.rmtree(compacted[0].parent)

    def peers(self, mb: float, seed: int) -> None:
        """compactctl and cozempic on one Claude Code session (:func:`bench.peers.compare`):
        a row per tool, its wall time, tokens left and planted facts kept; compactctl's rows
        marked against cozempic's (issue 15: fewer tokens left, at least as many planted
        facts kept)."""
        from bench.peers import compare, peer_session

        results = compare(mb, seed)
        size = peer_session(mb, seed)[0].stat().st_size / MB
        peer = results[0]
        for r in results:
            row = self.add(Row(r.name, r.seconds, size, note=(
                f"{r.tokens_after:,d} of {r.tokens_before:,d} tokens left (cl100k_base); "
                f"planted kept {r.planted_kept}/{r.planted_total}; eval retention "
                f"{r.retention:.3f}; {size:.0f} MB Claude Code session; median of rounds "
                f"{', '.join(f'{x:.1f}' for x in r.runs)} s") + (
                f"; {r.note}" if r.note else ""), extra=r.to_json()))  # fmt: skip
            if r is not peer and r.returncode == 0 and peer.returncode == 0:
                ok = r.tokens_after < peer.tokens_after and r.planted_kept >= peer.planted_kept
                row.baseline = peer.name
                row.ratio = peer.seconds / r.seconds if r.seconds else None
                timed = "--layers" in r.name  # issue 22: the one pass, also on time
                if timed:
                    ok = ok and r.seconds <= peer.seconds
                row.target = (f"{'<= its time, ' if timed else ''}fewer tokens, >= planted "
                              f"kept than cozempic: {'met' if ok else 'NOT met'}")  # fmt: skip

    def timed(self, name: str, args: Sequence[str], files: Sequence[Path], repeat: int) -> Row:
        """A read-only command over the folder of ``files``: the best of ``repeat`` runs, and
        the largest peak RSS (rows added without a baseline ratio)."""
        argv = [*self.cc, *args, str(files[0].parent)]
        with open(os.devnull, "wb") as null:
            runs = [run_proc(argv, env=self.env, stdout=null) for _ in range(repeat)]
        mb = sum(f.stat().st_size for f in files) / MB
        return self.add(Row(name, min(r.seconds for r in runs), mb,
                            peak_mb=max(r.peak_kb for r in runs) / 1024, budget_mb=self.budget,
                            note=f"best of {repeat}"))  # fmt: skip

    def layers(self) -> None:
        common = ["-q", "--jobs", "2"]
        two = "2 workers vs the 1-core baseline; in place, fresh copy"
        for name in ("rules", "dedup"):
            self.command(
                f"{name} --jobs 2",
                [name, *common],
                baseline="orjson round trip",
                fresh=True,
                note=two,
            )
        self.command(
            "compact --force --jobs 2",
            ["compact", "--force", *common],
            baseline="orjson round trip",
            fresh=True,
            note="extractive summary; " + two,
        )

    def redaction(self) -> None:
        """:func:`~compactctl.summarize.redact.redact` over every message text of the corpus
        (:func:`message_texts`; reading them is not timed), in this process, best of 3."""
        from compactctl.summarize.redact import redact

        texts = [t for f in self.files for t in message_texts(f)]
        mb = sum(len(t.encode()) for t in texts) / MB
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            changed = sum(redact(t) is not t for t in texts)
            best = min(best, time.perf_counter() - t0)
        note = f"{len(texts)} message texts, {changed} redacted; best of 3"
        row = self.add(Row("redact", best, mb, baseline="orjson loads", note=note))
        row.extra["textsRedacted"] = changed

    def chain(self) -> None:
        """The pipe ``rules - | dedup - | compact --micro-only -``, one session file at a time,
        as shipped (exact tokens) and with ``--estimate``; then two floors measured the same
        way, which bound any chain of three Python processes per session: three plain
        interpreters copying stdin to stdout, and three that also import ``compactctl.cli``
        (what a stage pays before it reads a byte)."""
        cc = self.cc
        chains = {
            CHAIN: [
                [*cc, "rules", "-q", "-"],
                [*cc, "dedup", "-q", "-"],
                [*cc, "compact", "--micro-only", "-q", "-"],
            ],
            CHAIN + ", --estimate": [
                [*cc, "rules", "--estimate", "-q", "-"],
                [*cc, "dedup", "--estimate", "-q", "-"],
                [*cc, "compact", "--micro-only", "--estimate", "-q", "-"],
            ],
            FLOOR_PYTHON: [[sys.executable, "-c", _CAT]] * 3,
            FLOOR_IMPORT: [[sys.executable, "-c", "import compactctl.cli\n" + _CAT]] * 3,
        }
        notes = {
            CHAIN: "3 processes each, stdin to stdout, exact tokens (cl100k_base)",
            CHAIN + ", --estimate": "the same with the chars estimate: no tiktoken",
            FLOOR_PYTHON: "floor: 3 interpreters per file copying stdin to stdout",
            FLOOR_IMPORT: "floor: the same, each importing compactctl.cli first",
        }
        out = self.tmp / "chain.out"
        for name, stages in chains.items():
            seconds = 0.0
            peak = 0
            for f in self.files:
                proc = run_chain(stages, f, out, self.env)
                seconds += proc.seconds
                peak = max(peak, proc.peak_kb)
            out.unlink(missing_ok=True)
            floor = name in (FLOOR_PYTHON, FLOOR_IMPORT)
            self.add(
                Row(
                    name,
                    seconds,
                    self.total,
                    "orjson round trip",
                    peak_mb=None if floor else peak / 1024,
                    budget_mb=None if floor else self.budget,
                    note=f"{len(self.files)} files one at a time; {notes[name]}",
                )
            )

    def pipeline(self) -> None:
        """The same chain as composed library filters in one process (``compactctl.pipeline``:
        read, rules, dedup, micro, write), so that per-file process start does not hide the
        filters' own throughput. Stats use the chars estimate (the filters' default)."""
        out = self.tmp / "pipeline"
        argv = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--child-pipeline",
            str(out),
            *map(str, self.files),
        ]
        proc = run_proc(argv, env=self.env)
        shutil.rmtree(out, ignore_errors=True)
        self.add(
            Row(
                "pipeline(rules, dedup, micro), 1 process",
                proc.seconds,
                self.total,
                "orjson round trip",
                peak_mb=proc.peak_kb / 1024,
                budget_mb=self.budget,
                note="library filters over every file in one process (startup included), 1 core",
            )
        )

    def startup(self) -> None:
        def median(argv: list[str], n: int = 10) -> float:
            times = []
            for _ in range(n):
                times.append(run_proc(argv, env=self.env).seconds)
            return statistics.median(times)

        base = median([sys.executable, "-c", "pass"])
        self.add(Row("python -c pass", base, note="median of 10"))
        help_s = median([*self.cc, "--help"])
        row = self.add(Row("compactctl --help", help_s, note="median of 10"))
        row.baseline = "python -c pass"
        row.ratio = help_s / base
        row.extra["litellm"] = self.litellm_imports()
        imported = [k for k, v in row.extra["litellm"].items() if v]
        row.note = "median of 10; litellm imported by: " + (", ".join(imported) or "none")

    def litellm_imports(self) -> dict[str, bool]:
        """Whether each command imports litellm (checked in-process after it ran)."""
        small = min(self.facts, key=lambda f: f.size).path
        work = self.tmp / "imports"
        work.mkdir(exist_ok=True)
        cases = {
            "--help": ["--help"],
            "inspect": ["inspect", "--estimate"],
            "inspect exact": ["inspect"],
            "rules": ["rules", "-q"],
            "dedup": ["dedup", "-q"],
            "compact --micro-only": ["compact", "--micro-only", "--force", "-q"],
            "compact --force": ["compact", "--force", "-q"],
        }
        code = (
            "import sys\nfrom compactctl.cli import main\n"
            "sys.argv = ['compactctl', *sys.argv[1:]]\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "sys.stderr.write('LITELLM=%d\\n' % ('litellm' in sys.modules))\n"
        )
        out: dict[str, bool] = {}
        for name, args in cases.items():
            target = work / "s.jsonl"
            shutil.copyfile(small, target)
            extra = [] if args == ["--help"] else [str(target)]
            proc = run_proc([sys.executable, "-c", code, *args, *extra], env=self.env)
            out[name] = b"LITELLM=1" in proc.stderr
        shutil.rmtree(work)
        return out


# --- dedup at scale -------------------------------------------------------------------------


def dups_session(n: int, seed: int, max_chars: int) -> tuple[Path, Path]:
    """A session holding the ``n`` texts of ``bench.gen_dups.generate`` as tool outputs (ten
    per assistant message), and a sidecar with the intended pairs. Cached in bench/corpus."""
    from bench.gen_dups import generate

    folder = CORPUS_DIR / "dups"
    folder.mkdir(parents=True, exist_ok=True)
    session = folder / f"dups-n{n}-s{seed}-c{max_chars}.jsonl"
    sidecar = session.with_suffix(".intended.json")
    if session.exists() and sidecar.exists():
        return session, sidecar
    items, intended = generate(n, seed=seed, max_chars=max_chars)
    tmp = session.with_suffix(".tmp")
    with open(tmp, "wb") as out:
        out.write(
            orjson.dumps(
                {"type": "session", "uuid": "s0", "model": "gpt-4o", "contextWindow": 128000}
            )
            + b"\n"
        )
        out.write(
            orjson.dumps(
                {"type": "message", "uuid": "u0", "turnId": 1, "role": "user", "content": "go"}
            )
            + b"\n"
        )
        for start in range(0, n, 10):
            chunk = items[start : start + 10]
            calls = [
                {"id": f"c{key}", "name": "bash", "arguments": {"n": i}}
                for i, (key, _) in enumerate(chunk)
            ]
            out.write(
                orjson.dumps(
                    {
                        "type": "message",
                        "uuid": f"a{start}",
                        "turnId": 1,
                        "role": "assistant",
                        "content": "",
                        "toolCalls": calls,
                    }
                )
                + b"\n"
            )
            for key, text in chunk:
                out.write(
                    orjson.dumps(
                        {
                            "type": "message",
                            "uuid": key,
                            "turnId": 1,
                            "role": "tool",
                            "toolCallId": f"c{key}",
                            "toolName": "bash",
                            "content": text,
                        }
                    )
                    + b"\n"
                )
    os.replace(tmp, session)
    sidecar.write_text(json.dumps(sorted(intended)))
    return session, sidecar


def _dups_items(session: Path) -> list[tuple[str, str]]:
    items = []
    with open(session, "rb") as fh:
        for line in fh:
            d = orjson.loads(line)
            if d.get("role") == "tool":
                items.append((d["uuid"], d["content"]))
    return items


def child_dedup(session: Path, sidecar: Path, sample: int, exact_items: int) -> dict[str, Any]:
    """Runs in its own process: time ``find_duplicates`` on the session's texts; recall.

    Recall 1 (``recall``): of a sample of the generator's intended pairs whose exact Jaccard
    is >= 0.6, the share whose older text is reported as a duplicate. Recall 2
    (``recallVsExact``): on the first ``exact_items`` texts, the pairs of the LSH path against
    those of the exact all-pairs path (same algorithm, every candidate compared).
    """
    import resource

    from compactctl.layers.similarity import find_duplicates, jaccard, shingles

    items = _dups_items(session)
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    pairs = find_duplicates(items, threshold=0.6, min_chars=200)
    seconds = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    text = dict(items)
    intended = [tuple(p) for p in json.loads(sidecar.read_text())]
    rng = random.Random(7)
    chosen = rng.sample(intended, min(sample, len(intended)))
    should = [(o, n) for o, n in chosen if jaccard(shingles(text[o]), shingles(text[n])) >= 0.6]
    reported = {p.older for p in pairs}
    found = sum(1 for o, _ in should if o in reported)
    result: dict[str, Any] = {
        "texts": len(items),
        "chars": sum(len(t) for _, t in items),
        "seconds": seconds,
        "cpuSeconds": cpu,
        "peakKb": peak,
        "pairs": len(pairs),
        "recall": found / len(should) if should else 1.0,
        "recallSample": len(should),
        "should": should,
    }
    if exact_items:
        head = items[:exact_items]
        lsh = {(p.older, p.newer) for p in find_duplicates(head, min_chars=200)}
        exact = {
            (p.older, p.newer) for p in find_duplicates(head, min_chars=200, lsh_min_items=10**9)
        }
        olders = {o for o, _ in lsh}
        result["recallVsExact"] = (
            sum(1 for o, _ in exact if o in olders) / len(exact) if exact else 1.0
        )
        result["exactPairs"] = len(exact)
        result["exactItems"] = len(head)
    return result


def _dedup_target(r: dict[str, Any]) -> str:
    ok = r["seconds"] < 30 and r["recall"] >= 0.98
    return f"< 30 s, recall >= 0.98: {'met' if ok else 'NOT met'}"


def dedup_scale(bench: Bench, sizes: Sequence[int], seed: int) -> None:
    for n in sizes:
        _log(f"dedup at {n} texts: preparing the session")
        session, sidecar = dups_session(n, seed, 2000)
        mb = session.stat().st_size / MB
        code = (
            "import json, sys\nfrom pathlib import Path\nsys.path.insert(0, sys.argv[1])\n"
            "from bench.run import child_dedup\n"
            "r = child_dedup(Path(sys.argv[2]), Path(sys.argv[3]), 5000, int(sys.argv[4]))\n"
            "sys.stdout.write(json.dumps(r))\n"
        )
        exact_items = 4000 if n == min(sizes) else 0
        proc = run_proc(
            [sys.executable, "-c", code, str(ROOT), str(session), str(sidecar), str(exact_items)],
            env=bench.env,
            stdout=subprocess.PIPE,
        )
        r = json.loads(proc.stdout)
        should = r.pop("should")
        note = f"recall {r['recall']:.4f} on {r['recallSample']} pairs with J>=0.6"
        if "recallVsExact" in r:
            note += f"; vs exact all-pairs on {r['exactItems']}: {r['recallVsExact']:.4f}"
        bench.add(
            Row(
                f"find_duplicates {n // 1000}k texts",
                r["seconds"],
                r["chars"] / MB,
                peak_mb=r["peakKb"] / 1024,
                target=_dedup_target(r) if n >= 100_000 else "",
                note=f"{r['pairs']} pairs, cpu {r['cpuSeconds']:.1f} s; {note}",
                extra=r,
            )
        )
        budget = budget_mb([file_facts(session)])
        work = bench.tmp / "dups"
        work.mkdir(exist_ok=True)
        target = work / session.name
        shutil.copyfile(session, target)
        proc = run_proc(
            [*bench.cc, "dedup", "--estimate", "-q", str(target)],
            env=bench.env,
        )
        last = target.read_bytes().rstrip(b"\n").rsplit(b"\n", 1)[-1]
        event = orjson.loads(last)
        olders = set(event.get("duplicateOf", {})) if event.get("mode") == "dedup" else set()
        found = sum(1 for o, _ in should if o in olders)
        recall = found / len(should) if should else 1.0
        shutil.rmtree(work)
        bench.add(
            Row(
                f"dedup --estimate, {n // 1000}k tool outputs",
                proc.seconds,
                mb,
                peak_mb=proc.peak_kb / 1024,
                budget_mb=budget,
                note=f"{len(olders)} pairs; recall {recall:.4f}; session {mb:.0f} MB",
                extra={"recall": recall, "pairs": len(olders)},
            )
        )


# --- many files -----------------------------------------------------------------------------


def many_files(bench: Bench, count: int, seed: int) -> dict[str, Any]:
    """``--jobs 2`` over 100 and over ``count`` small sessions: memory must stay flat."""
    from bench.gen_corpus import write_corpus

    folder = CORPUS_DIR / f"many-{count}-s{seed}"
    files = write_corpus(
        folder,
        total_mb=count * 0.05,
        seed=seed + 100,
        max_session_mb=0.1,
        min_session_kb=4,
        prefix="small",
    )
    files = files[:count]
    out: dict[str, Any] = {"files": {}}
    for n in (100, count):
        subset = files[:n]
        work = copy_corpus(subset, bench.tmp / f"many-{n}")
        mb = sum(f.stat().st_size for f in work) / MB
        facts = [file_facts(f) for f in work]
        budget = budget_mb(facts)
        for label, args in (
            ("inspect --estimate --jobs 2", ["inspect", "--estimate", "--jobs", "2"]),
            (
                "inspect --estimate --json --jobs 2",
                ["inspect", "--estimate", "--json", "--jobs", "2"],
            ),
            ("rules --jobs 2", ["rules", "-q", "--jobs", "2", "--json"]),
        ):
            proc = run_proc(
                [*bench.cc, *args, str(work[0].parent)],
                env=bench.env,
                stdout=subprocess.PIPE,
                sample=True,
            )
            if "--json" in args:
                doc = orjson.loads(proc.stdout)
                done = len(doc["files"])
            else:
                done = proc.stdout.count(b"  [canonical]")
            ok = done == n and proc.returncode in (0, 1)
            target = ""
            first = out["files"].get(label, {}).get(100)
            if n != 100 and first is not None:
                grow = (proc.parent_kb - first["parentKb"]) / 1024
                wgrow = (proc.worker_kb - first["workerKb"]) / 1024
                per_file = (proc.parent_kb - first["parentKb"]) / (n - 100)
                flat = grow <= 2 and wgrow <= 2
                target = (
                    f"flat: {'met' if flat else 'NOT met'} (parent {grow:+.0f} MB = "
                    f"{per_file:.1f} KB/file, workers {wgrow:+.0f} MB vs 100 files)"
                )
            bench.add(
                Row(
                    f"{label}, {n} files",
                    proc.seconds,
                    mb,
                    peak_mb=proc.peak_kb / 1024,
                    budget_mb=budget,
                    target=target,
                    note=(
                        f"parent {proc.parent_kb / 1024:.0f} MB, workers "
                        f"{proc.worker_kb / 1024:.0f} MB; {done}/{n} files"
                        + ("" if ok else " FAILED")
                    ),
                    extra={
                        "parentKb": proc.parent_kb,
                        "workerKb": proc.worker_kb,
                        "done": done,
                        "ms_per_file": proc.seconds * 1000 / n,
                    },
                )
            )
            out["files"].setdefault(label, {})[n] = {
                "parentKb": proc.parent_kb,
                "workerKb": proc.worker_kb,
                "seconds": proc.seconds,
            }
        shutil.rmtree(work[0].parent)
    return out


# --- output ---------------------------------------------------------------------------------


def _fmt(value: float | None, spec: str) -> str:
    return "" if value is None else format(value, spec)


def table(rows: Sequence[Row]) -> str:
    head = [
        "measurement",
        "MB/s",
        "ratio",
        "of baseline",
        "peak RSS MB",
        "budget",
        "s",
        "target",
        "note",
    ]
    body = []
    for r in rows:
        body.append(
            [
                r.name,
                _fmt(r.mbps, ".1f"),
                _fmt(r.ratio, ".3f"),
                r.baseline,
                _fmt(r.peak_mb, ".0f"),
                _fmt(r.budget_mb, ".0f"),
                _fmt(r.seconds, ".3f" if r.seconds < 10 else ".1f"),
                r.target,
                r.note,
            ]
        )
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    numeric = {1, 2, 4, 5, 6}

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.rjust(w) if i in numeric else c.ljust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    out = [line(head), line(["-" * w for w in widths])]
    out += [line(b) for b in body]
    return "\n".join(out) + "\n"


def mark_targets(bench: Bench) -> None:
    rows = {r.name: r for r in bench.rows}

    def mark(name: str, text: str, ok: bool) -> None:
        if name in rows:
            rows[name].target = f"{text}: {'met' if ok else 'NOT met'}"

    for jobs in (1, 2):
        r = rows.get(f"inspect --estimate --jobs {jobs}")
        if r is not None and r.mbps:
            jq = bench.base.get("jq -c .")
            vs_jq = r.mbps / jq if jq else None
            ok = (r.ratio or 0) >= 0.5 and (vs_jq is None or vs_jq >= 3)
            jq_text = f", {vs_jq:.1f}x jq" if vs_jq is not None else ""
            mark(r.name, f">=0.50 loads & >=3x jq ({jq_text.strip(', ')})", ok)
            r.extra["vsJq"] = vs_jq
        r = rows.get(f"inspect (exact) --jobs {jobs}")
        if r is not None and r.ratio is not None:
            one = bench.base.get("tiktoken 1 core")
            r.extra["vsTiktoken1"] = r.mbps / one if one and r.mbps else None
            if r.extra["vsTiktoken1"] is not None:
                r.note = f"x{r.extra['vsTiktoken1']:.2f} of tiktoken 1 core"
            if jobs == 2:
                mark(r.name, ">=0.80", r.ratio >= 0.8)
    for name in (CHAIN, CHAIN + ", --estimate", "pipeline(rules, dedup, micro), 1 process"):
        r = rows.get(name)
        if r is not None and r.ratio is not None:
            mark(r.name, ">=0.40", r.ratio >= 0.4)
    for name in (FLOOR_PYTHON, FLOOR_IMPORT):
        r = rows.get(name)
        if r is not None and r.ratio is not None:
            r.target = f"bound on any such chain: x{r.ratio:.3f}"
    r = rows.get("redact")
    if r is not None and r.mbps:
        mark(r.name, ">=50 MB/s", r.mbps >= 50)
    r = rows.get("compactctl --help")
    if r is not None:
        none = not any(r.extra.get("litellm", {}).values())
        mark(r.name, "<=150 ms, no litellm", r.seconds <= 0.150 and none)
    for r in bench.rows:
        if r.budget_mb is not None and r.peak_mb is not None:
            rss = f"RSS {'met' if r.peak_mb <= r.budget_mb else 'NOT met'}"
            r.target = f"{r.target}; {rss}" if r.target else rss


def serve_rows(bench: Bench) -> None:
    """``compactctl serve`` in requests per second (bench/serve_bench.py), against one
    ``compactctl`` process per request measured in the same run (the ratio)."""
    from bench.serve_bench import serve_rates

    rates = serve_rates(bench.tmp, bench.env)
    for kind in ("inspect", "compact"):
        served, procs = rates[kind], rates[f"{kind}Process"]
        bench.rows.append(
            Row(
                f"serve {kind} (small session)",
                seconds=1 / served,
                baseline=f"{kind} process/request",
                ratio=served / procs,
                note=f"{served:.1f} req/s vs {procs:.1f} req/s",
                extra=rates,
            )
        )


SECTIONS = ("baselines", "inspect", "eval", "layers", "chain", "startup", "redact", "dedup",
            "many", "peers", "serve", "dask")  # fmt: skip
"""The sections of a run, in order (``BENCH_SKIP``, ``--only``)."""


def sections_to_skip(argv: Sequence[str], env_skip: str) -> set[str]:
    """The sections not to run: ``BENCH_SKIP``'s, and with ``--only A,B`` every other one.

    Raises:
        SystemExit: an unknown section name or argument (exit 2, with the known names).

    >>> sorted(sections_to_skip(["--only", "eval"], ""))[:3]
    ['baselines', 'chain', 'dedup']
    """
    skip = {s.strip() for s in env_skip.split(",") if s.strip()}
    if argv:
        if len(argv) != 2 or argv[0] != "--only":
            raise SystemExit(f"usage: bench/run.py [--only {','.join(SECTIONS)}]")
        only = {s.strip() for s in argv[1].split(",") if s.strip()}
        unknown = only - set(SECTIONS)
        if unknown or not only:
            raise SystemExit(f"--only: unknown section(s) {sorted(unknown)}; known: {SECTIONS}")
        skip |= set(SECTIONS) - only
    return skip


def main(argv: Sequence[str] = ()) -> int:
    from bench.gen_corpus import write_corpus

    mb = float(os.environ.get("BENCH_MB", "200"))
    seed = int(os.environ.get("BENCH_SEED", "1"))
    skip = sections_to_skip(argv, os.environ.get("BENCH_SKIP", ""))
    dedup_sizes = [int(x) for x in os.environ.get("BENCH_DEDUP_N", "20000,100000").split(",") if x]
    many = int(os.environ.get("BENCH_MANY", "1000"))
    started = time.time()

    folder = CORPUS_DIR / f"main-{mb:g}mb-s{seed}"
    _log(f"corpus: {folder} ({mb:g} MB)")
    files = write_corpus(folder, total_mb=mb, seed=seed, max_session_mb=min(12.0, max(0.2, mb / 8)))
    facts = [file_facts(f) for f in files]
    for f in files:  # warm the page cache
        f.read_bytes()
    # and compactctl's encoding cache (~/.cache/compactctl), as any run after the first has it
    from compactctl.tokens import ensure_offline_encodings, load_encoding

    ensure_offline_encodings()
    for name in {f.encoding for f in facts}:
        load_encoding(name)
    tmp = Path(tempfile.mkdtemp(prefix="compactctl-bench-"))
    try:
        bench = Bench(files, facts, tmp)
        _log(
            f"{len(files)} sessions, {bench.total:.1f} MB, "
            f"{sum(f.messages for f in facts)} messages, "
            f"largest {max(f.size for f in facts) / MB:.1f} MB"
        )
        if "baselines" not in skip:
            bench.baselines()
        if "inspect" not in skip:
            bench.inspect()
            bench.largest()
        if "eval" not in skip:
            bench.evaluate()
        if "layers" not in skip:
            bench.layers()
        if "chain" not in skip:
            bench.chain()
            bench.pipeline()
        if "startup" not in skip:
            bench.startup()
        if "redact" not in skip:
            bench.redaction()
        if "dedup" not in skip:
            dedup_scale(bench, dedup_sizes, seed)
        many_doc = many_files(bench, many, seed) if "many" not in skip else {}
        if "peers" not in skip:
            bench.peers(float(os.environ.get("BENCH_PEERS_MB", "32")), seed)
        if "serve" not in skip:
            serve_rows(bench)
        if "dask" not in skip:
            from bench.dask_bench import dask_rows
            from bench.gen_corpus import write_corpus as write_small

            small = write_small(CORPUS_DIR / f"many-{many}-s{seed}", total_mb=many * 0.05,
                                seed=seed + 100, max_session_mb=0.1, min_session_kb=4,
                                prefix="small")[:many]  # fmt: skip
            dask_rows(bench, run_proc, copy_corpus, small, Row)
        mark_targets(bench)
        text = table(bench.rows)
        sys.stdout.write(text)
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        result = RESULTS_DIR / f"bench-{stamp}.json"
        doc = {
            "started": datetime.fromtimestamp(started, UTC).isoformat(),
            "seconds": time.time() - started,
            "benchMb": mb,
            "seed": seed,
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "corpus": {
                "folder": str(folder),
                "files": len(files),
                "bytes": sum(f.size for f in facts),
                "messages": sum(f.messages for f in facts),
                "largestFile": max(f.size for f in facts),
                "longestLine": max(f.longest_line for f in facts),
                "budgetMb": bench.budget,
            },
            "baselines": bench.base,
            "rows": [{**{k: v for k, v in asdict(r).items()}, "mbps": r.mbps} for r in bench.rows],
            "manyFiles": many_doc,
            "table": text,
        }
        result.write_text(json.dumps(doc, indent=1, default=str))
        _log(f"wrote {result.relative_to(ROOT)} in {time.time() - started:.0f} s")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child-tiktoken"]:
        child_tiktoken()
        raise SystemExit(0)
    if sys.argv[1:2] == ["--child-pipeline"]:
        child_pipeline(sys.argv[2], sys.argv[3:])
        raise SystemExit(0)
    raise SystemExit(main(sys.argv[1:]))
