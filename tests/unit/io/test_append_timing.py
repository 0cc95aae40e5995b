"""When ``append_events`` writes next to a live writer (issue 14, point 1).

- a file that ends a line but changed in the last ``ACTIVE_S``: the append waits for the
  writer's next line to end and follows it; an idle file (or one dated in the future) is
  appended to at once;
- an agent line begun between the last check and the write is reported (``WriteError``, exit
  3), never a success;
- our own record, whole but for its newline (a run killed at the end of its write), is ended
  at once, however young the file.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from compactctl.errors import WriteError
from compactctl.io import files as files_mod
from compactctl.io.files import ACTIVE_S, append_events
from compactctl.model import event_from_dict

BASE = b'{"type":"message","uuid":"m1","role":"user","content":"hi"}\n'
LINE = b'{"type":"message","uuid":"m2","role":"assistant","content":"ok"}\n'
OURS = b'{"type":"compact","uuid":"c1","mode":"micro","note":"x"}\n'


def _ev(uuid: str = "c1"):  # type: ignore[no-untyped-def]
    return event_from_dict({"type": "compact", "uuid": uuid, "mode": "micro", "note": "x"})


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_a_file_written_just_now_is_appended_to_right_after_its_next_line(tmp_path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(BASE)

    def agent() -> None:
        time.sleep(0.1)
        with open(path, "ab") as fh:
            fh.write(LINE[:20])
            fh.flush()
            time.sleep(0.05)
            fh.write(LINE[20:])

    t = threading.Thread(target=agent)
    t.start()
    done = append_events(str(path), [_ev()], torn_wait=300.0)
    t.join()
    assert done.written == 1 and not done.torn_line
    assert path.read_bytes() == BASE + LINE + OURS


def test_an_idle_file_is_appended_to_at_once(tmp_path) -> None:
    for age in (2 * ACTIVE_S, -3600.0):  # quiet, or dated in the future
        path = tmp_path / f"s{age}.jsonl"
        path.write_bytes(BASE)
        _age(path, age)
        started = time.monotonic()
        append_events(str(path), [_ev()], torn_wait=300.0)
        assert time.monotonic() - started < ACTIVE_S
        assert path.read_bytes() == BASE + OURS


def test_a_young_file_with_no_writer_waits_at_most_active_s(tmp_path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(BASE)
    started = time.monotonic()
    append_events(str(path), [_ev()], torn_wait=300.0)
    assert time.monotonic() - started < ACTIVE_S + 5  # then it counts as idle
    assert path.read_bytes() == BASE + OURS


def test_a_line_begun_between_the_check_and_the_write_is_reported(tmp_path, monkeypatch):
    path = tmp_path / "s.jsonl"
    path.write_bytes(BASE)
    _age(path, 10)
    original = files_mod._write_whole

    def agent_first(fd: int, p: str, payload: bytes) -> int:
        with open(p, "ab") as fh:  # the agent's first piece lands just before our write
            fh.write(LINE[:20])
        return original(fd, p, payload)

    monkeypatch.setattr(files_mod, "_write_whole", agent_first)
    with pytest.raises(WriteError, match="another process began a line in the moment between"):
        append_events(str(path), [_ev()], torn_wait=300.0)
    assert path.read_bytes() == BASE + LINE[:20] + OURS


def test_whole_lines_written_between_the_check_and_the_write_are_fine(tmp_path, monkeypatch):
    path = tmp_path / "s.jsonl"
    path.write_bytes(BASE)
    _age(path, 10)
    original = files_mod._write_whole

    def agent_first(fd: int, p: str, payload: bytes) -> int:
        with open(p, "ab") as fh:
            fh.write(LINE)
        return original(fd, p, payload)

    monkeypatch.setattr(files_mod, "_write_whole", agent_first)
    done = append_events(str(path), [_ev()], torn_wait=300.0)
    assert done.written == 1
    assert path.read_bytes() == BASE + LINE + OURS


def test_our_own_record_without_its_newline_is_ended_at_once(tmp_path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(BASE + OURS[:-1])  # killed just before the newline, a moment ago
    started = time.monotonic()
    done = append_events(str(path), [_ev()], torn_wait=300.0, lock_timeout=5.0)
    assert time.monotonic() - started < 2
    assert (done.written, done.skipped) == (0, 1)
    assert path.read_bytes() == BASE + OURS


def test_our_own_record_cut_short_after_its_uuid_is_torn_at_once(tmp_path) -> None:
    """A run killed during its write left part of our record: its uuid (derived from the
    planned content) shows it is ours, so no agent is writing it."""
    path = tmp_path / "s.jsonl"
    cut = OURS.index(b'"mode"')
    path.write_bytes(BASE + OURS[:cut])
    done = append_events(str(path), [_ev()], torn_wait=300.0, lock_timeout=5.0)
    assert done.torn_line and done.written == 1
    assert path.read_bytes() == BASE + OURS[:cut] + b"\n" + OURS


def test_a_cut_before_our_uuid_is_waited_for_like_any_line(tmp_path) -> None:
    from compactctl.errors import LockTimeout

    path = tmp_path / "s.jsonl"
    path.write_bytes(BASE + OURS[:12])  # '{"type":"com': an agent's line could begin so
    with pytest.raises(LockTimeout):
        append_events(str(path), [_ev()], torn_wait=300.0, lock_timeout=0.3)
    assert path.read_bytes() == BASE + OURS[:12]
