"""One pass over several layers: ``compact --layers rules,dedup,micro,summary,tiers``.

MoonHub's compactor is one pipeline, rules -> dedup -> summary -> tiers (docs/design.md
sections 8 and 9); compactctl adds micro compaction before the summary, as ``compact`` runs
it. :func:`plan_onepass` runs the layers the user names, in that order, over one
:class:`~compactctl.session.Session` (one parse, one token counter): each layer plans on the
session as the layers before it left it (their events applied in memory,
:meth:`~compactctl.session.Session.extended`, never the file read again), and the events of
all of them are appended as one batch. Each layer's events are the ones its own command
would append after the commands before it, so replay and the per-layer report are those of
``rules; dedup; compact; tiers`` run one after the other.

``micro`` and ``summary`` are the two steps of the compact layer
(:class:`~compactctl.layers.summary.CompactLayer`): both named, it runs as ``compact`` does
(micro, then the summary, the 5% rule over both); ``micro`` alone is ``compact
--micro-only``, ``summary`` alone ``compact --no-micro``. Their rows in the report split the
compact layer's events: the micro CompactEvent that comes before the summary, then the rest.

Sizes: every row's tokens come from the session's shared
:class:`~compactctl.tokens.PromptSizes`, so a message is sized once over the whole pass and
a layer's change re-counts only the messages it changed.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from compactctl.errors import UsageError
from compactctl.layers.options import CompactOptions, DedupOptions, RulesOptions, TiersOptions
from compactctl.model import Event

if TYPE_CHECKING:
    from compactctl.layers.base import LayerReport
    from compactctl.layers.summary import CompactLayer
    from compactctl.session import Session

__all__ = [
    "EARLY_IMPORT_MIN_BYTES",
    "LAYER_ORDER",
    "LayerRow",
    "OnePassOptions",
    "OnePassPlan",
    "parse_layers",
    "plan_onepass",
]

LAYER_ORDER = ("rules", "dedup", "micro", "summary", "tiers")
"""The names ``--layers`` takes, in the order they run (``all``: every one)."""


def parse_layers(text: str) -> tuple[str, ...]:
    """The layer names of a ``--layers`` value: comma-separated names of
    :data:`LAYER_ORDER`, in that order, each once; ``all`` for every layer.

    Raises:
        UsageError: an unknown, repeated or out-of-order name, none, or ``all`` with others
            (exit 2; the message lists the valid names).

    >>> parse_layers("all") == LAYER_ORDER, parse_layers("rules, summary")
    (True, ('rules', 'summary'))
    """
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    valid = f"valid names, in their order: {','.join(LAYER_ORDER)} (or all)"
    if names == ("all",):
        return LAYER_ORDER
    if "all" in names:
        raise UsageError(f"--layers: all names every layer and stands alone, not in {text!r}")
    unknown = [n for n in names if n not in LAYER_ORDER]
    if unknown or not names:
        what = f"unknown layer {unknown[0]!r}" if unknown else "no layer named"
        raise UsageError(f"--layers: {what}; {valid}")
    if len(set(names)) != len(names):
        raise UsageError(f"--layers: a layer named twice in {text!r}; {valid}")
    ranks = [LAYER_ORDER.index(n) for n in names]
    if ranks != sorted(ranks):
        raise UsageError(
            f"--layers: {text!r} is out of order; the layers run as MoonHub's compactor "
            f"chains them: {valid}"
        )
    return names


@dataclass(frozen=True)
class OnePassOptions:
    """The options of one pass: which layers, and each one's options.

    Attributes:
        layers: names from :data:`LAYER_ORDER`, in that order, or ``("all",)``; checked and
            normalised by :func:`parse_layers` (a comma-separated string is taken too).
        rules, dedup, compact, tiers: each layer's options; ``compact`` holds micro's
            (``compact.micro``) and the summary's, and its ``micro_only`` /
            ``micro_enabled`` are set from ``layers`` (:meth:`compact_options`).

    Raises:
        UsageError: an unknown layer, one named twice, none, or the layers out of order.
    """

    layers: tuple[str, ...] = LAYER_ORDER
    rules: RulesOptions = field(default_factory=RulesOptions)
    dedup: DedupOptions = field(default_factory=DedupOptions)
    compact: CompactOptions = field(default_factory=CompactOptions)
    tiers: TiersOptions = field(default_factory=TiersOptions)

    def __post_init__(self) -> None:
        layers: Any = self.layers  # a str from a library caller, though typed as a tuple
        text = layers if isinstance(layers, str) else ",".join(layers)
        object.__setattr__(self, "layers", parse_layers(text))

    def compact_options(self) -> CompactOptions | None:
        """The compact layer's options for the micro and summary steps named (``None``:
        neither is): ``micro`` alone is ``--micro-only``, ``summary`` alone ``--no-micro``."""
        micro, summary = "micro" in self.layers, "summary" in self.layers
        if not (micro or summary):
            return None
        if micro and summary:
            return self.compact
        if micro:
            return replace(self.compact, micro_only=True, micro_enabled=True)
        return replace(self.compact, micro_only=False, micro_enabled=False)


@dataclass
class LayerRow:
    """One layer's numbers in a pass (tokens of the prompt estimate, by the session's
    counter).

    Attributes:
        layer: its name (:data:`LAYER_ORDER`).
        events: the events it appends.
        tokens_before, tokens_after: the prompt estimate before and after its events.
        report: its own report (``--json`` of its command: ``rules``, ``dedup``,
            ``compact``, ``tiers``; the micro row of a compact run has the micro part).
    """

    layer: str
    events: list[Event]
    tokens_before: int
    tokens_after: int
    report: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        """``{"layer", "events", "tokensBefore", "tokensAfter", "tokensSaved", "report"}``."""
        return {
            "layer": self.layer,
            "events": len(self.events),
            "tokensBefore": self.tokens_before,
            "tokensAfter": self.tokens_after,
            "tokensSaved": self.tokens_before - self.tokens_after,
            "report": self.report,
        }


@dataclass
class OnePassPlan:
    """What one pass appends, and its report.

    Attributes:
        events: every layer's events, in layer order (one batch).
        rows: one :class:`LayerRow` per layer run.
        reports: each layer's typed report by name (the compact layer's under
            ``summary``, or ``micro`` when it ran alone), for the store.
        tokens_before, tokens_after: the prompt estimate before the first layer and after
            the last one.
        session: the session after every layer's events (in memory).
        duration_ms: planning time of the whole pass, milliseconds.
    """

    events: list[Event]
    rows: list[LayerRow]
    reports: dict[str, LayerReport]
    tokens_before: int
    tokens_after: int
    session: Session
    duration_ms: int = 0


EARLY_IMPORT_MIN_BYTES = 8 << 20
"""File size (8 MiB) from which :func:`plan_onepass` imports dedup's numpy before the rules
run: on the 32 MB bench session (23M characters of payloads) the rules wait 0.5 s or more
for the counts of the messages they change while the prefetch counts the rest, so the
import (0.1-0.3 s) fits in that wait; below, it would only come earlier."""


def _counting_waits(session: Session, messages: int, dedup: DedupOptions) -> bool:
    """Whether the rules will wait for counts long enough to import numpy meanwhile, and
    dedup will need it: exact counts, a file of :data:`EARLY_IMPORT_MIN_BYTES` or more, and
    at least ``dedup.lsh_min_items`` messages (:func:`compactctl.layers.similarity.find_duplicates`
    imports numpy from there, given enough text)."""
    identity = session.identity
    return (
        not session.counter.is_estimate
        and identity is not None
        and identity.size >= EARLY_IMPORT_MIN_BYTES
        and messages >= dedup.lsh_min_items
    )


def plan_onepass(
    session: Session,
    options: OnePassOptions,
    *,
    compact_layer: CompactLayer | None = None,
    now: Callable[[], str] | None = None,
) -> OnePassPlan:
    """Plan the layers of ``options.layers`` over ``session`` in one pass.

    Args:
        session: the transcript, opened once.
        options: the layers and their options.
        compact_layer: the compact layer to use (its summarizer, breaker and clock; ``None``:
            a default one). After the pass its ``failed`` says whether summarization failed.
        now: the clock of the run (``None``: the compact layer's); it is read once, and every
            layer's events carry that one timestamp (``compact_layer.now`` is set to it).

    Returns:
        The :class:`OnePassPlan`. When summarization fails (``compact_layer.failed``), the
        pass stops there: its plan holds the layers before it, and the caller appends
        nothing (one batch: all or none).

    Raises:
        UsageError, SummaryFormatError, ValueError: as the layers raise them.
    """
    from compactctl.tokens import COUNT_PROCESS_MIN_BYTES, message_payload

    started = time.monotonic()
    first = current = session
    # the session's payloads are counted on background threads while the layers are
    # imported and plan (their Python work; tiktoken releases the GIL): the sizes below
    # find them cached
    view = session.effective()
    identity = session.identity
    session.counter.prefetch(
        lambda: [message_payload(m.data) for m in view],
        child=identity is not None and identity.size >= COUNT_PROCESS_MIN_BYTES,
    )

    from compactctl.layers.dedup import DedupLayer
    from compactctl.layers.rules import RulesLayer
    from compactctl.layers.summary import CompactLayer
    from compactctl.layers.tiers import TiersLayer
    from compactctl.layers.undo import plan_live

    if "dedup" in options.layers and _counting_waits(session, len(view), options.dedup):
        # dedup's similarity search imports numpy for this many texts (0.1-0.3 s): imported
        # now, it takes the place of part of the rules' wait for their counts
        import numpy  # noqa: F401

    compact = compact_layer or CompactLayer()
    # one run, one timestamp on every layer's events: ``undo`` takes a run back whole
    stamp = (now or compact.now)()
    now = compact.now = lambda: stamp
    # each row's sizes are taken after the last layer: a layer that needs no count (dedup)
    # does not wait for the prefetch meanwhile; the sessions hold their contexts till then
    rows: list[tuple[str, list[Event], Session, Session, dict[str, Any]]] = []
    reports: dict[str, LayerReport] = {}
    events: list[Event] = []

    def add(name: str, new: Sequence[Event], report: dict[str, Any]) -> None:
        nonlocal current
        before = current
        if new:
            current = current.extended(new)
            # the messages this layer made are sized at the end: counted meanwhile
            current.sizes.count_ahead(current.effective())
        rows.append((name, list(new), before, current, report))
        events.extend(new)

    steps: list[tuple[str, Any, Any]] = [
        ("rules", RulesLayer(now), options.rules),
        ("dedup", DedupLayer(now), options.dedup),
        ("compact", compact, options.compact_options()),
        ("tiers", TiersLayer(now), options.tiers),
    ]
    for name, layer, opts in steps:
        if opts is None or (name != "compact" and name not in options.layers):
            continue
        # over the live log: what an undo took back is planned again (plan_live is plain
        # ``layer.plan`` on a log without a RevertEvent)
        plan = plan_live(functools.partial(layer.plan, options=opts), current)
        if name != "compact":
            reports[name] = plan.report
            add(name, plan.events, plan.report.to_json())
            continue
        if compact.failed is not None:
            break
        report = plan.report.to_json()
        if "summary" not in options.layers:
            reports["micro"] = plan.report
            add("micro", plan.events, report)
            continue
        reports["summary"] = plan.report
        if "micro" in options.layers:
            # the micro CompactEvent, first when there is one, is micro's; the summary and
            # the kept tail's micro event are the summary's
            head = plan.events[:1] if plan.report.micro else []
            add("micro", head, {"micro": report.get("micro")})
            add("summary", plan.events[len(head) :], report)
        else:
            add("summary", plan.events, report)
    return OnePassPlan(
        events=events,
        rows=[
            LayerRow(name, new, before.prompt_estimate(), after.prompt_estimate(), report)
            for name, new, before, after, report in rows
        ],
        reports=reports,
        tokens_before=first.prompt_estimate(),
        tokens_after=current.prompt_estimate(),
        session=current,
        duration_ms=int((time.monotonic() - started) * 1000),
    )
