"""compactctl side by side with another session cleaner on the same Claude Code session (issue 15).

The peer is cozempic (``cozempic treat SESSION -rx aggressive --execute``: the most used
Claude Code session cleaner, its most aggressive prescription), installed from PyPI into a
virtualenv of the benchmark's own, ``bench/.venv-peers`` (git-ignored, created on first use
with the ordinary ``pip``; never a dependency of compactctl), at the version
:data:`COZEMPIC` pins.

The session: :func:`bench.gen_probed.write_probed` in Claude Code's format, grown to
``mb`` MB (default 32), with its planted facts (``.probes.json``). Each tool runs on its own
copy, timed as a subprocess (wall seconds) in ``BENCH_PEERS_ROUNDS`` rounds (default 3) in
which the tools take turns; a tool's time is the median of its rounds. cozempic rewrites its
copy in place (its backup and its files under ``$HOME`` go to a temporary folder);
compactctl never writes into another agent's file, so ``compact --force -o OUT`` writes
canonical JSONL with the compaction events (and ``--layers all`` when this compactctl has
that option).

Each result is measured the same way, with compactctl's library:

- **tokens left**: the effective context's prompt tokens with one tokenizer for all
  (``cl100k_base``), as ``eval --encoding cl100k_base --against ORIGINAL`` reports them
  (cozempic's output is a Claude Code file compactctl reads; its effective context is its
  messages);
- **planted facts kept**: each planted probe looked for in the effective context with
  :class:`compactctl.evaluate.check.Context` (exact or whitespace/case normalised);
- **eval retention**: the share of the probes ``eval`` extracts from the original that the
  result keeps.

    .venv/bin/python -m bench.peers            # prints the table; BENCH_PEERS_MB, BENCH_SEED
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
PEERS_VENV = ROOT / "bench" / ".venv-peers"
COZEMPIC = "cozempic==1.8.39"
"""The peer, pinned: the version this comparison was written against (``treat -rx
aggressive --execute``)."""
TOKENIZER = "cl100k_base"
PEERS_DIR = ROOT / "bench" / "corpus" / "peers"

__all__ = ["COZEMPIC", "PeerResult", "compare", "cozempic_exe", "peer_session"]


def _log(msg: str) -> None:
    sys.stderr.write(f"[peers {time.strftime('%H:%M:%S')}] {msg}\n")
    sys.stderr.flush()


def cozempic_exe() -> Path:
    """The ``cozempic`` of ``bench/.venv-peers``, created and installed on first use.

    Raises:
        RuntimeError: the virtualenv or the install failed (the pip output is in the message).
    """
    exe = PEERS_VENV / "bin" / "cozempic"
    if exe.exists():
        return exe
    _log(f"installing {COZEMPIC} into {PEERS_VENV.relative_to(ROOT)}")
    steps = [
        [sys.executable, "-m", "venv", str(PEERS_VENV)],
        [str(PEERS_VENV / "bin" / "python"), "-m", "pip", "install", "--quiet", COZEMPIC],
    ]
    for argv in steps:
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv[:4])} ... failed: {done.stderr[-2000:]}")
    return exe


def peer_session(mb: float, seed: int) -> tuple[Path, Path]:
    """A Claude Code session of about ``mb`` MB with planted facts, and its probes file;
    written once under ``bench/corpus/peers/`` (same arguments, same bytes)."""
    from bench.gen_probed import write_probed

    PEERS_DIR.mkdir(parents=True, exist_ok=True)
    path = PEERS_DIR / f"claude-{mb:g}mb-s{seed}.jsonl"
    probes = path.with_name(path.name.split(".")[0] + ".probes.json")
    if path.exists() and probes.exists():
        return path, probes
    tmp = path.with_name(f"tmp-{path.name}")
    turns = 100
    for _ in range(4):  # the bytes per turn grow with the session (its project is larger)
        _log(f"writing {path.name}: {turns} turns")
        size = write_probed(tmp, seed, turns, fmt="claude-code").stat().st_size
        if size >= mb * 1e6:
            break
        turns = round(turns * mb * 1e6 / size * 1.03) + 1
    tmp.with_name(tmp.name.split(".")[0] + ".probes.json").replace(probes)
    tmp.replace(path)
    return path, probes


@dataclass
class PeerResult:
    """One tool's result on the session (tokens in :data:`TOKENIZER` tokens)."""

    name: str
    seconds: float
    """The median of :attr:`runs` (wall seconds)."""
    returncode: int
    note: str = ""
    runs: list[float] = field(default_factory=list)
    """Wall seconds of each round, in order (``BENCH_PEERS_ROUNDS``, default 3)."""
    retention: float = 0.0
    planted_by_kind: dict[str, list[int]] = field(default_factory=dict)
    tokens_before = tokens_after = planted_kept = planted_total = output_bytes = 0

    def to_json(self) -> dict[str, Any]:
        counts = ("tokens_before", "tokens_after", "planted_kept", "planted_total", "output_bytes")
        return {**{k: getattr(self, k) for k in counts}, **self.__dict__}


def measure(result: PeerResult, output: Path, original: Path, probes: Path) -> PeerResult:
    """Fill ``result``'s tokens, planted facts and eval retention from ``output``."""
    from compactctl.evaluate.check import Context
    from compactctl.evaluate.job import EvalOptions, eval_path
    from compactctl.evaluate.probes import Probe
    from compactctl.session import Session

    evaluated = eval_path(str(output), EvalOptions(encoding=TOKENIZER, against=str(original)))
    got = evaluated["result"]
    result.tokens_before, result.tokens_after = got.tokens_before, got.tokens_after
    result.retention = got.counts.retention
    context = Context(Session.open(str(output), encoding=TOKENIZER).effective())
    planted = orjson.loads(probes.read_bytes())
    for p in planted:
        kept = context.match(Probe(str(p["kind"]), str(p["text"]), None, None)) is not None
        counts = result.planted_by_kind.setdefault(str(p["kind"]), [0, 0])
        counts[0] += kept
        counts[1] += 1
        result.planted_kept += kept
    result.planted_total = len(planted)
    result.output_bytes = output.stat().st_size
    return result


def _timed(argv: list[str], env: dict[str, str]) -> tuple[float, int, str]:
    t0 = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    return time.perf_counter() - t0, done.returncode, done.stderr[-1500:] + done.stdout[-1500:]


def compactctl_argv() -> list[str]:
    exe = Path(sys.executable).parent / "compactctl"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "compactctl"]


def compare(mb: float = 32.0, seed: int = 1) -> list[PeerResult]:
    """cozempic and compactctl on copies of one session; see the module docstring.

    Raises:
        RuntimeError: cozempic could not be installed.
    """
    session, probes = peer_session(mb, seed)
    exe = cozempic_exe()
    rounds = max(1, int(os.environ.get("BENCH_PEERS_ROUNDS", "3")))
    results: list[PeerResult] = []
    work = Path(tempfile.mkdtemp(prefix="compactctl-peers-"))
    try:
        env = dict(os.environ)
        env.update(HOME=str(work / "home"), COZEMPIC_NO_AUTO_INIT="1",
                   COZEMPIC_NO_GLOBAL_INIT="1")  # fmt: skip
        (work / "home").mkdir()
        copy = work / "cozempic" / session.name
        copy.parent.mkdir()
        cc_env = dict(os.environ)
        cc_env.update(COMPACTCTL_DB=str(work / "store.db"), XDG_CONFIG_HOME=str(work / "config"))
        cc = compactctl_argv()
        tools: list[tuple[str, list[str], dict[str, str], Path]] = [
            ("cozempic treat -rx aggressive --execute",
             [str(exe), "treat", str(copy), "-rx", "aggressive", "--execute"], env, copy),
        ]  # fmt: skip
        runs = [("compactctl compact --force", ["compact", "--force"])]
        helptext = subprocess.run([*cc, "compact", "--help"], capture_output=True, text=True,
                                  env=cc_env, check=False).stdout  # fmt: skip
        if "--layers" in helptext:
            runs.append(("compactctl compact --force --layers all",
                         ["compact", "--force", "--layers", "all"]))  # fmt: skip
        for name, args in runs:
            out_path = work / f"{len(tools)}.jsonl"
            argv = [*cc, *args, "-q", "-o", str(out_path), str(session)]
            tools.append((name, argv, cc_env, out_path))
        # the tools take turns, round after round, so a change in the machine's load falls on
        # all of them alike; each result is the median of its rounds, measured on its output
        # of the last round (cozempic rewrites its copy in place: a fresh copy each round)
        seconds: dict[str, list[float]] = {name: [] for name, *_ in tools}
        done: dict[str, tuple[int, str]] = {}
        for _ in range(rounds):
            for name, argv, tool_env, _out in tools:
                if name == tools[0][0]:
                    shutil.copyfile(session, copy)
                took, code, out = _timed(argv, tool_env)
                seconds[name].append(took)
                if code or name not in done:  # a failed round is kept, not a later success
                    done[name] = (code, out)
        for name, _argv, _env, out_path in tools:
            code, out = done[name]
            result = PeerResult(name, statistics.median(seconds[name]), code,
                                runs=[round(x, 2) for x in seconds[name]])  # fmt: skip
            results.append(measure(result, out_path, session, probes) if code == 0 else result)
            if code != 0:
                result.note = f"exited {code}: {out}"
        if "--layers" not in helptext:
            results[-1].note = "this compactctl has no compact --layers: that row is left out"
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return results


def table(results: list[PeerResult], session: Path) -> str:
    """The side-by-side table (text)."""
    head = f"{session.name}: {session.stat().st_size / 1e6:.1f} MB Claude Code session"
    lines = [head, f"  {'tool':42s} {'wall s':>7s} {'tokens left':>12s} {'planted kept':>13s}"
                   f" {'eval retention':>15s}"]  # fmt: skip
    for r in results:
        planted = f"{r.planted_kept}/{r.planted_total}"
        lines.append(f"  {r.name:42s} {r.seconds:7.1f} {r.tokens_after:12,d} {planted:>13s}"
                     f" {r.retention:15.3f}")  # fmt: skip
    if results:
        lines.append(f"  tokens before ({TOKENIZER}): {results[0].tokens_before:,d}")
    for r in results:
        lost = {k: f"{v[0]}/{v[1]}" for k, v in r.planted_by_kind.items() if v[0] < v[1]}
        if lost:
            lines.append(f"  {r.name}: kinds not all kept: {lost}")
        if r.note:
            lines.append(f"  {r.name}: {r.note}")
    for r in results:
        lines.append(f"  {r.name}: wall s per round {', '.join(f'{x:.1f}' for x in r.runs)}")
    return "\n".join(lines) + "\n"


def main() -> int:
    mb = float(os.environ.get("BENCH_PEERS_MB", "32"))
    seed = int(os.environ.get("BENCH_SEED", "1"))
    results = compare(mb, seed)
    sys.stdout.write(table(results, peer_session(mb, seed)[0]))
    return 0


if __name__ == "__main__":
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
