"""Undo: a RevertEvent that takes back the newest compaction run, or a named compaction.

``compactctl undo FILE [--event ID]`` appends one ``revert`` event (docs/design.md section 3,
"RevertEvent"); replay then skips the compact and summary events it names
(:func:`compactctl.replay.live_events`), so the effective context is the one before them.
Nothing already in the file changes.

Which events are taken back:

- ``--event ID``: that compact or summary event. A later summary that is not taken back and
  builds on it (an incremental summary or a tiers event naming it in ``replaces``) makes it
  refused: that one is to be undone first.
- no ``--event``: the newest compaction run, the newest compact or summary event and those
  just before it with no other event between and the same ``timestamp`` (the events one run
  appended: ``compact`` writes its micro event and its summary with one timestamp). Its
  events already taken back are left out; when all are, nothing is appended, so running
  ``undo`` twice takes back one run once. An older run is named with ``--event``.

A compaction planned after an undo gets a new uuid when its planned one is a reverted
event's (:func:`plan_live`), so ``compact`` after ``undo`` compacts again.
"""

from __future__ import annotations

import dataclasses
import uuid as uuidlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from compactctl.errors import UsageError
from compactctl.layers.base import EventLayer, LayerReport, Plan
from compactctl.layers.micro import NAMESPACE
from compactctl.layers.options import UndoOptions
from compactctl.model import CompactEvent, Event, RevertEvent, SummaryEvent, event_from_dict
from compactctl.replay import live_events, replay, reverted
from compactctl.tokens import prompt_tokens

if TYPE_CHECKING:
    from compactctl.session import Session

__all__ = ["UndoLayer", "UndoOptions", "UndoReport", "plan_live", "run_of"]

Compaction = CompactEvent | SummaryEvent


@dataclass
class UndoReport(LayerReport):
    """The undo layer's report.

    Attributes:
        path: the transcript. session_key: :func:`compactctl.session.session_key`.
        reverted: what the revert takes back, ``[{"uuid", "type", "mode", "line",
            "timestamp"}]`` (``mode``: a compact event's; ``None`` for a summary).
        revert: the uuid of the RevertEvent to append (``None``: nothing to append).
        tokens_before, tokens_after: the prompt estimate of the effective context before
            and after the revert, in tokens (the session's counter); equal when nothing is
            appended. tokens_saved: their difference (negative: an undo gives tokens back
            to the context), as every command's report has it.
        tokenizer: the encoding name or ``estimate``. reason: why nothing is appended.
    """

    path: str
    session_key: str
    reverted: list[dict[str, Any]] = field(default_factory=list)
    revert: str | None = None
    tokens_before: int = 0
    tokens_after: int = 0
    tokens_saved: int = 0
    tokenizer: str = ""
    reason: str | None = None

    @property
    def targets_count(self) -> int:
        return len(self.reverted) if self.revert else 0


def _compactions(log: Sequence[Event]) -> list[Compaction]:
    return [e for e in log if isinstance(e, (CompactEvent, SummaryEvent)) and e.uuid]


def run_of(log: Sequence[Event], newest: Compaction) -> list[Compaction]:
    """The compaction run ``newest`` ends: it and the compact and summary events just before
    it in ``log`` with no other event between and the same ``timestamp``, in file order."""
    i = next(k for k in range(len(log) - 1, -1, -1) if log[k] is newest)
    stamp = newest.data.get("timestamp")
    run = [newest]
    for e in reversed(log[:i]):
        if not isinstance(e, (CompactEvent, SummaryEvent)) or e.data.get("timestamp") != stamp:
            break
        if stamp is None or not e.uuid:
            break
        run.insert(0, e)
    return run


def _describe(e: Compaction) -> str:
    what = f"{e.type} event {e.uuid}" + (f" ({e.mode})" if isinstance(e, CompactEvent) else "")
    return what + (f", line {e.line}" if e.line else "")


class UndoLayer(EventLayer):
    """Plans the RevertEvent of ``compactctl undo`` (module docstring)."""

    name = "undo"

    def plan(self, session: Session, options: UndoOptions) -> Plan[UndoReport]:
        """Decide what to take back; nothing when it is taken back already (or there is no
        compaction).

        Raises:
            UsageError: ``options.event`` names no event of the file, or one that is not a
                compaction, or one a later summary builds on (undo that first).
        """
        log = session.events
        gone = reverted(log)
        compactions = _compactions(log)
        counter = session.counter
        before = prompt_tokens(session.effective(), counter)
        report = UndoReport(
            path=session.path,
            session_key=session.meta.key,
            tokens_before=before,
            tokens_after=before,
            tokenizer=session.meta.encoding,
        )
        if options.event is None:
            if not compactions:
                report.reason = "no compaction to undo"
                return Plan([], report)
            run = run_of(log, compactions[-1])
            targets = [e for e in run if e.uuid not in gone]
            if not targets:
                by = gone[run[-1].uuid or ""]
                report.reason = (
                    f"the newest compaction run ({', '.join(str(e.uuid) for e in run)}) was "
                    f"taken back already (revert {by}); name an older one with --event ID"
                )
                return Plan([], report)
        else:
            target = self._named(log, compactions, options.event)
            if target.uuid in gone:
                report.reason = (
                    f"{_describe(target)} was taken back already (revert {gone[target.uuid or '']})"
                )
                return Plan([], report)
            targets = [target]
        self._check_later(log, gone, targets)
        uuids = [str(e.uuid) for e in targets]
        revert = event_from_dict(
            {
                "type": "revert",
                "uuid": str(uuidlib.uuid5(NAMESPACE, "revert:" + ",".join(uuids))),
                "targets": uuids,
                "timestamp": self.now(),
            }
        )
        report.tokens_after = prompt_tokens(replay([*log, revert]), counter)
        report.tokens_saved = report.tokens_before - report.tokens_after
        report.revert = revert.uuid
        report.reverted = [
            {
                "uuid": e.uuid,
                "type": e.type,
                "mode": e.mode if isinstance(e, CompactEvent) else None,
                "line": e.line,
                "timestamp": e.data.get("timestamp"),
            }
            for e in targets
        ]
        return Plan([revert], report)

    @staticmethod
    def _named(log: Sequence[Event], compactions: list[Compaction], uuid: str) -> Compaction:
        found = next((e for e in compactions if e.uuid == uuid), None)
        if found is not None:
            return found
        other = next((e for e in log if e.uuid == uuid), None)
        if other is not None:
            raise UsageError(
                f"--event {uuid} is a {other.type or 'untyped'} event (line {other.line}); "
                "undo takes back compact and summary events only"
            )
        known = ", ".join(str(e.uuid) for e in compactions[-5:]) or "none"
        raise UsageError(
            f"--event {uuid}: no compact or summary event has that uuid (the newest: {known}; "
            "compactctl inspect --json FILE lists them under history)"
        )

    @staticmethod
    def _check_later(log: Sequence[Event], gone: dict[str, str], targets: list[Compaction]) -> None:
        """Refuse to take back a summary a later live summary builds on (it names it in
        ``replaces``): replay would show that summary's messages twice, once as text."""
        names = {e.uuid for e in targets}
        for e in log:
            if (
                isinstance(e, SummaryEvent)
                and e.uuid not in gone
                and e.uuid not in names
                and names.intersection(e.replaces)
            ):
                built_on = next(u for u in e.replaces if u in names)
                raise UsageError(
                    f"the later summary {e.uuid} (line {e.line}) builds on {built_on}: "
                    f"undo it first (compactctl undo --event {e.uuid} FILE)"
                )


L = TypeVar("L", bound=LayerReport)


def plan_live(plan: Callable[[Session], Plan[L]], session: Session) -> Plan[L]:
    """``plan(session)`` over the session's live events (:func:`compactctl.replay.live_events`:
    the reverted compactions and the reverts left out), with each planned event whose uuid
    is a reverted event's given a new one (and the plan's references to it renamed), so
    that what ``undo`` took back can be compacted again; ``session`` itself is unchanged.

    Without a RevertEvent in the log this is ``plan(session)``.
    """
    log = session.events
    if not any(isinstance(e, RevertEvent) for e in log):
        return plan(session)
    live = live_events(log)
    taken = {e.uuid for e in log if e.uuid} - {e.uuid for e in live if e.uuid}
    out = plan(session.with_events(live))
    renames: dict[str, str] = {}
    for e in out.events:
        if e.uuid in taken:
            new = e.uuid
            while new in taken or new in renames.values():
                new = str(uuidlib.uuid5(NAMESPACE, "after-revert:" + new))
            renames[e.uuid] = new
    if not renames:
        return out
    events = []
    for e in out.events:
        changes: dict[str, Any] = {}
        if e.uuid in renames:
            changes["uuid"] = renames[e.uuid]
        for key in ("replaces", "targets"):
            value = e.data.get(key)
            if isinstance(value, list) and any(isinstance(v, str) and v in renames for v in value):
                changes[key] = [renames.get(v, v) if isinstance(v, str) else v for v in value]
        events.append(e.evolve(**changes) if changes else e)
    for f in dataclasses.fields(out.report):
        value = getattr(out.report, f.name)
        if isinstance(value, dict) and value.get("uuid") in renames:
            setattr(out.report, f.name, {**value, "uuid": renames[value["uuid"]]})
    return Plan(events, out.report)
