"""The one exception hierarchy of compactctl.

The library raises :class:`CompactError` subclasses; only ``cli.py`` turns them into a message
on stderr and an exit code (docs/style.md habit 8). Each class carries the exit code a script sees.

Exit codes (docs/design.md section 4): 0 done or nothing to do, 1 ``--check`` found work,
2 usage or config error, 3 some input could not be processed, 75 a lock could not be taken
in time, or a transcript changed under compactctl (``EX_TEMPFAIL`` from BSD ``sysexits.h``:
the run may simply be retried, as cron wrappers and ``sendmail`` do).

:class:`CompactWarning` is the category of the notes the library gives with ``warnings.warn``
(each said once per process); the CLI prints them as ``compactctl: warning: ...``.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_CHECK = 1
EXIT_USAGE = 2
EXIT_INPUT = 3
EXIT_LOCKED = 75


class CompactError(Exception):
    """Base of every error compactctl raises on purpose.

    Attributes:
        exit_code: the process exit code the CLI uses for this error.
        path: the file concerned, when there is one (``"-"`` for stdin).
        line: the 1-based line number in ``path``, when known.
    """

    exit_code = EXIT_INPUT

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None):
        super().__init__(message)
        self.message = message
        self.path = path
        self.line = line

    def __str__(self) -> str:
        where = ""
        if self.path is not None:
            where = self.path if self.line is None else f"{self.path}:{self.line}"
            where += ": "
        return where + self.message


class UsageError(CompactError):
    """Bad arguments or configuration (exit code 2)."""

    exit_code = EXIT_USAGE


class InputError(CompactError):
    """An input file could not be read or parsed as asked (exit code 3)."""

    exit_code = EXIT_INPUT


class WriteError(CompactError):
    """A write to a transcript or output failed; nothing partial was left (exit code 3)."""

    exit_code = EXIT_INPUT


class OutputChanged(WriteError):
    """An ``-o DIR/`` output that no longer holds the bytes compactctl wrote there (an agent
    resumed it, ``undo`` appended to it, someone edited it): it is someone's data now, and is
    never overwritten (exit code 3; the other files of the run go on). The record of what was
    written is ``DIR/.compactctl/REL.json`` (:mod:`compactctl.app.provenance`)."""


class OutputNotOurs(WriteError):
    """A file at an ``-o DIR/`` output's path that compactctl did not write there: no record
    of it in ``DIR/.compactctl/`` (the user's own file, another tool's output). It is never
    overwritten (exit code 3; the other files of the run go on): move it away or write to
    another ``-o DIR/`` (:func:`compactctl.app.provenance.refuse_changed`)."""


class LockTimeout(CompactError):
    """Another process held the transcript's lock longer than the timeout (exit code 75).

    A cron job can retry on this code: nothing was written.
    """

    exit_code = EXIT_LOCKED


class SummarizerError(CompactError):
    """A summarizer failed or answered something invalid; nothing was appended (exit 3)."""

    exit_code = EXIT_INPUT


class NotATranscript(InputError):
    """A file no reader takes for a transcript: its format is unknown or ambiguous, it is
    not JSON lines, or a forced ``--format`` reads nothing from it (exit code 3). Met in a
    folder, it still fails the run (it may be a transcript compactctl misreads: never
    skipped in silence), and the message adds how to leave it out of the folder run
    (``--exclude``, :func:`compactctl.app.runner.run_files`)."""


class NotAppendable(InputError):
    """A transcript that cannot be changed in place: another agent's format, or gzip
    (exit code 3 when the file was named; a folder run skips it with a notice instead,
    :func:`compactctl.app.runner.run_files`).

    Attributes:
        kind: the file's format (``claude-code``, ...) or ``gzip``.
    """

    def __init__(self, message: str, *, path: str | None = None, kind: str = "gzip"):
        super().__init__(message, path=path)
        self.kind = kind


class FileChanged(CompactError):
    """The transcript is not the file that was read (exit code 75): between the read and the
    append it was rotated, rewritten, truncated or moved, or it was moved or deleted during
    the append.

    Attributes:
        replan: nothing was written, and planning again on the file's new content is
            meaningful (a job does that once, :mod:`compactctl.app.jobs`); ``False`` when
            the events were already written, or the file is gone.
    """

    exit_code = EXIT_LOCKED

    def __init__(self, message: str, *, path: str | None = None, replan: bool = True):
        super().__init__(message, path=path)
        self.replan = replan


class StoreNotUpdated(CompactError):
    """The transcript was written but the store was not: the message says ``appended N bytes
    to FILE; store not updated: REASON``.

    The exit code is the store error's: 75 when the database stayed locked (a retry
    records the run), 3 when it could not be written (someone must look at it). Either way
    the transcript change is done, a re-run appends nothing more, and the next run that
    opens the store records the missing rows from the transcript
    (:meth:`compactctl.app.store.Store.reconcile`).
    """

    def __init__(self, message: str, *, path: str | None = None, exit_code: int = EXIT_INPUT):
        super().__init__(message, path=path)
        self.exit_code = exit_code


class Stopped(BaseException):
    """The run was told to stop by a signal (SIGTERM: ``timeout``, a scheduler, ``kill``),
    raised in the main thread by :func:`compactctl.app.pool.stop_on_sigterm`. A
    ``BaseException``, as ``KeyboardInterrupt`` is, so that no ``except Exception`` of a
    file's job takes it for that file's failure. The CLI says so on stderr and exits with
    :attr:`exit_code`, 128 + the signal's number (143 for SIGTERM), as a shell reports a
    process the signal killed.

    Attributes:
        signum: the signal's number.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        """128 + the signal's number."""
        return 128 + self.signum


class CompactWarning(UserWarning):
    """A note for the user that is not an error (a value replaced so a line stays valid
    JSON, a damaged database moved aside, a store reconciled). Raised through
    ``warnings.warn``: said once per process and message; the CLI prints it on stderr as
    ``compactctl: warning: MESSAGE``.

    ``once``: a key (``None``: none); the CLI says a warning with a key only the first time
    in a run (per process), whatever file its message names: ``no model is recorded`` names
    the first file it is true of, not each of the 200 files of a cron folder."""

    once: str | None = None
