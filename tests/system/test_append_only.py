"""Append-only transcripts (``chattr +a``; issue 14, point 5).

compactctl only appends, so an append-only file must work. It failed with "unexpected
PermissionError": the append handle was mapped shared to search it, which the kernel refuses
for an append-only file opened for writing. The transcript is now read through a read-only
handle (``Session.open``), appended through ``O_APPEND``, and the append handle is only mapped
private and read-only.

The real attribute needs ``CAP_LINUX_IMMUTABLE`` and a file system that has it (ext4, xfs,
btrfs): probed once; where it is impossible the chattr test is skipped *with the reason*, and
the same code path is always tested by a stand-in that refuses what the kernel refuses for an
append-only file (a shared mapping of a handle open for writing, truncation, a write without
``O_APPEND``).
"""

from __future__ import annotations

import mmap
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from compactctl.errors import WriteError
from compactctl.io import files as files_mod
from compactctl.io.files import append_events
from compactctl.model import event_from_dict
from tests.helpers import SAMPLES, run_cli

SAMPLE = (SAMPLES / "small-s1.canonical.jsonl").read_bytes()


def _chattr(path: Path, flag: str) -> bool:
    exe = shutil.which("chattr")
    if exe is None:
        return False
    return subprocess.run([exe, flag, str(path)], capture_output=True).returncode == 0


@pytest.fixture(scope="module")
def chattr_works(tmp_path_factory: pytest.TempPathFactory) -> str | None:
    """``None`` when ``chattr +a`` works here, else why not (probed once)."""
    probe = tmp_path_factory.mktemp("probe") / "p"
    probe.write_bytes(b"x\n")
    if not _chattr(probe, "+a"):
        return "chattr +a is not possible here (no chattr, no CAP_LINUX_IMMUTABLE, or a file system without the attribute)"  # noqa: E501
    try:
        with pytest.raises(PermissionError):
            os.open(probe, os.O_WRONLY)  # the attribute is in force
    finally:
        _chattr(probe, "-a")
    return None


@pytest.fixture
def append_only(tmp_path: Path, chattr_works: str | None):
    """A copy of the sample, made append-only; the attribute is removed afterwards."""
    if chattr_works is not None:
        pytest.skip(chattr_works)
    path = tmp_path / "ao.jsonl"
    path.write_bytes(SAMPLE)
    assert _chattr(path, "+a")
    yield path
    _chattr(path, "-a")


@pytest.mark.parametrize("command", [["rules"], ["dedup"], ["compact", "--force"]])
def test_commands_append_to_a_chattr_a_file(append_only: Path, command: list[str]) -> None:
    r = run_cli(*command, "--no-store", str(append_only))
    assert r.returncode == 0, r.stderr
    data = append_only.read_bytes()
    assert data.startswith(SAMPLE) and len(data) > len(SAMPLE)
    lsattr = subprocess.run(["lsattr", str(append_only)], capture_output=True, text=True)
    assert "a" in lsattr.stdout.split()[0]  # still append-only
    r = run_cli(*command, "--no-store", str(append_only))  # idempotent: nothing more
    assert r.returncode == 0, r.stderr
    assert append_only.read_bytes() == data


def test_a_chattr_a_file_that_cannot_take_a_whole_write(append_only: Path, monkeypatch) -> None:
    """A failed write cannot be cut back on an append-only file: the error says so."""
    _short_write(monkeypatch)
    with pytest.raises(WriteError, match="the file is append-only, so they were not cut"):
        append_events(str(append_only), [_ev("c1")])


# --- the stand-in: what the kernel refuses for an append-only file ------------------------------


def _ev(uuid: str):  # type: ignore[no-untyped-def]
    return event_from_dict({"type": "compact", "uuid": uuid, "mode": "micro", "note": "x"})


def _short_write(monkeypatch: pytest.MonkeyPatch) -> None:
    real_write = os.write

    def short(fd: int, data: bytes) -> int:
        return real_write(fd, bytes(data)[:10])

    monkeypatch.setattr(files_mod.os, "write", short)


class _AppendOnlyKernel:
    """Refuses, for one file, what Linux refuses for an append-only inode: opening it for
    writing without ``O_APPEND``, truncating it, and mapping it shared through a handle open
    for writing (mm/mmap.c: ``IS_APPEND(inode) && (file->f_mode & FMODE_WRITE)``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
        self.ino = path.stat().st_ino
        self.mapped: list[tuple[int, int]] = []
        real_open, real_mmap, real_ftruncate = os.open, mmap.mmap, os.ftruncate

        def ours(fd: int) -> bool:
            return os.fstat(fd).st_ino == self.ino

        def open_(p, flags, *args, **kw):  # type: ignore[no-untyped-def]
            fd = real_open(p, flags, *args, **kw)
            if ours(fd) and flags & (os.O_WRONLY | os.O_RDWR) and not flags & os.O_APPEND:
                os.close(fd)
                raise PermissionError(1, "Operation not permitted", str(p))
            return fd

        def mmap_(fd, length, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE,
                  **kw):  # type: ignore[no-untyped-def]  # fmt: skip
            if ours(fd):
                self.mapped.append((flags, prot))
                if flags & mmap.MAP_SHARED and _opened_for_writing(fd):
                    raise PermissionError(13, "Permission denied")
            return real_mmap(fd, length, flags=flags, prot=prot, **kw)

        def ftruncate(fd: int, length: int) -> None:
            if ours(fd):
                raise PermissionError(1, "Operation not permitted")
            real_ftruncate(fd, length)

        monkeypatch.setattr(files_mod.os, "open", open_)
        monkeypatch.setattr(files_mod.os, "ftruncate", ftruncate)
        monkeypatch.setattr(files_mod.mmap, "mmap", mmap_)


def _opened_for_writing(fd: int) -> bool:
    import fcntl

    return fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE != os.O_RDONLY


def test_append_path_under_append_only_rules(tmp_path: Path, monkeypatch) -> None:
    """Always run: the append works when the kernel refuses what it refuses for ``+a``."""
    path = tmp_path / "ao.jsonl"
    path.write_bytes(SAMPLE)
    kernel = _AppendOnlyKernel(monkeypatch, path)
    done = append_events(str(path), [_ev("c1"), _ev("c2")])
    assert done.written == 2
    assert path.read_bytes().startswith(SAMPLE)
    assert kernel.mapped == [(mmap.MAP_PRIVATE, mmap.PROT_READ)]  # never shared, never writable
    again = append_events(str(path), [_ev("c1"), _ev("c2")])
    assert again.written == 0 and again.skipped == 2


def test_the_stand_in_refuses_a_shared_mapping(tmp_path: Path, monkeypatch) -> None:
    """The stand-in is strict enough: the old way (a shared mapping of the append handle)
    fails under it as it failed under the kernel."""
    path = tmp_path / "ao.jsonl"
    path.write_bytes(SAMPLE)
    _AppendOnlyKernel(monkeypatch, path)
    fd = os.open(path, os.O_RDWR | os.O_APPEND)
    try:
        with pytest.raises(PermissionError):
            mmap.mmap(fd, len(SAMPLE), access=mmap.ACCESS_READ)
        with pytest.raises(PermissionError):
            os.ftruncate(fd, 1)
    finally:
        os.close(fd)
    with pytest.raises(PermissionError):
        os.open(path, os.O_WRONLY)


def test_a_write_that_fails_on_an_append_only_file(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "ao.jsonl"
    path.write_bytes(SAMPLE)
    _AppendOnlyKernel(monkeypatch, path)
    _short_write(monkeypatch)
    with pytest.raises(WriteError, match="the file is append-only, so they were not cut"):
        append_events(str(path), [_ev("c1")])
