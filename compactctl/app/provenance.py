"""Whether a ``-o`` output is up to date: what each output records about where it came from.

A nightly ``compact -o out/ sessions/`` must write nothing the second night (issue 19), and
must not call a summarizer model again for a session that has not changed. Comparing the
bytes an output would get is not enough: the appended events carry the time of the run, so
two runs over the same input never produce the same bytes, and producing them costs the
whole plan (a model call with ``--model``).

So each output file written under ``-o DIR/`` gets a record, ``DIR/.compactctl/REL.json``
for the output ``DIR/REL`` (one hidden folder at the top of DIR; a ``.json`` file no folder
search takes as a transcript), recording:

- the input's path, size and SHA-256 of the bytes that were read to plan the output (the
  :class:`~compactctl.io.files.FileIdentity` of its :class:`~compactctl.session.Session`);
- a fingerprint of what else decides the output: the command, its options dataclass, the
  output options that shape the bytes (materialize, ``--as``, tier, format) and
  compactctl's version;
- the output's size and SHA-256 as written, and the job's result (the report returned
  again when it is up to date).

An output is up to date when all of these match now: the input hashes to the recorded
bytes, the options fingerprint is equal and the output still hashes to what was written.
Checking costs a read of the input and of the output (no parsing, no planning); any doubt
(no record, another version, an input edited since) is "not up to date", and the run then
plans and writes as usual.

An output that no longer holds the bytes its record says were written (an agent resumed it,
``undo`` appended to it, someone edited it) is someone's data now: it is never overwritten
(:func:`refuse_changed`, :class:`~compactctl.errors.OutputChanged`, exit 3 for that file).
Nor is a file at an output's path that has no record (the user's own file, another tool's,
or one whose record is gone or unreadable): compactctl did not write it
(:class:`~compactctl.errors.OutputNotOurs`, exit 3 for that file). A missing output is
written again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
from collections.abc import Iterator, Mapping
from typing import Any

import orjson

from compactctl.errors import OutputChanged, OutputNotOurs
from compactctl.io.files import HASH_BLOCK, STDIN, is_stream, write_output
from compactctl.io.remote import is_url

__all__ = [
    "RECORDS",
    "find_record",
    "fingerprint",
    "record",
    "recorded_result",
    "refuse_changed",
    "sidecar",
    "writing",
]


def sidecar(target: str, folder: str) -> str:
    """The record of the output ``target`` written under the ``-o`` folder ``folder``.

    >>> sidecar("out/a/s.jsonl", "out/")
    'out/.compactctl/a/s.jsonl.json'
    """
    rel = os.path.relpath(target, folder)
    return os.path.join(folder, RECORDS, rel + ".json")


RECORDS = ".compactctl"
"""The folder, at the top of an ``-o DIR/``, of the records of its outputs."""


def find_record(path: str) -> tuple[str, dict[str, Any]] | None:
    """The record of ``path`` when it is an output written under some ``-o DIR/``:
    ``(record path, record)``, the record (:func:`record`: ``source``, ``result``, ...) of
    the nearest folder above ``path`` whose ``.compactctl/`` holds one for it; ``None`` for
    ``-``, a stream or a URL, when no folder above holds one, or when it does not read as a
    JSON object. Costs a ``stat`` per folder above ``path``.

    >>> find_record("-") is None
    True
    """
    if path == STDIN or is_url(path) or is_stream(path):
        return None
    full = os.path.abspath(path)
    folder = os.path.dirname(full)
    while True:
        where = sidecar(full, folder)
        if os.path.isfile(where):
            try:
                with open(where, "rb") as fh:
                    rec = orjson.loads(fh.read())
            except (OSError, ValueError):
                return None
            return (where, rec) if isinstance(rec, dict) else None
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def fingerprint(command: str, options: Any, out: Any) -> str:
    """Hex SHA-256 of what decides an output besides its input: ``command``, the layer's
    ``options`` (frozen dataclasses, in the :func:`_stable` form), the fields of ``out``
    (:class:`~compactctl.app.jobs.OutputOptions`) that shape the bytes, and the version.
    The same options give the same fingerprint in every process (a set's ``repr`` does not:
    its order follows the per-process string hash seed).

    Every file of a run asks with equal options (a ``--jobs`` worker gets its own copy of
    them with each file), so the last answer is kept: a call whose arguments are equal
    (``==``) to the last call's returns it again: equal options decide equal outputs.
    Measured on a ``-o DIR/`` run over 1,000 small sessions whose outputs were all up to
    date (``--jobs 1``), computing it for every file took 0.04 s of the run's 0.37-0.44 s
    CPU with ``rules``, 0.08-0.13 s of 0.37-0.48 s with ``compact``; kept, 0.004 s."""
    from compactctl import __version__

    global _LAST
    shape = (out.materialize, out.as_format, out.tier, out.fmt)
    key = (__version__, command, options, shape)
    if _LAST is not None and _LAST[0] == key:
        return _LAST[1]
    fp = hashlib.sha256(repr(_stable(key)).encode()).hexdigest()
    _LAST = (key, fp)
    return fp


_LAST: tuple[Any, str] | None = None
"""The last :func:`fingerprint` call's ``(version, command, options, shape)`` and result."""


def _stable(value: Any) -> Any:
    """``value`` with its dataclasses as ``(name, ((field, value), ...))`` (without the
    fields whose metadata says ``"fingerprint": False``, such as ``RulesOptions.by_rule``:
    ``-q`` changes the report, not the output), its sets and dicts sorted, its lists as
    tuples: a form whose ``repr`` is the same in every process.

    >>> _stable(frozenset({"b", "a"})), _stable({"y": [1], "x": 2})
    (('a', 'b'), (('x', 2), ('y', (1,))))
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        # a field marked ``metadata={"fingerprint": False}`` shapes the report, not the output
        fields = [f for f in dataclasses.fields(value) if f.metadata.get("fingerprint", True)]
        return (
            type(value).__name__,
            tuple((f.name, _stable(getattr(value, f.name))) for f in fields),
        )
    if isinstance(value, (set, frozenset)):
        return tuple(sorted((_stable(v) for v in value), key=repr))
    if isinstance(value, dict):
        return tuple(sorted(((_stable(k), _stable(v)) for k, v in value.items()), key=repr))
    if isinstance(value, (list, tuple)):
        return tuple(_stable(v) for v in value)
    return value


def _digest(path: str) -> tuple[int, str] | None:
    """``(size, hex SHA-256)`` of the file ``path``, read in blocks; ``None`` if unreadable."""
    h = hashlib.sha256()
    size = 0
    try:
        with open(path, "rb") as fh:
            while block := fh.read(HASH_BLOCK):
                h.update(block)
                size += len(block)
    except OSError:
        return None
    return size, h.hexdigest()


def _applies(path: str, target: str | None) -> bool:
    return not (
        target is None or target == STDIN or is_url(target) or is_url(path) or is_stream(path)
    )


LOCK = ".lock"
"""The file in ``DIR/.compactctl/`` whose ``flock`` :func:`writing` holds."""


@contextlib.contextmanager
def writing(path: str, target: str | None, folder: str | None, timeout: float) -> Iterator[None]:
    """Hold the ``-o`` folder's write lock (an exclusive ``flock`` on
    ``folder/.compactctl/.lock``) around the last check of an output, its write and its
    record, so that two runs writing the same ``-o DIR/`` at once (two cron jobs, a retry
    beside a slow run) leave each output with the record of the run that wrote it. Without
    it, one run's record could land after the other's output (the trial: 2 of 10 pairs of
    runs), and every later run refused that output as changed since compactctl wrote it.
    Nothing is locked without a folder, or for stdout, URLs and streams.

    Raises:
        LockTimeout: another run held the lock for ``timeout`` seconds (exit 75, nothing
            written to ``target``).
    """
    if folder is None or not _applies(path, target):
        yield
        return
    from compactctl.io.locking import exclusive_lock

    where = os.path.join(folder, RECORDS, LOCK)
    os.makedirs(os.path.dirname(where), exist_ok=True)
    fd = os.open(where, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        with exclusive_lock(fd, str(target), timeout):
            yield
    finally:
        os.close(fd)


def _read_record(target: str, folder: str) -> Any:
    """The parsed record of the output ``target`` under ``folder``, or ``None`` when there
    is none or it is not JSON."""
    try:
        with open(sidecar(target, folder), "rb") as fh:
            return orjson.loads(fh.read())
    except (OSError, ValueError):
        return None


def recorded_result(path: str, target: str | None, folder: str, fp: str) -> dict[str, Any] | None:
    """The recorded result of ``path``'s output ``target`` (under the ``-o`` ``folder``) if
    that output is up to date (module docstring), with ``changed`` false, ``upToDate``
    true, ``written`` ``None``, ``appended`` 0 and ``output``; else ``None``."""
    if not _applies(path, target):
        return None
    assert target is not None
    rec = _read_record(target, folder)
    try:
        if rec is None or rec["fingerprint"] != fp or rec["source"] != os.path.abspath(path):
            return None
        if os.path.getsize(path) != rec["sourceSize"]:
            return None
        if _digest(path) != (rec["sourceSize"], rec["sourceSha256"]):
            return None
        if _digest(target) != (rec["outputSize"], rec["outputSha256"]):
            return None
        result = dict(rec["result"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    result.update(changed=False, upToDate=True, written=None, appended=0, output=target)
    return result


def refuse_changed(path: str, target: str | None, folder: str) -> None:
    """Refuse to overwrite ``path``'s output ``target`` (under the ``-o`` ``folder``) when
    it no longer holds the bytes its record says compactctl wrote (size and SHA-256), or
    when a file is there that has no record at all: compactctl did not write it.

    Nothing is refused for a missing output (written again), nor for stdout, URLs or
    streams. Costs a ``stat`` of the output, and a read of it when its size is the recorded
    one. A record compactctl could not write (it only warns of nothing then) makes its
    own output refused on the next run, as any file without one: safe, never data lost.

    Raises:
        OutputChanged: the output's size or SHA-256 differs from the record's, or it can
            no longer be read (exit 3; the message names the output and how to go on).
        OutputNotOurs: a file is at the output's path and no record (or no readable one)
            says compactctl wrote it (exit 3; the message names it and how to go on).
    """
    if not _applies(path, target):
        return
    assert target is not None
    rec = _read_record(target, folder)
    try:
        wrote: tuple[int, str] | None = (int(rec["outputSize"]), str(rec["outputSha256"]))
    except (ValueError, KeyError, TypeError):  # no record (TypeError: None), or not ours
        wrote = None
    try:
        size = os.path.getsize(target)
    except FileNotFoundError:
        return
    except OSError:
        size = -1
    if wrote is None:
        raise OutputNotOurs(
            f"its output {target} is a file compactctl did not write (there is no record "
            f"of it in {os.path.join(folder, RECORDS)}): it is not overwritten (nothing was "
            "written). Move it away to have compactctl write there, or write to another "
            "-o DIR/",
            path=path,
        )
    if size == wrote[0] and _digest(target) == wrote:
        return
    now = f"{size:,} bytes now" if size >= 0 else "it cannot be read now"
    raise OutputChanged(
        f"its output {target} changed since compactctl wrote it ({wrote[0]:,} bytes "
        f"written, {now}: an agent resumed it, undo appended to it, or it was edited); it "
        "is not overwritten (nothing was written). Move or remove it to write it again, or "
        "write to another -o DIR/",
        path=path,
    )


def record(
    path: str, target: str | None, folder: str, fp: str, source: Any, result: Mapping[str, Any]
) -> None:
    """Write the record of ``target`` (under the ``-o`` ``folder``) after it was written
    (or found holding the bytes):
    ``source`` is the :class:`~compactctl.io.files.FileIdentity` of the input bytes read
    (nothing is recorded without it, nor for stdout, URLs or streams). A record that cannot
    be written only means the next run plans again: it is not an error."""
    if not _applies(path, target) or source is None:
        return
    assert target is not None
    done = _digest(target)
    if done is None:
        return
    rec = {
        "source": os.path.abspath(path),
        "sourceSize": source.size,
        "sourceSha256": source.sha256,
        "fingerprint": fp,
        "outputSize": done[0],
        "outputSha256": done[1],
        "result": {k: v for k, v in result.items() if k != "upToDate"},
    }
    try:
        where = sidecar(target, folder)
        os.makedirs(os.path.dirname(where), exist_ok=True)
        write_output(where, [orjson.dumps(rec) + b"\n"])
    except Exception:  # noqa: BLE001 - a missing record costs a re-plan, never a wrong answer
        return
