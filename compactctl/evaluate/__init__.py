"""``compactctl eval``: measure what a compaction kept, on the user's own sessions (issue 16).

A compactctl transcript keeps its original messages beside the compaction events, so what a
compaction lost can be measured on any session: probes are read from the original messages,
and each is looked for in the effective context (what the agent would send now).

The package, in the order of a run:

- :mod:`~compactctl.evaluate.lines`: the transcript read (canonical JSON lines in one tight
  loop, other formats through the general reader);
- :mod:`~compactctl.evaluate.probes`: the probes of a log (file paths, commands, errors,
  identifiers, user constraints, decisions, pending tasks, first and latest request), each
  with its source line and turn;
- :mod:`~compactctl.evaluate.check`: the effective context as searchable text; exact and
  whitespace/case-normalised matching;
- :mod:`~compactctl.evaluate.report`: per-file results, the ``--json`` schema, totals, the
  ``--min-retention`` / ``--min KIND=X`` gates, the table for people;
- :mod:`~compactctl.evaluate.judge`: ``--judge MODEL``, probe questions answered from the
  compacted context and graded 0-5 on six dimensions (litellm, imported lazily);
- :mod:`~compactctl.evaluate.compare`: ``--compare``, compaction configurations side by side;
- :mod:`~compactctl.evaluate.job`: one file (:func:`eval_path`), many files
  (:func:`run_eval`), and the library entry :func:`evaluate_session`.

Library use::

    from compactctl.session import Session
    from compactctl.evaluate import EvalOptions, evaluate_session

    result = evaluate_session(Session.open("session.jsonl"), EvalOptions())
    result.counts.retention, [p.text for p in result.lost]
"""

from __future__ import annotations

from compactctl.evaluate.check import Context
from compactctl.evaluate.job import EvalOptions, eval_path, evaluate_session, run_eval
from compactctl.evaluate.probes import KINDS, Probe, extract_probes
from compactctl.evaluate.report import FileEval

__all__ = [
    "KINDS",
    "Context",
    "EvalOptions",
    "FileEval",
    "Probe",
    "eval_path",
    "evaluate_session",
    "extract_probes",
    "run_eval",
]
