"""The Layer protocol: ``plan(session, options) -> Plan``.

A layer reads a :class:`~compactctl.session.Session` and decides which events to append
(a CompactEvent or a SummaryEvent); it never writes. rules, dedup, micro, summary and tiers
implement it (:mod:`compactctl.layers`); the library filters (``rules()``, ``dedup()``,
``micro()``) and the per-file jobs of the commands (:mod:`compactctl.app.jobs`) are built on
it, and layers compose: each one plans over the session plus the events planned before it
(:func:`plan_layers`).

Every report is a dataclass with a common core (:class:`LayerReport`: the messages a layer
targets and the tokens it saves); :meth:`LayerReport.to_json` gives the camelCase dict the
commands print with ``--json``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from compactctl.model import Event

if TYPE_CHECKING:
    from compactctl.session import Session
    from compactctl.tokens import TokenCounter

__all__ = [
    "EventLayer",
    "Layer",
    "LayerReport",
    "Plan",
    "camel",
    "internal",
    "plan_events",
    "plan_layers",
]


def camel(name: str) -> str:
    """A snake_case field name as its camelCase JSON key.

    >>> camel("tokens_before"), camel("targets")
    ('tokensBefore', 'targets')
    """
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _json(value: Any) -> Any:
    if isinstance(value, LayerReport):
        return value.to_json()
    return value


@dataclass
class LayerReport:
    """The report of one layer on one session (subclassed per layer).

    The JSON form (:meth:`to_json`) has one camelCase key per field, in field order; a
    field whose metadata says ``{"json": False}`` is kept out of it, and one that says
    ``{"omit_none": True}`` is left out while it is ``None``.
    """

    @property
    def targets_count(self) -> int:
        """Messages (or summaries) this layer changes; 0 when it would append nothing."""
        return 0

    @property
    def tokens_saved_count(self) -> int:
        """Prompt tokens the layer's events save (by the session's counter): the report's
        ``tokens_saved`` field where it has one (rules, dedup), else 0 unless the layer says
        otherwise."""
        saved = getattr(self, "tokens_saved", 0)
        return saved if isinstance(saved, int) else 0

    def to_json(self) -> dict[str, Any]:
        """The report as printed by ``--json`` (camelCase keys, field order)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if not f.metadata.get("json", True):
                continue
            value = getattr(self, f.name)
            if value is None and f.metadata.get("omit_none"):
                continue
            out[camel(f.name)] = _json(value)
        return out


def internal(default: Any = None) -> Any:
    """A report field kept out of :meth:`LayerReport.to_json` (used by the jobs only)."""
    return field(default=default, metadata={"json": False})


R = TypeVar("R", bound=LayerReport, covariant=True)
O = TypeVar("O", contravariant=True)  # noqa: E741


@dataclass
class Plan(Generic[R]):
    """What a layer would append to a session, and its report.

    Attributes:
        events: new events in append order (empty: nothing to do).
        report: the layer's typed report.
    """

    events: list[Event]
    report: R


class Layer(Protocol[O]):
    """A compaction layer: reads a session, plans events, writes nothing.

    ``name`` is the layer's name on the command line and in ``--layers``.
    """

    name: str

    def plan(self, session: Session, options: O) -> Plan[LayerReport]:
        """Decide what to append to ``session``; never changes it.

        Raises:
            CompactError: a subclass carrying the exit code (bad options, a failed model).
        """
        ...


class EventLayer:
    """Base of the layers that stamp their events with the time (all but compact, whose
    ``now`` comes with its other collaborators).

    Args:
        now: the clock for the events' timestamps (RFC 3339 UTC); tests pass a fixed one.
    """

    name: str = ""

    def __init__(self, now: Callable[[], str] | None = None) -> None:
        if now is None:
            from compactctl.timeutil import now_rfc3339

            now = now_rfc3339
        self.now = now


def plan_events(
    layer: Layer[O], events: Iterable[Event], options: O, counter: TokenCounter | None = None
) -> tuple[Event | None, dict[str, Any]]:
    """The library form of a layer that plans at most one event (rules, dedup): plan it over
    a session built from ``events``.

    Args:
        layer: the layer, with its clock.
        events: the whole session (held in memory to replay it).
        options: the layer's options.
        counter: counts tokens (``None``: the chars-based estimate).

    Returns:
        ``(event, report)``: the event to append (``None`` when there is nothing to do) and
        the report's :meth:`LayerReport.to_json`.

    Raises:
        what ``layer.plan`` raises.
    """
    from compactctl.session import Session
    from compactctl.tokens import TokenCounter

    session = Session.from_events(events, counter=counter or TokenCounter("estimate"))
    plan = layer.plan(session, options)
    return (plan.events[0] if plan.events else None), plan.report.to_json()


def plan_layers(
    session: Session, steps: Sequence[tuple[Layer[Any], Any]]
) -> list[Plan[LayerReport]]:
    """Run layers left to right over one session, each over the events planned before it.

    Each layer sees a session whose events are the original log plus every earlier layer's
    events (same path, format, identity and overrides; its token counter is shared, so a
    text counted once is not counted again), without the compactions an ``undo`` took back
    (:func:`~compactctl.layers.undo.plan_live`).

    Returns:
        One plan per step, in order.
    """
    from compactctl.layers.undo import plan_live

    plans: list[Plan[LayerReport]] = []
    current = session
    for layer, options in steps:
        plan = plan_live(functools.partial(layer.plan, options=options), current)
        plans.append(plan)
        if plan.events:
            current = current.extended(plan.events)
    return plans
