"""Hypothesis strategies for canonical event streams (sessions with tool blocks)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from compactctl.model import Event, event_from_dict

TEXT = st.text(
    alphabet=st.sampled_from(list("abc xyz\n.,:-#|`*你好，。😀")), min_size=0, max_size=400
)


@st.composite
def sessions(draw: st.DrawFn, max_turns: int = 6) -> list[Event]:
    """A session: turns of user message, assistant messages with tool calls and results."""
    events: list[Event] = []
    n = 0

    def add(data: dict[str, Any], turn: int) -> None:
        nonlocal n
        n += 1
        data = {"type": "message", "uuid": f"m{n}", **data}
        events.append(event_from_dict(data, turn=turn))

    if draw(st.booleans()):
        add({"role": "system", "content": "sys"}, 0)
    for turn in range(1, draw(st.integers(1, max_turns)) + 1):
        add({"role": "user", "content": draw(TEXT)}, turn)
        for _ in range(draw(st.integers(0, 3))):
            k = draw(st.integers(0, 3))
            calls = [
                {
                    "id": f"c{n}-{j}",
                    "name": draw(st.sampled_from(["bash", "read_file"])),
                    "arguments": {"path": "a.py"},
                }
                for j in range(k)
            ]
            data: dict[str, Any] = {"role": "assistant", "content": draw(TEXT)}
            if calls:
                data["toolCalls"] = calls
            add(data, turn)
            for c in calls:
                add(
                    {
                        "role": "tool",
                        "toolCallId": c["id"],
                        "toolName": c["name"],
                        "content": draw(TEXT),
                    },
                    turn,
                )
    return events


@st.composite
def logs_with_reductions(draw: st.DrawFn) -> list[Event]:
    """A session followed (and interleaved) by summary and micro events on random targets."""
    events = draw(sessions())
    out = list(events)
    uuids = [e.uuid for e in events]
    prior: str | None = None
    for i in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["summary", "micro"]))
        picked = draw(st.lists(st.sampled_from(uuids), max_size=len(uuids), unique=True))
        if kind == "summary":
            replaces = picked + ([prior] if prior and draw(st.booleans()) else [])
            uuid = f"s{i}"
            out.append(
                event_from_dict(
                    {
                        "type": "summary",
                        "uuid": uuid,
                        "replaces": replaces,
                        "summaryText": f"summary {i}",
                        "lastSummarizedTurnId": 1,
                    }
                )
            )
            prior = uuid
        else:
            out.append(
                event_from_dict(
                    {
                        "type": "compact",
                        "uuid": f"k{i}",
                        "mode": "micro",
                        "targets": picked,
                        "params": {
                            "minChars": 10,
                            "headRatio": 0.2,
                            "tailRatio": 0.1,
                            "headMax": 50,
                            "tailMax": 20,
                        },
                    }
                )
            )
    return out
