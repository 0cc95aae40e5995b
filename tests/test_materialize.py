"""``--materialize --as openai`` writes a context the Chat Completions API accepts."""

from __future__ import annotations

import orjson

from .conftest import run_cli


def _line(**d: object) -> bytes:
    return orjson.dumps({"type": "message", **d}) + b"\n"


def test_openai_materialize_leaves_out_unpaired_tool_messages():
    log = b"".join(
        [
            _line(uuid="u1", role="user", content="start"),
            # a tool result whose call is not in the transcript (a cut-off log)
            _line(uuid="t0", role="tool", toolCallId="lost", content="orphan output"),
            _line(
                uuid="a1",
                role="assistant",
                content="",
                toolCalls=[
                    {"id": "c1", "name": "bash", "arguments": {"command": "ls"}},
                    {"id": "c2", "name": "bash", "arguments": {"command": "pwd"}},
                ],
            ),
            _line(uuid="t1", role="tool", toolCallId="c1", content="a.txt"),
            # c2 never got a result
            _line(uuid="a2", role="assistant", content="", toolCalls=[{"id": "c3", "name": "x"}]),
            _line(uuid="u2", role="user", content="thanks"),
        ]
    )
    r = run_cli("rules", "-q", "--materialize", "--as", "openai", "-", input=log)
    assert r.returncode == 0, r.stderr
    msgs = [orjson.loads(x) for x in r.stdout.splitlines()]
    assert [(m["role"], m.get("tool_call_id")) for m in msgs] == [
        ("user", None),
        ("assistant", None),
        ("tool", "c1"),
        ("assistant", None),
        ("user", None),
    ]
    assert [c["id"] for c in msgs[1]["tool_calls"]] == ["c1"]  # c2 had no result
    assert "tool_calls" not in msgs[3] and msgs[3]["content"] == ""  # c3 had none either
    # the canonical materialization still shows the input as it is
    r = run_cli("rules", "-q", "--materialize", "-", input=log)
    assert [orjson.loads(x)["uuid"] for x in r.stdout.splitlines()] == [
        "u1",
        "t0",
        "a1",
        "t1",
        "a2",
        "u2",
    ]
