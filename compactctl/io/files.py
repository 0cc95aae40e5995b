"""Discovery, reading, and the one safe append path (docs/design.md section 6).

Every byte compactctl writes into an existing transcript goes through :func:`append_events`:
under an exclusive ``flock``, after checking that the file is still the one read, one
``os.write`` of whole records (never into a line still being written), then ``fsync``. The
old file is always a byte prefix of the new one. Outputs that are not the input transcript
(``-o``, ``--materialize``) go through :func:`write_output`, which writes a temporary file and
renames it, so a reader never sees half a file. A path that is not a regular file (a FIFO,
``/dev/stdin``) is a stream, read once like ``-`` and never appended to (:func:`is_stream`).
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import itertools
import mmap
import os
import signal
import stat
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, NamedTuple

import orjson

from compactctl.errors import FileChanged, InputError, LockTimeout, UsageError, WriteError
from compactctl.io.jsonl import parse_line, read_stream
from compactctl.io.locking import DEFAULT_LOCK_TIMEOUT, exclusive_lock
from compactctl.io.remote import is_url
from compactctl.model import Event

if TYPE_CHECKING:
    from compactctl.io.filters import FileFilter

__all__ = [
    "AppendResult",
    "FileIdentity",
    "Found",
    "IdentityReader",
    "READ_ERRORS",
    "STDIN",
    "TORN_WAIT",
    "Walk",
    "append_events",
    "discover",
    "gzip_lines",
    "gzipped",
    "is_stream",
    "open_input",
    "read",
    "read_error",
    "same_file",
    "walk",
    "write_output",
    "write_unless_same",
]

STDIN = "-"
GZIP_MAGIC = b"\x1f\x8b"
TRANSCRIPT_SUFFIXES = (".jsonl", ".jsonl.gz")
TORN_WAIT = 300.0
"""Seconds (5 minutes) a last line without ``\\n`` must stay unchanged (file mtime) before
it is taken as torn by a crashed writer (``--torn-wait``, ``COMPACTCTL_TORN_WAIT``,
``torn_wait``; ``0``: at once). A younger line may be an agent's line still being written:
it is waited for up to the lock timeout, then the run gives up writing nothing (exit 75), so
an agent that pauses mid-line for less than this never gets our records inside its line. An
old torn line costs no wait at all. It was 2 s, which an agent thinking mid-line exceeded
(issue 14: 18 of 336 lines split in a 2-minute trial)."""

READ_ERRORS = (OSError, EOFError, zlib.error)
"""What reading a transcript stream may raise: I/O errors, a gzip stream cut short
(``EOFError``) or corrupt (``gzip.BadGzipFile`` is an ``OSError``; bad deflate data is a
``zlib.error``). Readers turn them into an :class:`InputError` with :func:`read_error`."""

ACTIVE_S = 0.25
"""Seconds since its last change under which a file ending with ``\\n`` counts as being
written: the append then waits for the next line to end (looking every :data:`POLL_S`) and
writes right after it, when a new line is least likely to begin."""

POLL_S = 0.001
"""Seconds between two looks at a file being written (a ``fstat`` and a 1-byte ``pread``)."""

HASH_BLOCK = 1 << 20
"""Bytes hashed at a time when the bytes read are checked again before an append (1 MiB)."""

_FD_PATHS = ("/dev/stdin", "/dev/fd/", "/proc/")
"""Path prefixes that name an open descriptor (or a kernel file) rather than a transcript."""


class NoTranscripts(InputError):
    """A folder argument holds no transcripts: a warning, not a failure (a cron job over a
    folder that is empty tonight has nothing to do; exit code 0)."""

    exit_code = 0


DOCUMENT_SUFFIXES = (".json", ".traj", ".md")
"""Whole-document transcripts a folder run finds when asked (``discover(documents=True)``):
JSON documents and Aider's markdown history (``.aider.chat.history.md``)."""


def same_file(a: str, b: str) -> bool:
    """Whether paths ``a`` and ``b`` name one file (device and inode: links, ``..`` and
    symbolic links seen through); ``False`` when either cannot be looked at."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def recognised_document(path: Path) -> bool:
    """Whether a ``.json``/``.traj`` file is a transcript a reader knows (by evidence:
    :func:`compactctl.formats.examine_document`), never arbitrary JSON, or a ``.md`` file is
    an Aider history (:func:`compactctl.formats.aider.looks_like`), never other markdown
    (issue 17)."""
    from compactctl.formats import examine_document

    if path.name.endswith(".md"):  # Aider's history: its first non-blank line is the header
        from compactctl.formats.aider import looks_like

        try:
            with path.open("rb") as f:
                head = f.read(4096)
        except OSError:
            return False
        return looks_like(head.decode("utf-8", "replace").removeprefix("\ufeff"))
    try:
        doc = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return False
    return examine_document(doc).name is not None


class Found(NamedTuple):
    """A transcript discovery found.

    Attributes:
        path: the file, as it will be opened (``-`` for stdin).
        root: the folder argument it was found under, ``None`` for a path named on the
            command line (a file, ``-``, a URL): a file met in a folder run may be skipped
            where a file asked for by name is an error (issue 19), and ``-o DIR/`` mirrors
            its path relative to ``root``.
    """

    path: str
    root: str | None


@dataclass
class Walk:
    """What :func:`walk` found.

    Attributes:
        files: the transcripts, in a stable order (each path once).
        errors: one :class:`InputError` per path that does not exist, or
            :class:`NoTranscripts` for a folder without transcripts (or none the filters
            keep); the run goes on without it.
        left_out: files found but left out by the filters (named ones included).
        skipped: ``(path, reason)`` of the files left alone on purpose: a second path to
            a file already taken (a symbolic or hard link, another spelling: the one the
            walk meets first is kept), or a symbolic link found in a folder that leads out
            of it. The run reports them as skipped (not failed).
        unsearched: ``(folder, transcripts)`` of each ``skip`` folder met inside a searched
            folder that holds transcripts (``*.jsonl``, ``*.jsonl.gz``, sorted): a ``-o
            DIR/`` inside the input tree, whose files are left out of the run (the run says
            so: :func:`compactctl.app.runner.discover_files`).
        named_left_out: ``(path, why)`` of the files named on the command line that the
            filters left out (:meth:`~compactctl.io.filters.FileFilter.left_out_by`): the
            run says so for each, since the user asked for that file by name.
    """

    files: list[Found]
    errors: list[InputError]
    left_out: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    unsearched: list[tuple[str, list[str]]] = field(default_factory=list)
    named_left_out: list[tuple[str, str]] = field(default_factory=list)


def walk(
    paths: Sequence[str],
    *,
    documents: bool = False,
    filters: FileFilter | None = None,
    skip: Sequence[str] = (),
) -> Walk:
    """Expand PATHS into transcript files, in a stable order: the one place files are found.

    Files are taken as given (any name); folders are searched recursively for ``*.jsonl``
    and ``*.jsonl.gz`` (sorted), and with ``documents`` (opt-in) also for the ``*.json``,
    ``*.traj`` and ``*.md`` files a reader recognises (:func:`recognised_document`: Gemini CLI
    sessions, Cline / Roo Code histories, opencode exports, SWE-agent trajectories, Aider
    histories); ``-`` means standard input and may appear once. Symbolic links to folders
    are not followed (as ``Path.rglob`` did). ``filters`` (:class:`~compactctl.io.filters.
    FileFilter`: ``--since``, ``--until``, ``--older-than``, ``--glob``, ``--exclude``) apply
    to every local file, named or found; ``-`` and URLs take only the patterns. ``skip``:
    folders never searched (a ``-o DIR/`` inside the input tree: compactctl never reads its
    own outputs back as inputs), compared by device and inode; one met holding transcripts
    is listed in :attr:`Walk.unsearched`.

    Each local file is taken once per run, whatever the paths that lead to it (compared by
    device and inode: ``b.jsonl -> a.jsonl``, a hard link, ``./a.jsonl`` beside ``a.jsonl``):
    the first met in this order is kept, each other one goes to :attr:`Walk.skipped` with a
    reason naming the first (two jobs on one file would race to append the same events). A
    symbolic link found in a folder that resolves outside that folder is skipped too (as
    ``serve`` refuses links that leave its root: a run over a tree writes only inside it); a
    file named on the command line is read wherever its link leads.

    Raises:
        UsageError: a time filter with a URL among PATHS (no local modification time).
    """
    files: list[Found] = []
    errors: list[InputError] = []
    seen: set[str] = set()
    taken: dict[tuple[int, int], str] = {}  # (device, inode) -> the path kept for it
    left_out = 0
    named_out: list[tuple[str, str]] = []
    skipped = _dir_ids(skip)
    unsearched: dict[str, list[str]] = {}
    aside: list[tuple[str, str]] = []
    outside: set[str] = set()  # links found in a folder that lead out of it
    for arg in paths:
        root: str | None = None
        if arg == STDIN:
            candidates = [STDIN]
        elif is_url(arg):  # object storage: compactctl/io/remote.py
            from compactctl.io.remote import discover_url

            if filters is not None and filters.by_time:
                raise UsageError(
                    f"{arg}: --since, --until and --older-than read a local file's "
                    "modification time, which a URL does not give here; use --glob/--exclude"
                )

            try:
                candidates = discover_url(arg)
            except InputError as exc:
                errors.append(exc)
                continue
        else:
            p = Path(arg)
            if p.is_dir():
                root = arg
                candidates = _search(p, documents, skipped, unsearched)
                if not candidates:
                    errors.append(
                        NoTranscripts("folder has no *.jsonl or *.jsonl.gz transcripts", path=arg)
                    )
            elif p.exists():
                candidates = [arg]
            else:
                errors.append(InputError("no such file or folder", path=arg))
                continue
        kept = 0
        for c in candidates:
            if filters is not None and filters.active and c != STDIN:
                rel = os.path.relpath(c, root) if root is not None else c
                if is_url(c):
                    rel = c[len(arg) :].lstrip("/") if c.startswith(arg) else c
                why = filters.left_out_by(c, rel)
                if why is not None:
                    left_out += 1
                    if c == arg:  # named on the command line: the run says so
                        named_out.append((c, why))
                    continue
            kept += 1
            if c in seen or (c in outside and root is not None):
                continue
            if c in outside:  # a link left out of a folder, named now: read where it leads
                aside = [(p, why) for p, why in aside if p != c]
            why = _aside(c, root, taken)
            if why is not None and root is not None and not why.startswith(SAME_FILE):
                outside.add(c)
                aside.append((c, why))
                continue
            seen.add(c)
            if why is not None:
                aside.append((c, why))
                continue
            files.append(Found(c, root))
        if root is not None and candidates and not kept:
            assert filters is not None
            errors.append(
                NoTranscripts(
                    f"none of its {len(candidates)} transcripts passes {filters.describe()}",
                    path=arg,
                )
            )
    return Walk(
        files, errors, left_out, aside, [(d, f) for d, f in unsearched.items() if f], named_out
    )


def _aside(path: str, root: str | None, taken: dict[tuple[int, int], str]) -> str | None:
    """Why the walk leaves the local file ``path`` (found under the folder ``root``, or
    named: ``None``) alone, or ``None`` to take it; ``taken`` (device and inode -> path)
    gets it when taken. ``-``, URLs and files that cannot be looked at are taken (reading
    them says what is wrong)."""
    if path == STDIN or is_url(path):
        return None
    try:
        st = os.stat(path)
        link = root is not None and os.path.islink(path)
    except OSError:
        return None
    if link:
        assert root is not None
        real, top = os.path.realpath(path), os.path.realpath(root)
        if os.path.commonpath([real, top]) != top:
            return (
                f"a symbolic link to {real}, outside {root}: a folder run never follows a "
                "link out of its folder (name the file itself to process it)"
            )
    key = (st.st_dev, st.st_ino)
    first = taken.setdefault(key, path)
    if first != path:
        return f"{SAME_FILE}{first}, taken already in this run"
    return None


SAME_FILE = "the same file as "
"""How the reason of a second path to a file taken already begins (:func:`walk`)."""


def _dir_ids(folders: Sequence[str]) -> set[tuple[int, int]]:
    ids = set()
    for d in folders:
        try:
            st = os.stat(d)
        except OSError:
            continue
        ids.add((st.st_dev, st.st_ino))
    return ids


def _search(
    top: Path,
    documents: bool,
    skip: set[tuple[int, int]],
    unsearched: dict[str, list[str]] | None = None,
) -> list[str]:
    """The transcripts under the folder ``top``, sorted; folders in ``skip`` (device,
    inode) are not entered: ``unsearched`` gets each one met, with the ``*.jsonl`` and
    ``*.jsonl.gz`` files under it."""
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(str(top)):
        if skip:
            kept = []
            for d in dirnames:
                try:
                    st = os.stat(os.path.join(dirpath, d))
                except OSError:
                    continue
                if (st.st_dev, st.st_ino) not in skip:
                    kept.append(d)
                elif unsearched is not None and os.path.join(dirpath, d) not in unsearched:
                    unsearched[os.path.join(dirpath, d)] = _search(Path(dirpath, d), False, set())
            dirnames[:] = kept
        for name in filenames:
            f = Path(dirpath, name)
            if name.endswith(TRANSCRIPT_SUFFIXES):
                if f.is_file():
                    found.append(str(f))
            elif (
                documents
                and name.endswith(DOCUMENT_SUFFIXES)
                and f.is_file()
                and recognised_document(f)
            ):
                found.append(str(f))
    return sorted(found)


def discover(
    paths: Sequence[str], *, documents: bool = False
) -> tuple[list[str], list[InputError]]:
    """:func:`walk` without filters, as ``(files, errors)``: the paths and the errors."""
    found = walk(paths, documents=documents)
    return [f.path for f in found.files], found.errors


def is_stream(path: str) -> bool:
    """Whether PATH is read as a stream, with the semantics of ``-``: read once, the output
    to stdout, never appended to.

    True for ``-``; for anything that exists and is neither a regular file nor a folder (a
    FIFO, a character device, a socket); and for a path that names an open descriptor,
    directly or through symlinks (``/dev/stdin``, ``/dev/fd/N``, ``/proc/self/fd/N``, or
    any file under ``/proc``): ``rules /dev/stdin < f.jsonl`` reads f.jsonl but must not
    append to it, the shell redirect being no request to change that file.

    >>> is_stream("-"), is_stream("/dev/stdin"), is_stream("/no/such/file")
    (True, True, False)
    """
    if path == STDIN:
        return True
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return False
    if not stat.S_ISREG(st.st_mode):
        return not stat.S_ISDIR(st.st_mode)
    hop = os.path.abspath(path)
    for _ in range(40):  # the kernel's own limit of symlinks in a path
        if hop.startswith(_FD_PATHS):
            return True
        try:
            target = os.readlink(hop)
        except OSError:
            return False
        hop = os.path.normpath(os.path.join(os.path.dirname(hop), target))
    return False


def read_error(exc: BaseException, path: str) -> InputError:
    """The :class:`InputError` (exit 3) for an error of :data:`READ_ERRORS` while reading
    PATH; corrupt gzip data is named as such.

    >>> str(read_error(zlib.error("Error -3 while decompressing data"), "a.jsonl.gz"))
    'a.jsonl.gz: cannot read: corrupt gzip data (Error -3 while decompressing data)'
    """
    if isinstance(exc, (zlib.error, gzip.BadGzipFile)):
        return InputError(f"cannot read: corrupt gzip data ({exc})", path=path)
    return InputError(f"cannot read: {exc}", path=path)


@dataclass(frozen=True)
class FileIdentity:
    """Which bytes a session was read from: the file and what was read of it.

    Attributes:
        device: ``st_dev`` of the file when it was opened.
        inode: ``st_ino`` of the file when it was opened.
        size: bytes read from the file (compressed bytes for gzip).
        sha256: hex SHA-256 of those bytes.
        compressed: the file is gzip-compressed (never appended to).
    """

    device: int
    inode: int
    size: int
    sha256: str
    compressed: bool


class IdentityReader:
    """A binary stream over an open file that hashes every byte read through it.

    ``file_size`` is the file's size in bytes when it was opened; :meth:`finished` gives
    the :class:`FileIdentity` of what was read.
    """

    def __init__(self, fh: BinaryIO, compressed: bool) -> None:
        st = os.fstat(fh.fileno())
        self._fh = fh
        self._hash = hashlib.sha256()
        self._read = 0
        self.device, self.inode, self.file_size = st.st_dev, st.st_ino, st.st_size
        self.compressed = compressed
        self.name = getattr(fh, "name", "")
        self.mode = "rb"

    def read(self, n: int = -1) -> bytes:
        data = self._fh.read(n)
        self._hash.update(data)
        self._read += len(data)
        return data

    def read1(self, n: int = -1) -> bytes:
        data: bytes = self._fh.read1(n)  # type: ignore[attr-defined]
        self._hash.update(data)
        self._read += len(data)
        return data

    def finished(self) -> FileIdentity:
        """The identity of the bytes read so far."""
        return FileIdentity(
            self.device, self.inode, self._read, self._hash.hexdigest(), self.compressed
        )


@contextlib.contextmanager
def open_input(path: str, identity: list[IdentityReader] | None = None) -> Iterator[BinaryIO]:
    """Open a transcript for reading as a binary stream (``-``: stdin; gzip by magic bytes).

    The file is opened once. With ``identity`` (a file, not stdin), the bytes read are
    hashed as they pass and the :class:`IdentityReader` is appended to that list. An empty
    stdin is read as an empty transcript, with a :class:`~compactctl.errors.CompactWarning`
    (a pipe whose first command failed gives one).

    Raises:
        InputError: the file cannot be opened (missing, a folder, no permission).
    """
    if path == STDIN:
        stream: BinaryIO = sys.stdin.buffer
        head = stream.peek(2)[:2] if hasattr(stream, "peek") else None
        if head == b"":  # at its end already: nothing was piped in
            import warnings

            from compactctl.errors import CompactWarning

            warnings.warn(
                CompactWarning(
                    "-: standard input is empty (did the command before the pipe fail?); "
                    "read as a transcript without events"
                ),
                stacklevel=3,
            )
        if head == GZIP_MAGIC:
            with gzip.GzipFile(fileobj=stream) as gz:
                yield gz  # type: ignore[misc]
        else:
            yield stream
        return
    if is_url(path):  # object storage (no identity: never appended to)
        from compactctl.io.remote import open_url

        with open_url(path) as remote:
            yield remote
        return
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed below
    except IsADirectoryError:
        raise InputError("is a folder; pass the folder to search it", path=path) from None
    except FileNotFoundError:
        raise InputError("no such file", path=path) from None
    except PermissionError:
        raise InputError("permission denied (cannot read the file)", path=path) from None
    except OSError as exc:
        raise InputError(f"cannot open: {exc.strerror}", path=path) from None
    try:
        compressed = fh.peek(2)[:2] == GZIP_MAGIC
        raw: BinaryIO = fh
        if identity is not None:
            reader = IdentityReader(fh, compressed)
            identity.append(reader)
            raw = reader  # type: ignore[assignment]
        if compressed:
            with gzip.GzipFile(fileobj=raw) as gz:
                yield gz  # type: ignore[misc]
        else:
            yield raw
    finally:
        fh.close()


def read(path: str) -> Iterator[Event]:
    """Stream the events of a canonical transcript (``-`` for stdin), turn ids assigned.

    Streaming: one line in memory at a time. Bad lines come through as ``BadLine`` events.

    Raises:
        InputError: the file cannot be opened, or a gzip stream is corrupt.
    """
    with open_input(path) as stream:
        try:
            yield from read_stream(stream)
        except READ_ERRORS as exc:
            raise read_error(exc, path) from None


@dataclass(frozen=True)
class AppendResult:
    """What :func:`append_events` did.

    Attributes:
        written: events appended.
        skipped: events already in the file (same uuid), not written again.
        bytes_written: bytes appended, including a leading ``\\n`` after a torn line.
        torn_line: True when the file ended without ``\\n`` and the append began a new line.
        old_size: the offset where the appended bytes begin: the file before them (the
            preserved prefix) is unchanged.
    """

    written: int
    skipped: int
    bytes_written: int
    torn_line: bool
    old_size: int


def _ignore_sigxfsz() -> None:
    # Past RLIMIT_FSIZE the kernel sends SIGXFSZ, whose default action kills the process
    # before we can remove a partial record; ignored, write() fails with EFBIG instead.
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "SIGXFSZ"):
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def append_events(
    path: str,
    events: Sequence[Event],
    *,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
    torn_wait: float = TORN_WAIT,
    identity: FileIdentity | None = None,
) -> AppendResult:
    """Append events to a transcript safely: the one write path into an existing file.

    The file is opened once more, ``O_RDWR | O_APPEND`` (which an append-only file,
    ``chattr +a``, allows), and never mapped for writing: it is read with ``pread`` and a
    private read-only ``mmap``. Then, under an exclusive ``flock``:

    1. with ``identity`` (what :class:`~compactctl.session.Session` read), the file must
       still be the one read: the same device and inode, still named by ``path``, at least
       as long, and its first ``identity.size`` bytes unchanged (SHA-256, re-hashed in blocks
       of :data:`HASH_BLOCK`; measured 0.2 s per 100 MB here). Otherwise :class:`FileChanged`
       (exit 75; nothing written), whose ``replan`` tells the job to plan once more on the
       new content; a file deleted since the read is a :class:`WriteError` (exit 3);
    2. events whose ``uuid`` is already the uuid of a record in the file are skipped
       (idempotence: layers derive uuids from their content; a malformed or torn line that
       merely contains the uuid, such as a record cut short by a crash, does not count, so a
       re-run writes the event whole);
    3. if the file does not end in ``\\n``, its last line may be an agent's line still being
       written: it is waited for, up to ``lock_timeout`` from the start, and at that deadline
       the run gives up with :class:`LockTimeout` (exit 75), writing nothing. Only a line
       unchanged for ``torn_wait`` seconds (file mtime; :data:`TORN_WAIT`, 5 minutes) is
       taken as torn by a crashed writer: it is left in place and our records start on a new
       line. A last line that is one of ``events`` whole but for its ``\\n`` (our own run,
       killed just before the end of its write) is ended at once. A file that ends with
       ``\\n`` but changed in the last :data:`ACTIVE_S` is being written: the write waits
       for the next line to end and follows it at once (:func:`_wait_for_line_end`);
    4. every record is written in one ``os.write``, then ``fsync``. If bytes that do not end
       a line came in between the check of 3 and the write (an agent beginning a line in
       those microseconds), :class:`WriteError` says so (:func:`_check_line_start`). With
       ``identity``, ``path`` must still name the file written, else :class:`FileChanged`
       (moved during the append: the events are in the file it named; ``replan`` False) or
       :class:`WriteError` (deleted: the events are lost with it), never a success.

    If the write fails part way (disk full, ``RLIMIT_FSIZE``), the file is truncated back to
    its old size, so no partial record is left and the old bytes are intact (an append-only
    file cannot be truncated: the error says where the partial bytes are). A process killed
    during the write (SIGKILL, power loss) can leave a torn partial record; it is kept and
    skipped like any torn line, and the next run appends the events whole after it.

    A writer that does not take the lock (an agent) is waited for when it is mid-line; the
    payload is built and the file scanned before that check, which re-reads the size, so only
    the system calls between the check and the write (microseconds) remain as a window in
    which an agent *starting* a new line with several ``write()`` calls could be joined by
    our record. No check can close it without the writer's cooperation (Linux has no
    conditional append); writing right after an active writer's line ends keeps the window
    away from its line starts (1,000 trials in tests/system/test_live_writer.py: no split),
    and step 4 reports the case. An agent writing each line with one ``write()``, as
    ``O_APPEND`` writers do, is never split.

    A gzip-compressed transcript is never appended to (plain lines after a gzip stream would
    make it unreadable): the caller gets a :class:`UsageError` and must pass ``-o``; so is a
    stream (:func:`is_stream`: ``-``, a FIFO, ``/dev/stdin``).

    Args:
        path: the transcript (must exist; a regular file).
        events: new events, each with a ``uuid``.
        lock_timeout: seconds to wait for the lock, and for a line being written.
        torn_wait: seconds a last line without ``\\n`` must stay unchanged to count as torn
            (:data:`TORN_WAIT`; ``--torn-wait`` / ``COMPACTCTL_TORN_WAIT`` / ``torn_wait`` in
            the CLI; ``0`` takes it as torn at once).
        identity: the bytes the events were planned from; ``None`` skips step 1.

    Raises:
        LockTimeout: the lock was held by another process for ``lock_timeout`` seconds, or
            the last line was still being written when that time was up.
        FileChanged: the file is not the one read (see 1 and 4).
        WriteError: the file cannot be opened for writing, was deleted, or the write failed
            (nothing partial remains, unless another process appended after the partial
            bytes or the file is append-only).
        UsageError: ``path`` is a stream or a gzip-compressed file (nothing was written).
    """
    if is_stream(path):
        if path == STDIN:
            raise UsageError("cannot append to standard input")
        raise UsageError(
            "is not a regular file (a FIFO, a device, /dev/stdin): it is read as a stream, "
            "never appended to",
            path=path,
        )
    _ignore_sigxfsz()
    fd = _open_for_append(path, identity)
    try:
        started = time.monotonic()
        with exclusive_lock(fd, path, lock_timeout):
            size = os.fstat(fd).st_size
            if size >= 2 and os.pread(fd, 2, 0) == GZIP_MAGIC:
                raise UsageError(
                    "is gzip-compressed; compactctl does not append to a compressed "
                    "transcript (nothing was written). Pass -o FILE to write the result",
                    path=path,
                )
            if identity is not None:
                _check_identity(fd, path, identity)
            fresh, own_tail = _not_in_file(fd, size, events)
            if not fresh and not own_tail:
                return AppendResult(0, len(events), 0, False, size)
            records = b"".join(e.to_json() + b"\n" for e in fresh)
            size, torn = _wait_for_line_end(
                fd, path, torn_wait, started + lock_timeout, size if own_tail else -1
            )
            payload = b"\n" + records if torn else records
            start = _write_whole(fd, path, payload) if payload else size
            if payload:
                _check_line_start(fd, path, size, start)
            if identity is not None and payload:
                _check_still_named(fd, path, len(payload))
            return AppendResult(len(fresh), len(events) - len(fresh), len(payload), torn, start)
    finally:
        os.close(fd)


def _open_for_append(path: str, identity: FileIdentity | None) -> int:
    """``os.open(path, O_RDWR | O_APPEND)``; the errors as the user should read them.

    Raises:
        WriteError: read-only, deleted since it was read (``identity`` given), or another
            ``OSError``.
    """
    try:
        return os.open(path, os.O_RDWR | os.O_APPEND)
    except FileNotFoundError:
        if identity is not None:
            raise WriteError(
                "was deleted or moved after it was read; nothing was written (no file has "
                "that name now)",
                path=path,
            ) from None
        raise WriteError("cannot open for append: no such file", path=path) from None
    except PermissionError:
        raise WriteError(
            "file is read-only; nothing was written. Use -o FILE to write a copy.", path=path
        ) from None
    except OSError as exc:
        raise WriteError(f"cannot open for append: {exc.strerror}", path=path) from None


def _check_identity(fd: int, path: str, identity: FileIdentity) -> None:
    """Check, under the lock, that ``fd`` is the file read as ``identity`` and that ``path``
    still names it: same device and inode, at least ``identity.size`` bytes, those bytes
    unchanged (SHA-256 in blocks of :data:`HASH_BLOCK`, one buffer reused).

    Raises:
        FileChanged: rotated or replaced (another inode), moved away, truncated, or
            rewritten in place; nothing was written. WriteError: deleted.
    """
    st = os.fstat(fd)
    if (st.st_dev, st.st_ino) != (identity.device, identity.inode):
        raise FileChanged(
            "was replaced after it was read (rotated, or rewritten as a new file); nothing "
            "was written",
            path=path,
        )
    _check_named(fd, path, st, "after it was read", "; nothing was written", replan=True)
    if st.st_size < identity.size:
        raise FileChanged(
            f"was truncated after it was read ({st.st_size} bytes, {identity.size} were read); "
            "nothing was written",
            path=path,
        )
    if _prefix_sha256(fd, identity.size) != identity.sha256:
        raise FileChanged(
            "was rewritten after it was read (its first bytes changed); nothing was written",
            path=path,
        )


def _check_named(
    fd: int, path: str, st: os.stat_result, when: str, then: str, *, replan: bool
) -> None:
    """Raise unless ``path`` names the file open as ``fd`` (``st``: its ``fstat``); the
    message says what happened ``when``, then ``then``.

    Raises:
        WriteError: the file was deleted. FileChanged: ``path`` names another file now, or
            nothing (the file was moved).
    """
    try:
        named = os.stat(path)
    except FileNotFoundError:
        named = None
    if named is not None and (named.st_dev, named.st_ino) == (st.st_dev, st.st_ino):
        return
    if os.fstat(fd).st_nlink == 0:
        raise WriteError(f"was deleted {when}{then}", path=path)
    what = "moved (no file has that name now)"
    if named is not None:
        what = "replaced (moved, and another file has that name now: rotated?)"
    raise FileChanged(f"was {what} {when}{then}", path=path, replan=replan)


def _check_still_named(fd: int, path: str, written: int) -> None:
    """After the write: ``path`` must still name the file written, else the run must not
    report success (the events are where ``path`` no longer points)."""
    _check_named(
        fd,
        path,
        os.fstat(fd),
        "during the append",
        f": the {written} bytes appended went to the file it named before, not to the file "
        "it names now. Re-run to compact the file it names now",
        replan=False,
    )


def _prefix_sha256(fd: int, size: int) -> str:
    """Hex SHA-256 of the first ``size`` bytes of ``fd``, read in blocks of
    :data:`HASH_BLOCK` into one reused buffer (memory: one block, whatever the size)."""
    digest = hashlib.sha256()
    buf = bytearray(HASH_BLOCK)
    view = memoryview(buf)
    pos = 0
    while pos < size:
        n = os.preadv(fd, [view[: min(HASH_BLOCK, size - pos)]], pos)
        if n <= 0:
            break  # shorter than it was a moment ago: the digest will differ
        digest.update(view[:n])
        pos += n
    return digest.hexdigest()


def _not_in_file(fd: int, size: int, events: Sequence[Event]) -> tuple[list[Event], bool]:
    """``(fresh, own_tail)``: the events whose uuid is not that of a record in the first
    ``size`` bytes, and whether the file's last line, without its ``\\n``, is one of
    ``events`` (whole, or cut short after its uuid).

    ``"uuid":"..."`` is searched for, and a match counts only when its whole line parses as
    an object with that ``uuid``. A record cut short by a crash, or a malformed line, does
    not hide an event that was never written whole. A last line that is one of our records,
    whole but for its ``\\n`` (a crash just before the end of the write), counts as written;
    ``own_tail`` tells the caller to end that line at once, so replay sees it. So does a last
    line that begins like one of our records through its uuid (a crash during the write):
    the uuid derives from the content planned, so no agent writes it, and no other
    compactctl is writing while we hold the lock.

    The file is mapped private and read-only (``MAP_PRIVATE``, ``PROT_READ``): the kernel
    refuses a shared mapping of an append-only file opened for writing.
    """
    if size == 0:
        return list(events), False
    with mmap.mmap(fd, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ) as mm:
        fresh = [e for e in events if e.uuid is None or not _has_record(mm, e.uuid)]
        own_tail = False
        if mm[size - 1 : size] != b"\n":
            start = mm.rfind(b"\n") + 1
            own_tail = _begins_like_ours(mm[start : start + 512], events)
            if not own_tail:
                tail = parse_line(mm[start:]).uuid
                own_tail = tail is not None and any(e.uuid == tail for e in events)
        return fresh, own_tail


def _begins_like_ours(head: bytes, events: Sequence[Event]) -> bool:
    """Whether ``head`` (a last line's first bytes) is one of ``events``' lines through its
    ``"uuid":"..."`` field."""
    for e in events:
        if e.uuid is None:
            continue
        line = e.to_json()
        end = line.find(b'"uuid":' + orjson.dumps(e.uuid))
        if end >= 0:
            end += len(b'"uuid":') + len(orjson.dumps(e.uuid))
            if len(head) >= end and head[:end] == line[:end]:
                return True
    return False


def _has_record(mm: mmap.mmap, uuid: str) -> bool:
    needle = b'"uuid":' + orjson.dumps(uuid)
    pos = mm.find(needle)
    while pos >= 0:
        end = mm.find(b"\n", pos)
        if end < 0:
            end = len(mm)
        start = mm.rfind(b"\n", 0, pos) + 1
        if parse_line(mm[start:end]).uuid == uuid:
            return True
        pos = mm.find(needle, end)
    return False


def _wait_for_line_end(
    fd: int, path: str, quiet: float, deadline: float, ours_at: int = -1
) -> tuple[int, bool]:
    """Return ``(size, torn)`` of the file as it is now, at a moment when an agent writing
    it is least likely to begin a line: the file ends with ``\\n`` and either has been
    unchanged for :data:`ACTIVE_S`, or a line has just ended (its size changed since the
    previous look, :data:`POLL_S` ago). Or its last line is torn: unchanged for ``quiet``
    seconds (its writer crashed), or the file is still ``ours_at`` bytes long, ending in a
    record of ours.

    The size is re-read each time, so the check is made just before the write (an agent may
    have appended while we scanned the file). An agent's line starts at unknown moments, so
    writing right after one of its lines ended, or once it has been idle, keeps the window
    between this check and the write (microseconds, :func:`append_events`) away from them.

    Raises:
        LockTimeout: at ``deadline`` (monotonic) the last line is still being written;
            nothing was written by us, and a retry later will find the line complete.
    """
    last = -1
    while True:
        st = os.fstat(fd)
        size = st.st_size
        age = time.time() - st.st_mtime
        if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
            idle = not 0 <= age < ACTIVE_S  # an mtime in the future: not a writer's clock
            if idle or 0 <= last != size or time.monotonic() >= deadline:
                return size, False
        elif age >= quiet or size == ours_at:
            return size, True
        elif time.monotonic() >= deadline:
            raise LockTimeout(
                f"the file ends mid-line and changed {age:.1f}s ago: another process may "
                f"still be writing that line (a line counts as torn by a crashed writer "
                f"after {quiet:g}s unchanged); nothing was written. Retry later or raise "
                "--lock-timeout; if no process writes this file, --torn-wait 0 takes the "
                "line as torn now.",
                path=path,
            )
        last = size
        time.sleep(POLL_S)


def _check_line_start(fd: int, path: str, checked: int, start: int) -> None:
    """After the write: raise if an agent's partial line got in between the check (the file
    was ``checked`` bytes, ending a line) and our write (which began at ``start``).

    Raises:
        WriteError: our records are inside that agent line (exit 3; never a success).
    """
    if start == checked or os.pread(fd, 1, start - 1) == b"\n":
        return  # nothing, or whole lines, came in between
    raise WriteError(
        f"another process began a line in the moment between compactctl's check and its "
        f"write: our records (at byte {start}) are inside that line, which is split in two "
        "malformed lines; no other byte changed. A re-run appends the records whole",
        path=path,
    )


def _write_whole(fd: int, path: str, payload: bytes) -> int:
    """One ``os.write`` of ``payload``, then fsync; return the offset where it begins.

    On failure our bytes are cut off again (the file is truncated to where they begin),
    unless another writer has appended after them (its bytes are never cut) or the file is
    append-only (it cannot be truncated).
    """
    written = 0
    try:
        written = os.write(fd, payload)
        if written != len(payload):
            raise OSError(
                0,
                f"only {written} of {len(payload)} bytes written: a file size limit or a full disk",
            )
        os.fsync(fd)
        return os.lseek(fd, 0, os.SEEK_CUR) - written
    except OSError as exc:
        reason = exc.strerror or str(exc)
        start, restored, why = os.fstat(fd).st_size, True, "another process appended after them"
        if written:
            end = os.lseek(fd, 0, os.SEEK_CUR)
            start, restored = end - written, False
            try:
                if os.fstat(fd).st_size == end:
                    os.ftruncate(fd, start)
                    os.fsync(fd)
                    restored = True
            except PermissionError:
                why = "the file is append-only"
            except OSError:
                pass
        if restored:
            raise WriteError(
                f"append failed ({reason}); the file was restored to its previous "
                f"{start} bytes, nothing was lost",
                path=path,
            ) from None
        raise WriteError(
            f"append failed ({reason}); {written} bytes of a partial record remain at byte "
            f"{start} ({why}, so they were not cut); the bytes before them are intact",
            path=path,
        ) from None


def gzipped(target: str) -> bool:
    """Whether the output ``target`` (a path or URL, not ``-``) is written gzip-compressed:
    its name ends in ``.gz``, as ``-o out.jsonl.gz`` asks (the readers take gzip by its
    magic bytes, so such an output reads back as any input does).

    >>> gzipped("out.jsonl.gz"), gzipped("s3://b/out.JSONL.GZ"), gzipped("out.jsonl")
    (True, True, False)
    """
    return target != STDIN and target.lower().endswith(".gz")


def gzip_lines(lines: Iterable[bytes]) -> Iterator[bytes]:
    """``lines`` as one gzip stream (RFC 1952), in blocks as the compressor gives them.

    The header's modification time is 0 and it names no file (zlib's gzip wrapper), so the
    same lines always give the same bytes: an output written again from the same input is
    identical, as an uncompressed one is. Compression level 6 (gzip's default).
    """
    z = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    for chunk in lines:
        block = z.compress(chunk)
        if block:
            yield block
    yield z.flush()


def write_output(target: str, lines: Iterable[bytes]) -> int:
    """Write lines to ``target``: ``-`` streams to stdout, a path is written atomically,
    gzip-compressed when its name ends in ``.gz`` (:func:`gzipped`, :func:`gzip_lines`).

    A file is written to a temporary file in the same folder, fsynced, then renamed over
    ``target``, so the target is either the old file or the complete new one. The new file
    gets the old target's permission bits, or the usual ones (``0o666`` less the umask) for a
    new target. A process killed mid-write leaves the target intact and may leave its
    temporary ``.compactctl-*.tmp`` file behind. A symlink ``target`` is replaced by the new
    file (the file it pointed to is not written).

    Returns:
        bytes written (compressed bytes for a ``.gz`` target).

    Raises:
        WriteError: the folder is not writable or the disk is full (the target is untouched).
    """
    if target == STDIN:
        out = sys.stdout.buffer
        total = 0
        for chunk in lines:
            out.write(chunk)
            total += len(chunk)
        out.flush()
        return total
    if gzipped(target):  # a fresh-user trial: -o out.jsonl.gz wrote plain JSON text
        lines = gzip_lines(lines)
    if is_url(target):
        from compactctl.io.remote import write_url

        return write_url(target, lines)
    _ignore_sigxfsz()
    folder = os.path.dirname(os.path.abspath(target))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".compactctl-", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise WriteError(f"cannot create output: {exc.strerror}", path=target) from None
    total = 0
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fd, _output_mode(target))
            for chunk in lines:
                fh.write(chunk)
                total += len(chunk)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise WriteError(
            f"cannot write output ({exc.strerror or exc}); the target is unchanged", path=target
        ) from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return total


def write_unless_same(target: str, lines: Iterable[bytes]) -> int | None:
    """:func:`write_output`, unless the file ``target`` holds exactly these bytes already:
    then nothing is written (its mtime, inode and bytes stay) and ``None`` is returned.

    This is how ``-o`` decides that an output is up to date (issue 19): by comparing the
    bytes it would write with the target's, as they are produced, so the answer is true
    whatever changed in between (the input, the options, compactctl itself), where a
    modification time or a recorded input hash would be a guess about them. The work of
    producing the bytes is still done (a summarizer model is still called; the extractive
    default is deterministic, so its outputs compare equal). At the first byte that differs,
    the bytes already compared are copied from the target and the rest written after them:
    nothing is held in memory but one line and one block.

    A ``.gz`` target (:func:`gzipped`) is compared by what it holds uncompressed: a target
    that does not decompress (not gzip, cut short, corrupt) differs from the first byte
    that cannot be read, and is written again.

    Returns:
        bytes written, or ``None`` when the target was left as it was (``-`` and URLs are
        always written).

    Raises:
        WriteError: as :func:`write_output`.
    """
    if target == STDIN or is_url(target):
        return write_output(target, lines)
    try:  # gzip.open reads nothing yet: a target that is not gzip fails at its first read
        old = gzip.open(target, "rb") if gzipped(target) else open(target, "rb")  # noqa: SIM115
    except OSError:
        return write_output(target, lines)

    def next_bytes(n: int) -> bytes | None:
        """The next ``n`` bytes of the target as it reads (uncompressed), ``None`` when
        they cannot be read."""
        try:
            return old.read(n)
        except READ_ERRORS:
            return None

    with old:
        rest = iter(lines)
        pos = 0
        for chunk in rest:
            if next_bytes(len(chunk)) != chunk:
                return write_output(target, itertools.chain(_prefix(old, pos), (chunk,), rest))
            pos += len(chunk)
        if next_bytes(1) != b"":  # longer, or unreadable: it gets the bytes produced, no more
            return write_output(target, _prefix(old, pos))
    return None


def _prefix(fh: BinaryIO | gzip.GzipFile, size: int) -> Iterator[bytes]:
    """The first ``size`` bytes of ``fh``, in blocks of :data:`HASH_BLOCK`."""
    fh.seek(0)
    while size > 0:
        block = fh.read(min(HASH_BLOCK, size))
        if not block:
            return
        size -= len(block)
        yield block


def _output_mode(target: str) -> int:
    """Permission bits for a new output: the existing target's, else ``0o666`` less the umask."""
    try:
        return os.stat(target).st_mode & 0o7777
    except OSError:
        umask = os.umask(0o022)
        os.umask(umask)
        return 0o666 & ~umask
