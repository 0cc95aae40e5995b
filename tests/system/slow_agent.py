"""A slow agent for the live-writer trials (tests/system/test_live_writer.py): it appends
lines to a transcript in pieces, pausing mid-line, and never takes compactctl's lock.

Usage: ``python tests/system/slow_agent.py`` with commands on stdin, one a line:

- ``open PATH SEED``: finish the line under way, print ``done N`` (the lines written to the
  previous file; nothing for the first ``open``), then append to PATH (``O_APPEND``, as
  agent runtimes open their transcripts) the lines :func:`line` ``(SEED, 0)``, ``(SEED,
  1)``, ... until the next command;
- ``stop``: finish the line under way, print ``done N`` and exit.

Each line is written in 1 to 4 ``write()`` calls (:func:`pieces`). Between the pieces the
agent pauses a few milliseconds, and now and then (one pause in five) 50 to 700 ms: a model
streaming its answer, a runtime flushing a buffer, an agent thinking mid-line. Between lines
it pauses 2 to 15 ms. Commands are read between lines only, so a file is left with its last
line whole.
"""

from __future__ import annotations

import os
import random
import select
import sys
import time

import orjson


def line(seed: int, i: int) -> bytes:
    """Line ``i`` of the agent with ``seed``, ``\\n`` included (deterministic)."""
    rng = random.Random(f"line-{seed}-{i}")
    words = " ".join(rng.choice(["alpha", "beta", "é", "🙂", "step", "ok"]) for _ in range(12))
    role = ("user", "assistant", "tool", "assistant")[i % 4]
    data = {"type": "message", "uuid": f"a-{seed}-{i}", "role": role, "content": words}
    if role == "tool":
        data.update(toolCallId=f"c-{i}", toolName="bash", content=f"{words}\n" * rng.randint(1, 40))
    return orjson.dumps(data) + b"\n"


def pieces(seed: int, i: int, data: bytes) -> list[bytes]:
    """How line ``i`` is written: 1 to 4 ``write()`` calls, cut anywhere."""
    rng = random.Random(f"pieces-{seed}-{i}")
    n = rng.randint(1, 4)
    cuts = sorted(rng.sample(range(1, len(data)), n - 1))
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]


def _command(wait: float | None) -> str | None:
    ready, _, _ = select.select([sys.stdin], [], [], wait)
    return sys.stdin.readline().strip() if ready else None


def main() -> None:
    rng = random.Random(os.getpid())
    fd: int | None = None
    seed = i = 0
    while True:
        cmd = _command(0 if fd is not None else None)
        if cmd is not None:
            if fd is not None:
                os.close(fd)
                print(f"done {i}", flush=True)
                fd = None
            if not cmd or cmd == "stop":
                return
            _, path, s = cmd.split()
            fd, seed, i = os.open(path, os.O_WRONLY | os.O_APPEND), int(s), 0
            continue
        assert fd is not None
        parts = pieces(seed, i, line(seed, i))
        for n, part in enumerate(parts):
            view = memoryview(part)
            while view:
                view = view[os.write(fd, view) :]
            if n < len(parts) - 1:
                long = rng.random() < 0.2
                time.sleep(rng.uniform(0.05, 0.7) if long else rng.uniform(0.001, 0.01))
        i += 1
        time.sleep(rng.uniform(0.002, 0.015))


if __name__ == "__main__":
    main()
