"""``eval``'s part of the ``--report`` pages: what each file kept, its gates, its lost probes.

:func:`eval_row` slims a file's ``eval --json`` entry
(:meth:`compactctl.evaluate.report.FileEval.to_json`) into its row: the probes kept of the
total, the retention, per kind that has probes, whether the file is below a ``--min`` gate
(and which, when the entry names its gates), and its first :data:`LOST_SHOWN` lost probes,
each text on one line and clipped to :data:`TEXT_CHARS` (``compactctl eval -v`` or
``--json`` lists them all). So a row stays under 5 KB however many probes a session loses:
4.9 KB by ``sys.getsizeof`` summed over its objects, with every kind, 5 lost probes of 160
chars and two gates.

:func:`eval_sections` makes the tables both pages show after the files table (retention per
kind, with the run's total per kind; the lost probes); :func:`probes_line` the run's probe
totals for the totals line. Everything is read from the entries; only the run's totals are
summed here, with :func:`~compactctl.evaluate.report.share`, as ``eval --json``'s ``totals``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = [
    "EVAL_COLUMNS",
    "LOST_SHOWN",
    "TEXT_CHARS",
    "Section",
    "eval_cells",
    "eval_row",
    "eval_sections",
    "gate_cell",
    "judge_part",
    "probes_line",
]

LOST_SHOWN = 5
"""Lost probes a row keeps per file (the page says how many more there are)."""

TEXT_CHARS = 160
"""A lost probe's text on the page, at most, in characters (whitespace runs made one space)."""


def eval_row(entry: dict[str, Any], *, below: bool) -> dict[str, Any]:
    """The eval part of a file's ``--report`` row, from its ``eval --json`` entry.

    ``below``: the run counted the file below a gate. The gates are the entry's
    ``belowMin`` phrases (``"retention 0 < 0.9"``) when it carries them, else empty.

    Returns:
        ``{"total", "kept", "retention", "byKind": {KIND: (kept, total)} (kinds with
        probes, in the entry's order), "lost": [(kind, text, line), ...] (the first
        :data:`LOST_SHOWN`), "lostMore": int, "below": bool, "gates": [str], "judge":
        dict | None}`` (``judge``: :func:`judge_part`).

    >>> row = eval_row({"probes": {"total": 2, "kept": 1, "retention": 0.5,
    ...     "byKind": {"command": {"total": 2, "kept": 1}, "error": {"total": 0, "kept": 0}},
    ...     "lost": [{"kind": "command", "text": "make\\n  test", "line": 9}]},
    ...     "belowMin": ["retention 0.5 < 0.9"]}, below=True)
    >>> row["byKind"], row["lost"], row["below"], row["gates"]
    ({'command': (1, 2)}, [('command', 'make test', 9)], True, ['retention 0.5 < 0.9'])
    """
    from compactctl.text import clip

    probes = entry["probes"]
    lost = probes.get("lost") or []
    return {
        "total": probes["total"],
        "kept": probes["kept"],
        "retention": probes["retention"],
        "byKind": {k: (v["kept"], v["total"]) for k, v in probes["byKind"].items() if v["total"]},
        "lost": [
            (p["kind"], clip(" ".join(str(p["text"]).split()), TEXT_CHARS), p.get("line"))
            for p in lost[:LOST_SHOWN]
        ],
        "lostMore": max(0, len(lost) - LOST_SHOWN),
        "below": below,
        "gates": [str(g) for g in entry.get("belowMin") or []],
        "judge": judge_part(entry.get("judge")),
    }


def judge_part(judge: dict[str, Any] | None) -> dict[str, Any] | None:
    """The ``--judge`` part of a row, from the entry's ``judge``
    (:func:`compactctl.evaluate.judge.judge_entry`): ``None`` without ``--judge``; else
    ``{"model", "answerModel", "scores": {DIMENSION: grade 0-5}, "overall"}``, or, when the
    judge failed, ``{"model", "answerModel", "error": message}`` (clipped to
    :data:`TEXT_CHARS`; the probe results of the row stand).

    >>> judge_part({"model": "m", "answerModel": "a", "error": {"code": "input",
    ...     "exitCode": 3, "message": "--judge model m failed: boom"}})
    {'model': 'm', 'answerModel': 'a', 'error': '--judge model m failed: boom'}
    >>> judge_part({"model": "m", "answerModel": "m", "scores": {"accuracy": 4.5},
    ...     "overall": 4.5, "byType": {}, "questions": []})["scores"]
    {'accuracy': 4.5}
    """
    if not judge:
        return None
    from compactctl.text import clip

    head = {"model": judge.get("model"), "answerModel": judge.get("answerModel")}
    if "error" in judge:
        message = " ".join(str(judge["error"].get("message", "")).split())
        return {**head, "error": clip(message, TEXT_CHARS)}
    return {**head, "scores": dict(judge.get("scores") or {}), "overall": judge.get("overall")}


def gate_cell(row: dict[str, Any]) -> str | None:
    """The outcome of an eval row below a gate: ``below the minimum`` and, when the entry
    named them, its gates; ``None`` otherwise.

    >>> gate_cell({"eval": {"below": True, "gates": ["retention 0 < 0.9", "error ... < 1"]}})
    'below the minimum: retention 0 < 0.9; error ... < 1'
    >>> gate_cell({"eval": {"below": False, "gates": []}}), gate_cell({"outcome": "failed"})
    (None, None)
    """
    part = row.get("eval")
    if not part or not part["below"]:
        return None
    gates = "; ".join(part["gates"])
    return f"below the minimum: {gates}" if gates else "below the minimum"


EVAL_COLUMNS = [("retention", True), ("probes kept", True)]
"""The columns eval adds to the files table, after the outcome (:func:`eval_cells`)."""


def eval_cells(row: dict[str, Any]) -> list[str]:
    """A file's cells of :data:`EVAL_COLUMNS`: its retention and ``kept of total`` probes,
    ``-`` for a file that was not evaluated (failed, skipped).

    >>> eval_cells({"eval": {"retention": 0.9167, "kept": 33, "total": 36}})
    ['0.9167', '33 of 36']
    """
    part = row.get("eval")
    if not part:
        return ["-", "-"]
    return [_retention(part["retention"]), f"{part['kept']:,} of {part['total']:,}"]


def _retention(value: float) -> str:
    """A retention as ``eval --json`` and the gate phrases write it (4 places, ``1``, ``0``)."""
    return f"{value:g}"


def probes_line(rows: list[dict[str, Any]]) -> str:
    """The run's probes for the totals line (empty when no file was evaluated):
    ``Probes: 33 of 69 kept, retention 0.4783.``

    >>> probes_line([{"eval": {"kept": 1, "total": 4}}, {"path": "x", "outcome": "failed"}])
    ' Probes: 1 of 4 kept, retention 0.25.'
    """
    from compactctl.evaluate.report import share

    parts = [r["eval"] for r in rows if "eval" in r]
    if not parts:
        return ""
    kept, total = sum(p["kept"] for p in parts), sum(p["total"] for p in parts)
    return f" Probes: {kept:,} of {total:,} kept, retention {_retention(share(kept, total))}."


class Section(NamedTuple):
    """A table of a page: its heading, its ``id`` on the HTML page, its columns
    (``(header, numeric)``: numbers align right), its rows of cell texts (not escaped: each
    page escapes them its own way), a note under it (``""``: none), and the HTML class of
    each row (empty: none)."""

    title: str
    id: str
    columns: list[tuple[str, bool]]
    rows: list[list[str]]
    note: str = ""
    classes: tuple[str, ...] = ()


def _by_kind(kept: int, total: int) -> str:
    from compactctl.evaluate.report import share

    return f"{_retention(share(kept, total))} ({kept:,}/{total:,})"


def eval_sections(rows: list[dict[str, Any]]) -> list[Section]:
    """The tables after the files table: retention per kind (a column per kind that has
    probes in the run, ``retention (kept/total)``, ``-`` for a file with none of it, then
    the run's total), the lost probes (file, line, kind, text; the first
    :data:`LOST_SHOWN` of each file, then how many more), and, after ``--judge``, the
    judge's grades (:func:`_judge_section`). Empty when no file was evaluated."""
    from compactctl.evaluate.probes import KINDS

    evaluated = [(str(r["path"]), r["eval"]) for r in rows if "eval" in r]
    if not evaluated:
        return []
    sums: dict[str, list[int]] = {}
    for _, part in evaluated:
        for kind, (kept, total) in part["byKind"].items():
            row = sums.setdefault(kind, [0, 0])
            row[0] += kept
            row[1] += total
    kinds = [k for k in KINDS if k in sums] + [k for k in sums if k not in KINDS]
    cells = [[path, *(_by_kind(*p["byKind"][k]) if k in p["byKind"] else "-" for k in kinds)]
             for path, p in evaluated]  # fmt: skip
    cells.append(["all files", *(_by_kind(*sums[k]) for k in kinds)])
    out = [Section("Retention by kind", "kinds",
                   [("file", False), *((k, True) for k in kinds)], cells)]  # fmt: skip
    lost: list[list[str]] = []
    for path, part in evaluated:
        lost += [
            [path, str(line) if line else "-", kind, text] for kind, text, line in part["lost"]
        ]
        if part["lostMore"]:
            more = f"and {part['lostMore']:,} more (compactctl eval -v lists them all)"
            lost.append([path, "", "", more])
    columns = [("file", False), ("line", True), ("kind", False), ("probe", False)]
    note = "" if lost else "No probe was lost."
    out.append(Section("Lost probes", "lost", columns, lost, note))
    judged = [(path, p["judge"]) for path, p in evaluated if p.get("judge")]
    if judged:
        out.append(_judge_section(judged))
    return out


def _judge_section(judged: list[tuple[str, dict[str, Any]]]) -> Section:
    """The ``--judge`` table: per file, the judge (and the answering model when another),
    its grade 0-5 per dimension and overall; a failed judge's row says why; then the mean
    over the graded files (``eval --json``'s ``totals.judge``: the mean of each dimension,
    rounded to 2 places)."""
    from compactctl.evaluate.judge import DIMENSIONS

    dims = list(DIMENSIONS)
    rows: list[list[str]] = []
    sums: dict[str, list[float]] = {}
    for path, part in judged:
        model = str(part["model"])
        if part.get("answerModel") not in (None, part["model"]):
            model += f" (answers: {part['answerModel']})"
        if "error" in part:
            rows.append([path, model, *("-" for _ in dims), f"failed: {part['error']}"])
            continue
        scores = part["scores"]
        for d in dims:
            if scores.get(d) is not None:
                sums.setdefault(d, []).append(float(scores[d]))
        rows.append([path, model, *(_grade(scores.get(d)) for d in dims),
                     _grade(part.get("overall"))])  # fmt: skip
    if sums:
        means = {d: round(sum(v) / len(v), 2) for d, v in sums.items()}
        overall = round(sum(means.values()) / len(means), 2)
        rows.append(["all files", "", *(_grade(means.get(d)) for d in dims), _grade(overall)])
    failed = sum("error" in part for _, part in judged)
    note = (
        f"The judge failed on {failed:,} file{'s' if failed != 1 else ''}: its probe results stand."
        if failed
        else ""
    )
    columns = [("file", False), ("judge", False), *((d, True) for d in dims), ("overall", True)]
    return Section("Judge (grades 0-5)", "judge", columns, rows, note)


def _grade(value: Any) -> str:
    """A grade 0-5 as the judge's table prints it (2 places), ``-`` when not given."""
    return "-" if value is None else f"{float(value):.2f}"
