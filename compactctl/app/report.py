"""The run report: counters, per-file outcomes, the closing summary line and the exit code.

One :class:`Report` per run (STYLE.md habit 5, after black's ``Report``). Commands record
every file's outcome; ``cli.py`` prints :meth:`Report.summary` on stderr and exits with
:attr:`Report.return_code`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from compactctl.errors import EXIT_CHECK, EXIT_INPUT, EXIT_LOCKED, EXIT_OK, EXIT_USAGE, CompactError

__all__ = ["Report"]


@dataclass
class Report:
    """Outcomes of one run over many files.

    Attributes:
        check: ``--check`` mode: files that would change make the exit code 1.
        processed: files processed.
        failures: ``(path, error)`` for each file that could not be processed.
        changed: files that were (or, with --check/--dry-run, would be) changed.
    """

    check: bool = False
    processed: int = 0
    failures: list[tuple[str, CompactError]] = field(default_factory=list)
    changed: int = 0

    def done(self, result: dict[str, Any], *, changed: bool = False) -> None:
        """Record a processed file and whether it changed (or would change)."""
        self.processed += 1
        self.changed += int(changed)

    def failed(self, path: str, error: CompactError) -> None:
        """Record a file that could not be processed; the run goes on."""
        self.failures.append((path, error))

    @property
    def return_code(self) -> int:
        """The exit code (DESIGN.md section 4): 75 if a lock was held too long (retry), else
        3 if an input could not be processed, else 2 if only usage/config errors occurred
        (e.g. a missing API key), else 1 if ``--check`` found work, else 0."""
        if self.failures:
            codes = {e.exit_code for _, e in self.failures}
            for code in (EXIT_LOCKED, EXIT_INPUT, EXIT_USAGE):
                if code in codes:
                    return code
            return EXIT_INPUT
        if self.check and self.changed:
            return EXIT_CHECK
        return EXIT_OK

    def summary(self, verb: str, rest: str = "unchanged") -> str:
        """One closing line, e.g. ``2 files compacted, 1 unchanged, 1 failed.``

        >>> r = Report(); r.done({}, changed=True); r.done({}); r.summary("compacted")
        '1 file compacted, 1 unchanged.'
        """
        n = self.processed
        parts = [f"{self.changed} file{'s' if self.changed != 1 else ''} {verb}"]
        if n - self.changed:
            parts.append(f"{n - self.changed} {rest}")
        if self.failures:
            parts.append(f"{len(self.failures)} failed")
        return ", ".join(parts) + "."
