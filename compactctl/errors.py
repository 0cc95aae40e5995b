"""The one exception hierarchy of compactctl.

The library raises :class:`CompactError` subclasses; only ``cli.py`` turns them into a message
on stderr and an exit code (docs/style.md habit 8). Each class carries the exit code a script sees.

Exit codes (docs/design.md section 4): 0 done or nothing to do, 1 ``--check`` found work,
2 usage or config error, 3 some input could not be processed, 75 a lock could not be taken
in time (``EX_TEMPFAIL`` from BSD ``sysexits.h``: the run may simply be retried, as cron
wrappers and ``sendmail`` do).
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


class LockTimeout(CompactError):
    """Another process held the transcript's lock longer than the timeout (exit code 75).

    A cron job can retry on this code: nothing was written.
    """

    exit_code = EXIT_LOCKED


class SummarizerError(CompactError):
    """A summarizer failed or answered something invalid; nothing was appended (exit 3)."""

    exit_code = EXIT_INPUT
