"""Fork server for the crash trials (tests/test_crash.py): compactctl's startup paid once.

``python -m compactctl`` spends most of its wall time importing modules and loading tiktoken
encodings, so a SIGKILL at a random time would nearly always land before any byte is
written. This server imports compactctl and warms it up once (it runs each command on a
scratch copy), then, per request, forks a child that runs the command through the same
``compactctl.cli.main`` that ``python -m compactctl`` calls. The child is a real process
running unmodified code; the test kills it with SIGKILL whenever it likes. Nothing in
compactctl is hooked or patched.

Protocol, one JSON document per line:

- the test sends ``{"argv": [...], "stdout": path, "stderr": path}``; the server forks
  and answers ``{"pid": N}``;
- the test sends ``"reap"`` once it has killed the child (or chosen not to); the server
  waits for the child and answers ``{"status": S}`` (``os.waitpid`` status). The child is
  never reaped before ``reap``, so its pid cannot be reused while the test may kill it.

Warm-up requests: ``{"warm": [[argv], ...]}`` run in the server process itself (output
discarded) and answer ``{"warmed": n}``.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def _run(argv: list[str]) -> int:
    from compactctl import cli

    sys.argv = ["compactctl", *argv]
    try:
        cli.main()
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    return 0


def _child(request: dict[str, Any], proto: int) -> None:
    os.close(proto)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    for fd, key in ((1, "stdout"), (2, "stderr")):
        out = os.open(request[key], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(out, fd)
        os.close(out)
    code = 1
    try:
        code = _run(request["argv"])
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main() -> None:
    # the protocol gets its own descriptor; fd 1 goes to /dev/null for the warm-up runs
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)
    import compactctl.cli  # noqa: F401

    for line in sys.stdin:
        request = json.loads(line)
        if "warm" in request:
            for argv in request["warm"]:
                _run(argv)
            sys.stdout.flush()
            sys.stderr.flush()
            proto.write(json.dumps({"warmed": len(request["warm"])}) + "\n")
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(request, proto.fileno())
        proto.write(json.dumps({"pid": pid}) + "\n")
        if json.loads(sys.stdin.readline()) != "reap":
            raise SystemExit("protocol error: expected reap")
        _, status = os.waitpid(pid, 0)
        proto.write(json.dumps({"status": status}) + "\n")


if __name__ == "__main__":
    main()
