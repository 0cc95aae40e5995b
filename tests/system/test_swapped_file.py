"""A transcript swapped between the read and the append (issue 14, point 2).

Under the lock and before writing, the append checks that the file is the one read: the same
device and inode, still named by its path, at least as long, its bytes read unchanged
(SHA-256). Otherwise the job reads and plans once more on the new content, or exits 75; a file
deleted since the read is exit 3; events never go to a file the path no longer names while the
run reports success.

Driven deterministically by changing the file inside ``Session.append`` (between the plan and
the append), and once by a real process race: the file is rotated by another process while
``compactctl rules`` plans (seen from outside: the transcript's descriptor closed after the
read, /proc/PID/fd).
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from compactctl.app.jobs import OutputOptions, rules_path
from compactctl.errors import FileChanged, WriteError
from compactctl.io import files as files_mod
from compactctl.io.files import FileIdentity, _prefix_sha256, append_events
from compactctl.layers.options import RulesOptions
from compactctl.model import Event, event_from_dict
from compactctl.session import Session
from tests.helpers import SAMPLES, run_cli

FIRST = (SAMPLES / "small-s1.canonical.jsonl").read_bytes()
OTHER = (SAMPLES / "cjk-s3.canonical.jsonl").read_bytes()
OUT = OutputOptions(db="", lock_timeout=10.0, torn_wait=300.0)


def _uuids(data: bytes) -> set[str]:
    """The uuids of the lines that parse."""
    out = set()
    for x in data.split(b"\n"):
        with contextlib.suppress(orjson.JSONDecodeError, AttributeError):
            out.add(orjson.loads(x).get("uuid"))
    return out


def _appended(data: bytes, base: bytes) -> list[dict[str, object]]:
    assert data.startswith(base)
    return [orjson.loads(x) for x in data[len(base) :].split(b"\n") if x]


def _change_before_append(
    monkeypatch: pytest.MonkeyPatch, change: Callable[[Path], None], times: int = 1
) -> list[int]:
    """Run ``change(path)`` inside the first ``times`` calls of ``Session.append``."""
    original = Session.append
    calls: list[int] = []

    def append(self: Session, events, **kw):  # type: ignore[no-untyped-def]
        calls.append(1)
        if len(calls) <= times:
            change(Path(self.path))
        return original(self, events, **kw)

    monkeypatch.setattr(Session, "append", append)
    return calls


def _rotate(path: Path) -> None:
    """logrotate's way: the file is renamed, a new one takes its name."""
    os.rename(path, path.with_suffix(".jsonl.1"))
    path.write_bytes(OTHER)


def _rewrite(path: Path) -> None:
    """Rewritten in place: same inode, other content."""
    with open(path, "r+b") as fh:
        fh.truncate(0)
        fh.write(OTHER)


def _flip_a_byte(path: Path) -> None:
    """Same inode, same size, one byte of the content changed."""
    data = bytearray(path.read_bytes())
    i = data.index(b'"content":"') + len(b'"content":"')
    data[i] ^= 0x20  # a letter's case
    with open(path, "r+b") as fh:
        fh.write(data)


def test_a_rotated_file_is_planned_again_on_its_new_content(tmp_path, monkeypatch) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(FIRST)
    calls = _change_before_append(monkeypatch, _rotate)
    result = rules_path(str(path), RulesOptions(), OUT)
    assert len(calls) == 2  # planned and appended again
    assert (tmp_path / "s.jsonl.1").read_bytes() == FIRST  # the old file: nothing appended
    (event,) = _appended(path.read_bytes(), OTHER)
    assert event["type"] == "compact"
    assert set(event["targets"]) <= _uuids(OTHER)  # planned on the new content
    assert not set(event["targets"]) & _uuids(FIRST)
    assert result["appended"] == 1 and result["written"] == str(path)


@pytest.mark.parametrize("change", [_rewrite, _flip_a_byte], ids=["rewritten", "byte-flipped"])
def test_a_file_rewritten_in_place_is_planned_again(tmp_path, monkeypatch, change) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(FIRST)
    inode = path.stat().st_ino
    _change_before_append(monkeypatch, change)
    result = rules_path(str(path), RulesOptions(), OUT)
    assert path.stat().st_ino == inode
    changed = OTHER if change is _rewrite else path.read_bytes()[: len(FIRST)]
    assert changed != FIRST
    (event,) = _appended(path.read_bytes(), changed)
    assert set(event["targets"]) <= _uuids(changed)
    assert result["appended"] == 1


def test_a_file_that_changes_again_while_replanned_is_exit_75(tmp_path, monkeypatch) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(FIRST)
    _change_before_append(monkeypatch, _rotate, times=2)
    with pytest.raises(FileChanged) as info:
        rules_path(str(path), RulesOptions(), OUT)
    assert info.value.exit_code == 75
    assert "was replaced after it was read" in str(info.value)
    assert "it had changed before as well" in str(info.value)
    assert path.read_bytes() == OTHER  # nothing written by either attempt
    assert (tmp_path / "s.jsonl.1").read_bytes() == OTHER


def test_a_deleted_file_is_never_reported_appended(tmp_path, monkeypatch) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(FIRST)
    _change_before_append(monkeypatch, os.unlink)
    with pytest.raises(WriteError) as info:
        rules_path(str(path), RulesOptions(), OUT)
    assert info.value.exit_code == 3
    assert "was deleted or moved after it was read; nothing was written" in str(info.value)
    assert not path.exists()


def test_a_truncated_file_is_planned_again(tmp_path, monkeypatch) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(FIRST)
    half = FIRST[: FIRST.index(b"\n", len(FIRST) // 2) + 1]
    _change_before_append(monkeypatch, lambda p: os.truncate(p, len(half)))
    rules_path(str(path), RulesOptions(), OUT)
    (event,) = _appended(path.read_bytes(), half)
    assert set(event["targets"]) <= _uuids(half)


def _ev(uuid: str) -> Event:
    return event_from_dict({"type": "compact", "uuid": uuid, "mode": "micro"})


def _identity(path: Path) -> FileIdentity:
    st = path.stat()
    data = path.read_bytes()
    return FileIdentity(st.st_dev, st.st_ino, len(data), _prefix_sha256_of(data), False)


def _prefix_sha256_of(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda p: os.rename(p, p.with_name("moved.jsonl")), "was moved (no file has that"),
        (_rotate, "was replaced (moved, and another file has that name now: rotated?) after"),
        (lambda p: os.truncate(p, 10), "was truncated after it was read (10 bytes"),
        (_flip_a_byte, "was rewritten after it was read (its first bytes changed)"),
    ],
    ids=["moved", "rotated", "truncated", "byte-flipped"],
)
def test_the_identity_is_checked_under_the_lock(tmp_path, monkeypatch, change, message) -> None:
    """The change lands after append_events opened the file (inside the lock)."""
    path = tmp_path / "s.jsonl"
    path.write_bytes(FIRST)
    identity = _identity(path)
    original = files_mod._check_identity

    def late(fd: int, p: str, ident: FileIdentity) -> None:
        change(Path(p))
        original(fd, p, ident)

    monkeypatch.setattr(files_mod, "_check_identity", late)
    with pytest.raises(FileChanged, match=re.escape(message)) as info:
        append_events(str(path), [_ev("c1")], identity=identity)
    assert info.value.replan and info.value.exit_code == 75
    for f in tmp_path.iterdir():
        assert b'"uuid":"c1"' not in f.read_bytes()


@pytest.mark.parametrize("how", ["moved", "deleted"])
def test_a_file_moved_or_deleted_during_the_append_is_no_success(tmp_path, monkeypatch, how):
    path = tmp_path / "s.jsonl"
    path.write_bytes(FIRST)
    identity = _identity(path)
    original = files_mod._write_whole

    def write_then_swap(fd: int, p: str, payload: bytes) -> int:
        start = original(fd, p, payload)
        if how == "moved":
            os.rename(p, tmp_path / "rotated.jsonl")
            Path(p).write_bytes(OTHER)
        else:
            os.unlink(p)
        return start

    monkeypatch.setattr(files_mod, "_write_whole", write_then_swap)
    error = FileChanged if how == "moved" else WriteError
    with pytest.raises(error, match=f"was {'replaced' if how == 'moved' else how} ") as info:
        append_events(str(path), [_ev("c1")], identity=identity)
    if how == "moved":
        assert not getattr(info.value, "replan", True)  # written already: no second plan
        assert (tmp_path / "rotated.jsonl").read_bytes().startswith(FIRST + b'{"type":"compact"')
        assert path.read_bytes() == OTHER


def test_an_unchanged_file_that_grew_is_appended_to(tmp_path) -> None:
    """An agent appending after the read is no change: the bytes read are still a prefix."""
    path = tmp_path / "s.jsonl"
    path.write_bytes(FIRST)
    identity = _identity(path)
    more = b'{"type":"message","uuid":"late","role":"user","content":"more"}\n'
    with open(path, "ab") as fh:
        fh.write(more)
    done = append_events(str(path), [_ev("c1")], identity=identity)
    assert done.written == 1
    assert path.read_bytes() == FIRST + more + b'{"type":"compact","uuid":"c1","mode":"micro"}\n'


def test_prefix_hash_is_read_in_blocks(tmp_path) -> None:
    path = tmp_path / "blocks.bin"
    data = os.urandom(3 * files_mod.HASH_BLOCK + 123)
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        for size in (0, 1, files_mod.HASH_BLOCK, len(data)):
            assert _prefix_sha256(fd, size) == _prefix_sha256_of(data[:size])
    finally:
        os.close(fd)


# --- a real race: rotated by another process while compactctl plans ---------------------


def _big_transcript(path: Path, copies: int) -> bytes:
    """The sample with its uuids renamed ``copies`` times: a session that takes a while to
    plan (rules count every message)."""
    lines = FIRST.split(b"\n")[:-1]
    out = [lines[0]]
    for k in range(copies):
        for x in lines[1:]:
            rec = orjson.loads(x)
            rec["uuid"] = f"{rec.get('uuid')}-{k}"
            out.append(orjson.dumps(rec))
    data = b"\n".join(out) + b"\n"
    path.write_bytes(data)
    return data


def _closed_after_read(pid: int, path: Path, timeout: float = 60) -> None:
    """Wait until process ``pid`` opened ``path`` and closed it again (the read is over)."""
    seen = False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except FileNotFoundError:
            return
        open_now = False
        for fd in fds:
            with contextlib.suppress(OSError):
                open_now |= os.readlink(f"/proc/{pid}/fd/{fd}") == str(path)
        if open_now:
            seen = True
        elif seen:
            return
        time.sleep(0.001)
    raise AssertionError("compactctl never read the file")


@pytest.mark.skipif(sys.platform != "linux", reason="uses /proc")
def test_a_real_rotation_while_compactctl_plans(tmp_path: Path) -> None:
    path = tmp_path / "live.jsonl"
    old = _big_transcript(path, 60)
    proc = subprocess.Popen(
        [sys.executable, "-m", "compactctl", "rules", "--no-store", "--jobs", "1", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    _closed_after_read(proc.pid, path)
    alive = proc.poll() is None
    _rotate(path)  # another process (this one) rotates it while compactctl plans
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    rotated = tmp_path / "live.jsonl.1"
    if alive and rotated.read_bytes() == old:
        # the append saw the new file: planned on it, the old one untouched
        (event,) = _appended(path.read_bytes(), OTHER)
        assert set(event["targets"]) <= _uuids(OTHER)
    else:  # pragma: no cover - compactctl was done before the rotation (a very fast machine)
        assert path.read_bytes() == OTHER
    report = err.decode()
    assert f"{path}: rules applied to " in report


@pytest.mark.skipif(sys.platform != "linux", reason="uses /proc")
def test_a_real_deletion_while_compactctl_plans(tmp_path: Path) -> None:
    path = tmp_path / "live.jsonl"
    _big_transcript(path, 60)
    proc = subprocess.Popen(
        [sys.executable, "-m", "compactctl", "rules", "--no-store", "--jobs", "1", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    _closed_after_read(proc.pid, path)
    os.unlink(path)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 3, err
    assert b"was deleted or moved after it was read; nothing was written" in err
    assert b"rules applied" not in err  # no success reported
    assert not path.exists()


def test_the_cli_reports_a_second_change_with_exit_75(tmp_path: Path) -> None:
    """Through the CLI process: a file whose bytes change under every read (a writer that
    rewrites it in place all the time, other bytes each time) gets exit 75 and nothing is
    appended."""
    path = tmp_path / "s.jsonl"
    path.write_bytes(FIRST)
    code = (
        "import sys, time\n"
        "p = sys.argv[1]; data = open(p, 'rb').read(); i = 0\n"
        "end = time.monotonic() + 120\n"
        "while time.monotonic() < end:\n"
        "    i += 1\n"
        "    with open(p, 'r+b') as fh:\n"
        "        fh.write(data.replace(b'uuid', b'%04x' % (i % 65536), 1))\n"
        "    time.sleep(0.0005)\n"
    )
    rewriter = subprocess.Popen([sys.executable, "-c", code, str(path)])
    try:
        time.sleep(0.3)
        # the file never holds still (its size stays, its mtime is always young), so each
        # attempt waits for a quiet moment until --lock-timeout, then checks the bytes it
        # read: 2 s instead of the default 10 s reaches that same check 8 s sooner
        r = run_cli("rules", "--no-store", "--estimate", "--lock-timeout", "2", str(path))
    finally:
        rewriter.kill()
        rewriter.wait()
    # every rewrite holds other bytes (a key renamed to a counter, the size unchanged), so
    # the two reads never agree
    assert r.returncode == 75, r.stderr
    assert b"changed before as well" in r.stderr
    assert len(path.read_bytes()) == len(FIRST)  # nothing appended
