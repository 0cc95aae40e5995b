"""Building test sessions from the shipped samples (bigger ones by repeating varied turns)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from .conftest import SAMPLES


def load_records(name: str) -> list[dict[str, Any]]:
    """The records of ``fixtures/samples/<name>.canonical.jsonl``."""
    path = SAMPLES / f"{name}.canonical.jsonl"
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


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


def write(path: Path, records: list[dict[str, Any]]) -> Path:
    """Write records as JSONL."""
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path
