"""An agent-like writer for tests/test_concurrency.py: appends lines, never takes our lock.

Usage: ``python tests/agent_writer.py PATH SEED STOP_FILE``. Appends the records
:func:`record` ``(seed, 0)``, ``(seed, 1)``, ... to PATH (opened ``O_APPEND``, as agent
runtimes do) until STOP_FILE exists, then prints how many it wrote. Like a real agent it
writes turns (a user message, an assistant tool call, the tool result, an answer), some lines
large (1 to 2 MB: a file read, a file snapshot), and some in several ``write()`` calls with
short sleeps between them (a runtime flushing a buffered line in pieces). It never calls
``flock``.
"""

from __future__ import annotations

import os
import random
import sys
import time

import orjson

BIG_LINES = {6: "tool", 41: "snapshot", 90: "snapshot"}
"""Line numbers of the large records (>= 1 MB), and what they are."""


def record(seed: int, i: int) -> bytes:
    """Line ``i`` of the writer with ``seed``, ``\\n`` included (deterministic)."""
    rng = random.Random(f"{seed}-{i}")
    turn, step = divmod(i, 4)
    words = " ".join(rng.choice(["alpha", "beta", "gamma", "delta", "é", "🙂"]) for _ in range(20))
    uuid = f"w-{i}"
    big = BIG_LINES.get(i)
    if big == "snapshot":
        data = {
            "type": "file-history-snapshot",
            "uuid": uuid,
            "snapshot": {"path": f"src/big{i}.py", "text": "x = 1\n" * (200_000 + i)},
        }
    elif step == 0:
        data = {"type": "message", "uuid": uuid, "role": "user", "content": f"step {i}: {words}"}
    elif step == 1:
        data = {
            "type": "message",
            "uuid": uuid,
            "role": "assistant",
            "content": f"Running it ({words}).",
            "toolCalls": [{"id": f"wc-{turn}", "name": "bash", "arguments": {"cmd": f"ls {i}"}}],
        }
    elif step == 2:
        body = ("line of output " * 70_000) if big == "tool" else f"output {words}\n" * 5
        data = {
            "type": "message",
            "uuid": uuid,
            "role": "tool",
            "toolCallId": f"wc-{turn}",
            "toolName": "bash",
            "content": body,
        }
    else:
        data = {"type": "message", "uuid": uuid, "role": "assistant", "content": f"Done: {words}"}
    return orjson.dumps(data) + b"\n"


def chunks(seed: int, i: int, line: bytes) -> list[bytes]:
    """How line ``i`` is written: whole, or in 2 to 4 pieces (every third line, and the large
    tool output)."""
    rng = random.Random(f"chunks-{seed}-{i}")
    if i % 3 != 1 and BIG_LINES.get(i) != "tool":
        return [line]
    cuts = sorted(rng.sample(range(1, len(line)), rng.randint(1, 3)))
    return [line[a:b] for a, b in zip([0, *cuts], [*cuts, len(line)], strict=True)]


def main(path: str, seed: int, stop_file: str) -> None:
    rng = random.Random(seed)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    i = 0
    try:
        while not os.path.exists(stop_file):
            pieces = chunks(seed, i, record(seed, i))
            for n, piece in enumerate(pieces):
                view = memoryview(piece)
                while view:
                    view = view[os.write(fd, view) :]
                if n < len(pieces) - 1:
                    time.sleep(rng.uniform(0.001, 0.004))
            i += 1
            time.sleep(rng.uniform(0.003, 0.012))
    finally:
        os.close(fd)
    print(i)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
