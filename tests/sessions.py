"""Test sessions from the shipped samples: their records, messages and probes, and bigger
sessions made by repeating varied turns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from tests.helpers import SAMPLES, write_jsonl


def load_records(name: str) -> list[dict[str, Any]]:
    """The records of ``fixtures/samples/<name>.canonical.jsonl``."""
    path = SAMPLES / f"{name}.canonical.jsonl"
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def load_messages(name: str) -> list[dict[str, Any]]:
    """The message events of a canonical sample; malformed lines and other types skipped."""
    messages = []
    for line in (SAMPLES / f"{name}.canonical.jsonl").read_bytes().split(b"\n"):
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(event, dict) and event.get("type") == "message":
            messages.append(event)
    return messages


def probes(name: str) -> list[dict[str, Any]]:
    """The sample's probes: facts a good effective context keeps."""
    return orjson.loads((SAMPLES / f"{name}.probes.json").read_bytes())


def grow(name: str, copies: int) -> list[dict[str, Any]]:
    """A long session: the sample's turns repeated ``copies`` times, ids made unique and the
    user text varied per copy (the system message and session header appear once)."""
    records = load_records(name)
    head = [r for r in records if r["type"] == "session" or r.get("role") == "system"]
    body = [r for r in records if r not in head]
    turns = max(r.get("turnId", 0) for r in body)
    out = list(head)
    for k in range(copies):
        for r in body:
            r2 = orjson.loads(orjson.dumps(r))
            r2["uuid"] = f"{r['uuid']}-{k}"
            if "turnId" in r2:
                r2["turnId"] = r["turnId"] + k * turns
            for c in r2.get("toolCalls", []):
                c["id"] = f"{c['id']}-{k}"
            if "toolCallId" in r2:
                r2["toolCallId"] = f"{r2['toolCallId']}-{k}"
            if r2.get("role") == "user" and k:
                r2["content"] = f"(round {k}) {r2['content']}"
            out.append(r2)
    return out


def nothing_to_report(tmp_path: Path) -> Path:
    """small-s1 with one summary replacing every message by "Nothing to report."."""
    records = load_records("small-s1")
    uuids = [r["uuid"] for r in records if r["type"] == "message"]
    summary = {"type": "summary", "uuid": "s-nothing", "replaces": uuids,
               "summaryText": "Nothing to report.", "lastSummarizedTurnId": 6,
               "timestamp": "2025-05-16T10:00:00Z"}  # fmt: skip
    return write_jsonl(tmp_path / "nothing.jsonl", [*records, summary])
