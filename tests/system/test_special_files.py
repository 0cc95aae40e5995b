"""Special files given as PATH (issue 14, point 4): a FIFO, ``/dev/stdin``, ``/dev/fd/N`` or
any file that is not a regular file is read once as a stream, with stdin's semantics: the
result goes to stdout, nothing is appended anywhere, no hang.

``rules /dev/stdin < f.jsonl`` used to append into f.jsonl (``/dev/stdin`` reopens the file the
shell redirected); a FIFO hung or failed with "unexpected UnsupportedOperation".
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import orjson
import pytest

from compactctl.errors import UsageError
from compactctl.io.files import append_events, is_stream
from compactctl.model import event_from_dict
from tests.helpers import SAMPLES

SAMPLE = (SAMPLES / "small-s1.canonical.jsonl").read_bytes()

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="FIFOs and /dev/stdin")


def _run(
    args: list[str], stdin: object = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "compactctl", *args],
        stdin=stdin,  # type: ignore[arg-type]
        capture_output=True,
        timeout=120,
    )


def _feed(fifo: Path, data: bytes) -> threading.Thread:
    def write() -> None:
        with open(fifo, "wb") as fh:  # blocks until compactctl opens the FIFO to read
            fh.write(data)

    t = threading.Thread(target=write, daemon=True)
    t.start()
    return t


def _records(out: bytes) -> list[dict[str, object]]:
    return [orjson.loads(x) for x in out.splitlines()]


@pytest.mark.parametrize("command", [["rules"], ["compact", "--force"], ["dedup"]])
def test_a_fifo_is_read_once_and_written_to_stdout(tmp_path: Path, command: list[str]) -> None:
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    feeder = _feed(fifo, SAMPLE)
    r = _run([*command, "--no-store", str(fifo)])
    feeder.join(5)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(SAMPLE)  # stdin's semantics: the input, then the new events
    new = _records(r.stdout[len(SAMPLE) :])
    assert new and {x["type"] for x in new} <= {"compact", "summary"}
    assert b"source unchanged; written to stdout" in r.stderr


def test_inspect_reads_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    feeder = _feed(fifo, SAMPLE)
    r = _run(["inspect", "--json", "--estimate", str(fifo)])
    feeder.join(5)
    assert r.returncode == 0, r.stderr
    (f,) = orjson.loads(r.stdout)["files"]
    assert f["messages"] == 67 and f["path"] == str(fifo)


@pytest.mark.parametrize("path", ["/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"])
def test_dev_stdin_redirected_from_a_file_never_appends_to_it(tmp_path: Path, path: str) -> None:
    f = tmp_path / "f.jsonl"
    f.write_bytes(SAMPLE)
    with open(f, "rb") as fh:
        r = _run(["rules", "--no-store", path], stdin=fh)
    assert r.returncode == 0, r.stderr
    assert f.read_bytes() == SAMPLE  # not appended to
    assert r.stdout.startswith(SAMPLE)
    assert [x["type"] for x in _records(r.stdout[len(SAMPLE) :])] == ["compact"]


def test_dev_stdin_from_a_pipe(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "compactctl", "rules", "--no-store", "/dev/stdin"],
        input=SAMPLE,
        capture_output=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(SAMPLE)


def test_json_report_goes_to_stderr_when_a_stream_writes_stdout(tmp_path: Path) -> None:
    f = tmp_path / "f.jsonl"
    f.write_bytes(SAMPLE)
    with open(f, "rb") as fh:
        r = _run(["rules", "--no-store", "--json", "/dev/stdin"], stdin=fh)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(SAMPLE)
    assert orjson.loads(r.stderr)["files"][0]["written"] == "-"


def test_is_stream() -> None:
    assert is_stream("-") and is_stream("/dev/stdin") and is_stream("/dev/null")
    assert is_stream("/proc/self/status")
    assert not is_stream(str(SAMPLES / "small-s1.canonical.jsonl"))
    assert not is_stream(str(SAMPLES))  # a folder is searched, not streamed
    assert not is_stream("/no/such/file")


def test_append_events_refuses_a_stream(tmp_path: Path) -> None:
    fifo = tmp_path / "p"
    os.mkfifo(fifo)
    event = event_from_dict({"type": "compact", "uuid": "c1", "mode": "micro"})
    with pytest.raises(UsageError, match="is not a regular file"):
        append_events(str(fifo), [event])
