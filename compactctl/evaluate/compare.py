"""``eval --compare``: several compaction configurations side by side, tokens left vs retention.

Each configuration is a comma-separated list of ``compact`` options (``strategy=full_replace,
max_summary_chars=4000``); ``default`` names the built-in set :data:`DEFAULT_CONFIGS`.
Every configuration runs ``compact --force`` (a manual compaction now, as a user trying it
would) on the session as it is: planned in memory by
:class:`compactctl.layers.summary.CompactLayer` on the opened
:class:`~compactctl.session.Session` (the same as on a temporary copy: nothing is written,
the file is not touched), then the effective context after the planned events is checked
against the same probes. The first row, ``as is``, is the file's own effective context, as
the report above it measured it. Ratios are of the same tokens before as the report's: the
original messages (``--against``: the original's).

Keys (:data:`KEYS`): the fields of :class:`~compactctl.layers.options.CompactOptions` a user
sets from the command line, by their option name with ``_`` or ``-``, plus the aliases
``summary_format`` (``format``), ``summarizer`` (``model``) and ``budget``
(``max_summary_chars``). Values are parsed by the field's type; ``model=`` a litellm model
calls it (with the options' redaction), ``extractive`` is the offline default.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from compactctl.errors import UsageError
from compactctl.evaluate.check import Context
from compactctl.evaluate.report import FileEval, ProbeCounts, share
from compactctl.model import Message

if TYPE_CHECKING:
    from compactctl.session import Session

__all__ = [
    "DEFAULT_CONFIGS",
    "KEYS",
    "Config",
    "Row",
    "compare_session",
    "compare_table",
    "parse_configs",
]

DEFAULT_CONFIGS = (
    "micro_only=true",
    "strategy=keep_recent",
    "strategy=keep_recent,keep_recent=4",
    "strategy=full_replace",
    "strategy=full_replace,max_summary_chars=1200",
    "summary_format=task-state",
)
"""``--compare default``: micro compaction alone; keep_recent with the default 10 messages
and with 4; full_replace with the default budget and with NeoCode's 1200 chars; the
task-state format. All offline (the extractive summarizer)."""

KEYS = {
    "strategy": "strategy",
    "keep_recent": "keep_recent",
    "max_summary_chars": "max_summary_chars",
    "budget": "max_summary_chars",
    "format": "format",
    "summary_format": "format",
    "model": "model",
    "summarizer": "model",
    "micro_only": "micro_only",
    "micro": "micro_enabled",
    "min_saving": "min_saving",
    "instructions": "instructions",
}
"""Configuration key -> :class:`~compactctl.layers.options.CompactOptions` field."""

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@dataclass(frozen=True)
class Config:
    """One configuration: its name (the spec as typed) and the option values it sets."""

    name: str
    values: tuple[tuple[str, Any], ...]


def _value(field: dataclasses.Field[Any], raw: str, spec: str) -> Any:
    """``raw`` parsed by the type of ``field`` (bool, int, float, else str).

    Raises:
        UsageError: the value does not parse.
    """
    kind = str(field.type)
    try:
        if kind.startswith("bool"):
            if raw.lower() not in _TRUE | _FALSE:
                raise ValueError(raw)
            return raw.lower() in _TRUE
        if kind.startswith("int"):
            return int(raw)
        if kind.startswith("float"):
            return float(raw)
    except ValueError:
        raise UsageError(f"--compare {spec!r}: {field.name}={raw!r} is not a {kind}") from None
    return raw


def parse_configs(specs: Sequence[str]) -> tuple[Config, ...]:
    """The configurations of ``--compare`` specs (``default`` expands to
    :data:`DEFAULT_CONFIGS`), each checked by building its options.

    >>> [c.values for c in parse_configs(["strategy=full_replace,budget=4000"])]
    [(('strategy', 'full_replace'), ('max_summary_chars', 4000))]

    Raises:
        UsageError: an unknown key, a value that does not parse, or options that
            :class:`~compactctl.layers.options.CompactOptions` refuses.
    """
    from compactctl.layers.options import CompactOptions

    fields = {f.name: f for f in dataclasses.fields(CompactOptions)}
    out: list[Config] = []
    for spec in specs:
        if spec.strip() == "default":
            out.extend(parse_configs(DEFAULT_CONFIGS))
            continue
        values = []
        for item in filter(None, (i.strip() for i in spec.split(","))):
            key, sep, raw = item.partition("=")
            name = KEYS.get(key.strip().replace("-", "_"))
            if not sep or name is None:
                what = "is not KEY=VALUE" if not sep else f"names no setting ({key.strip()!r})"
                raise UsageError(
                    f"--compare {spec!r}: {item!r} {what}; KEY is one of " + ", ".join(sorted(KEYS))
                )
            values.append((name, _value(fields[name], raw.strip(), spec)))
        if not values:
            raise UsageError("--compare takes KEY=VALUE[,KEY=VALUE...] or default")
        CompactOptions(**dict(values))  # its own checks (strategy, format, keep_recent)
        out.append(Config(spec.strip(), tuple(values)))
    return tuple(out)


@dataclass
class Row:
    """One configuration's outcome on one file (tokens of the prompt estimate)."""

    name: str
    tokens_after: int
    tokens_before: int
    counts: ProbeCounts
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        """``{"config", "tokensAfter", "ratio", "probes": {"total", "kept", "retention",
        "byKind"}}``, plus ``"error"`` when the compaction failed."""
        doc: dict[str, Any] = {
            "config": self.name,
            "tokensAfter": self.tokens_after,
            "ratio": share(self.tokens_after, self.tokens_before),
            "probes": self.counts.to_json(),
        }
        if self.error is not None:
            doc["error"] = self.error
        return doc


def compare_session(
    session: Session, result: FileEval, options: Any, original: Session | None = None
) -> list[Row]:
    """Run each configuration of ``options.compare`` on ``session`` (in memory).

    Args:
        session: the transcript as it is (each configuration compacts it).
        result: its evaluation (:func:`~compactctl.evaluate.job.evaluate_session`): its
            probes, and the ``as is`` row's tokens and counts, taken as they are.
        options: the :class:`~compactctl.evaluate.job.EvalOptions` (``compare``, and the
            ``encoding`` and ``context_window`` every configuration shares).
        original: the ``--against`` original: every ratio is of its messages' tokens, as
            the report's (``None``: the session's own messages).

    Returns:
        ``as is`` first, then one row per configuration, in order. A configuration whose
        summarizer failed has the ``as is`` numbers and its ``error``.

    Raises:
        UsageError: a configuration the compact layer refuses (``model=session`` on a log
            that records no model, a missing API key).
    """
    from compactctl.evaluate.job import prompt_sizes
    from compactctl.layers.options import CompactOptions
    from compactctl.layers.summary import CompactLayer

    source = original if original is not None else session
    originals = [e for e in source.events if isinstance(e, Message)]
    before, now, probes = result.tokens_before, result.tokens_after, result.probes
    rows = [Row("as is", now, before, result.counts)]
    base = {"force": True, "encoding": options.encoding, "context_window": options.context_window}
    for config in options.compare:
        opts = CompactOptions(**{**base, **dict(config.values)})
        layer = CompactLayer()
        plan = layer.plan(session, opts)
        if layer.failed is not None:
            rows.append(Row(config.name, now, before, rows[0].counts, str(layer.failed)))
            continue
        after = session.extended(plan.events).effective()
        _, tokens = prompt_sizes(originals, after, source.counter)
        counts = ProbeCounts.of(probes, Context(after).check(probes))
        rows.append(Row(config.name, tokens, before, counts))
    return rows


def compare_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The ``--compare`` rows side by side: tokens left, their share, retention, and the
    retention of each kind some configuration loses probes of (``--json`` has them all)."""
    from compactctl.app.render import table

    kinds = [
        k
        for k in (rows[0]["probes"]["byKind"] if rows else {})
        if any(r["probes"]["byKind"][k]["kept"] < r["probes"]["byKind"][k]["total"] for r in rows)
    ]
    body = []
    for r in rows:
        by = r["probes"]["byKind"]
        cells = [share(by[k]["kept"], by[k]["total"]) for k in kinds]
        name = r["config"] + (" (failed)" if "error" in r else "")
        body.append([name, r["tokensAfter"], r["ratio"], r["probes"]["retention"], *cells])
    return table(["configuration", "tokens", "ratio", "retention", *kinds], body)
