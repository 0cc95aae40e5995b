"""Micro compaction: what it keeps from an elided middle (errors, file:line references, test
results), its bounds, old screenshots as placeholders, and replay of version 1 events."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from compactctl.app.inspector import inspect_events
from compactctl.layers.micro import (
    _SALIENT,
    MicroParams,
    apply_micro,
    elide,
    plan_micro,
    plan_micro_view,
    salient_lines,
)
from compactctl.layers.summary import CompactOptions, plan_compact
from compactctl.media import image_tokens
from compactctl.model import CompactEvent, Event, Message, event_from_dict
from compactctl.replay import replay
from compactctl.tokens import TokenCounter, prompt_tokens
from tests.unit.test_media import b64, png

NOW = "2025-01-01T00:00:00Z"

MYPY_ERRORS = [
    f"src/pkg/mod{i}.py:{10 * i + 3}: error: Incompatible types [assignment]" for i in range(12)
]
PYTEST_TAIL = [
    "FAILED tests/test_parse.py::test_empty - AssertionError: assert 0 == 1",
    "=================== 1 failed, 41 passed in 2.31s ===================",
]
TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/app/src/parse.py", line 88, in parse',
    "    raise ValueError(msg)",
    "ValueError: unexpected token ')'",
]


def noise(n: int, seed: int = 0) -> list[str]:
    """``n`` lines of build chatter that match none of the salient patterns."""
    rnd = random.Random(seed)
    words = ["compiling", "module", "linking", "checking", "cache", "warm", "step", "done"]
    return [" ".join(rnd.choice(words) for _ in range(8)) for _ in range(n)]


def v2(**over: Any) -> dict[str, Any]:
    return {**MicroParams().replay_params(), **over}


def test_mypy_lines_from_the_middle_are_kept_verbatim():
    text = "\n".join(["$ mypy src", *noise(200, 1), *MYPY_ERRORS, *noise(200, 2), "exit 1"])
    out = elide(text, v2())
    assert len(out) < len(text) / 4
    for line in MYPY_ERRORS:
        assert line in out.splitlines()
    assert f"{len(MYPY_ERRORS)} lines of them kept" in out
    assert out.startswith("$ mypy src\n") and out.endswith("\nexit 1")
    # the chars it says it elided are the chars that left
    said = int(out.split("[... ", 1)[1].split(" chars", 1)[0])
    kept = sum(len(line) + 1 for line in MYPY_ERRORS)
    middle_start = out.index("\n[... ")
    head = out[:middle_start]
    tail = out[out.index("[...]\n") + len("[...]\n") :]
    assert said == len(text) - len(head) - len(tail) - kept


def test_tracebacks_and_test_summaries_are_kept():
    text = "\n".join([*noise(150, 3), *TRACEBACK, *noise(150, 4), *PYTEST_TAIL, *noise(150, 5)])
    kept, matched = salient_lines(text)
    assert kept == [*TRACEBACK, *PYTEST_TAIL]  # the frame's source line names a ValueError
    assert matched == 6
    go = [
        "--- FAIL: TestParse (0.00s)",
        "FAIL\texample.com/parse\t0.012s",
        "ok  \texample.com/lex\t0.004s",
    ]
    jest = [
        "Tests:       2 failed, 14 passed, 16 total",
        "Test Suites: 1 failed, 3 passed, 4 total",
    ]
    cargo = ["test result: FAILED. 3 passed; 1 failed; 0 ignored"]
    kept, _ = salient_lines("\n".join([*noise(20, 6), *go, *jest, *cargo]))
    assert kept == [*go, *jest, *cargo]
    assert salient_lines("\n".join(noise(500, 7))) == ([], 0)


def test_kept_lines_are_bounded_and_test_results_come_first():
    many = [f"lib/file{i}.c:{i}: error: implicit declaration of 'f{i}'" for i in range(300)]
    text = "\n".join([*many[:150], PYTEST_TAIL[1], *many[150:]])
    kept, matched = salient_lines(text, max_lines=40, max_chars=3000, line_chars=240)
    assert matched == 301
    assert len(kept) <= 40 and sum(len(k) + 1 for k in kept) <= 3000
    assert PYTEST_TAIL[1] in kept  # a test result outranks the errors around it
    assert kept == sorted(kept, key=text.index)  # in text order
    long_line = "src/x.py:1: error: " + "y" * 1000
    (cut,), _ = salient_lines(long_line, line_chars=240)
    assert len(cut) == 240 and cut.endswith("…")
    out = elide("\n".join(["start", *many, "end"]), v2())
    assert "40 of 284 matching lines of them kept" in out  # 16 lines are in the head and tail
    assert len(out) < 600 + 300 + 3000 + 200  # head, tail, kept lines, markers


def test_version_1_events_replay_as_they_were_written():
    text = "\n".join(["head", *noise(100), *MYPY_ERRORS, *noise(100), "tail"])
    old = {
        "version": 1,
        "minChars": 120,
        "headRatio": 0.2,
        "tailRatio": 0.1,
        "headMax": 600,
        "tailMax": 300,
    }
    out = elide(text, old)
    assert not any(line in out for line in MYPY_ERRORS)
    assert "chars elided ...]" in out
    shot = {"type": "image", "mediaType": "image/png", "data": b64(png(800, 600))}
    tool = event_from_dict(
        {"type": "message", "uuid": "t1", "role": "tool", "toolCallId": "c", "content": [shot]},
        turn=1,
    )
    assert isinstance(tool, Message)
    event = event_from_dict(
        {
            "type": "compact",
            "uuid": "k",
            "mode": "micro",
            "startTurnId": 1,
            "endTurnId": 1,
            "targets": ["t1"],
            "params": old,
            "timestamp": NOW,
        }
    )
    assert isinstance(event, CompactEvent)
    assert apply_micro([tool], event)[0].content == [shot]  # version 1 never touched images


def screenshot_session(turns: int, model: str = "claude-sonnet-4-5") -> list[Event]:
    """``turns`` turns, each a prompt, a screenshot tool call and its result: a 1280x800 PNG
    of about 6,400 base64 chars. The last prompt pastes one more screenshot itself."""
    rnd = random.Random(15)
    records: list[dict[str, Any]] = [{"type": "session", "uuid": "s", "model": model}]
    for t in range(1, turns + 1):
        shot = {
            "type": "image",
            "mediaType": "image/png",
            "data": b64(png(1280, 800, rnd.randbytes(1500))),
        }
        prompt: Any = f"check the page, step {t}"
        if t in (1, turns):
            prompt = [{"type": "text", "text": prompt}, shot]
        records += [
            {"type": "message", "uuid": f"u{t}", "role": "user", "content": prompt},
            {
                "type": "message",
                "uuid": f"a{t}",
                "role": "assistant",
                "content": "",
                "toolCalls": [{"id": f"c{t}", "name": "screenshot", "arguments": {}}],
            },
            {
                "type": "message",
                "uuid": f"t{t}",
                "role": "tool",
                "toolCallId": f"c{t}",
                "content": [{"type": "text", "text": f"screenshot {t} taken"}, shot],
            },
        ]
    out, turn = [], 0
    for r in records:
        turn += r.get("role") == "user"
        out.append(event_from_dict(r, turn=turn))
    return out


def _images(view: list[Message]) -> list[str]:
    return [
        m.uuid or ""
        for m in view
        if isinstance(m.content, list) and any(p.get("type") == "image" for p in m.content)
    ]


def test_old_screenshots_become_placeholders_in_tool_results_and_prompts():
    log = screenshot_session(4)
    event = plan_micro(log, MicroParams(), timestamp=NOW)
    assert event is not None
    # turns 1 and 2 are older than current - keep_turns: their images go, their text stays
    assert set(event.targets) == {"u1", "t1", "t2"}
    view = replay([*log, event])
    assert _images(view) == ["t3", "u4", "t4"]
    by_uuid = {m.uuid: m for m in view}
    n = image_tokens(1280, 800)
    placeholder = {"type": "text", "text": f"[image: 1280x800 png, {n} tokens, elided]"}
    assert by_uuid["t1"].content == [{"type": "text", "text": "screenshot 1 taken"}, placeholder]
    assert by_uuid["u1"].content == [
        {"type": "text", "text": "check the page, step 1"},
        placeholder,
    ]
    # the placeholder counts the image by the session provider's rule
    gpt = plan_micro(
        screenshot_session(4, "gpt-4o"), MicroParams(), timestamp=NOW, image_rule="openai"
    )
    assert gpt is not None and gpt.params["imageRule"] == "openai"
    assert str(image_tokens(1280, 800, "openai")) in str(replay([*log, gpt])[2].content)
    # a preserved tool keeps its images; the plan's view is the replay
    kept = plan_micro(log, MicroParams(preserve=("screenshot",)), timestamp=NOW)
    assert kept is not None and kept.targets == ["u1"]
    ev, after = plan_micro_view(log, replay(log), MicroParams(), timestamp=NOW)
    assert ev is not None and [m.content for m in after] == [m.content for m in view]


def test_200_old_screenshots_trigger_compaction_and_are_elided():
    log = screenshot_session(200)
    counter = TokenCounter("estimate")
    base64_chars = sum(
        len(p["data"])
        for e in log
        if isinstance(e, Message) and isinstance(e.content, list)
        for p in e.content
        if p.get("type") == "image"
    )
    assert base64_chars > 1_200_000  # 202 screenshots, about 1.3 MB of base64
    before = prompt_tokens(replay(log), counter)
    assert before > 202 * image_tokens(1280, 800) > 200_000 * 0.25  # past the micro trigger
    plan = plan_compact(log, CompactOptions(encoding="estimate"), now=lambda: NOW)
    report = plan.report
    assert report["trigger"] == "auto" and report["contextWindow"] == 200_000
    assert report["micro"]["targets"] == 198 + 1  # the tool results of turns 1-198, and u1
    view = replay(log + plan.events)
    assert _images(view) == ["t199", "u200", "t200"]
    after = prompt_tokens(view, counter)
    assert report["tokensAfter"] == after < before / 20  # 280,735 -> 11,090 tokens
    info = inspect_events(log + plan.events, path="shots.jsonl")
    assert info["tokens"] == prompt_tokens(replay(log), TokenCounter("cl100k_base"))
    assert info["effectiveTokens"] < info["tokens"] / 20


FRAGMENTS = [
    *MYPY_ERRORS[:2], *TRACEBACK, *PYTEST_TAIL, "E   assert 1 == 2", "ok  \tpkg/a\t0.1s", "PASS",
    "FAIL", "--- FAIL: TestX (0.0s)", "Tests:  1 failed", "Ran 3 tests in 0.1s", "OK",
    "Found 2 errors in 1 file", "    at run (src/app.js:10:5)", "\tat a.B.c(B.java:7)",
    "KeyError: 'x'", "fatal: not a git repository", "panic: boom", "3 passing", "x = 1",
    "compiling module", "", "  ", "==== 2 passed in 0.1s ====", "see https://h.io:8080/x",
    "password: hunter2", "Test", "=", "okay", "\r", "error", "résumé.txt:3 ok",
]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=30), st.sampled_from(["\n", "\r\n"]))
def test_the_candidate_search_finds_every_salient_line(lines: list[str], sep: str):
    """salient_lines equals a plain line-by-line search with the same patterns."""
    text = sep.join(lines)
    expected: dict[str, tuple[int, int, str]] = {}
    for pos, line in enumerate(text.split("\n")):
        line = line.rstrip()
        if line.strip() and line.strip() not in expected:
            rank = next((r for r, p in enumerate(_SALIENT) if p.search(line)), None)
            if rank is not None:
                expected[line.strip()] = (rank, pos, line)
    kept, matched = salient_lines(text, max_lines=1000, max_chars=10**6)
    assert matched == len(expected)
    assert kept == [line for _, pos, line in sorted(expected.values(), key=lambda v: v[1])]


_LINE_CHARS = [*"aeE rorxF.:(0123456789=-_/\t", "rror", "RROR", "Error", "xception", "fatal",
               "FATAL", "panic", "Traceback", 'File "', "E   ", "passed", "failed", "pending",
               "passing", " in ", "ok", "FAIL", "PASS", "OK", "Ran 3 tests", "Tests:", "---",
               "test result: ", "Found 1 error in ", "Success: no issues found", "é",
               "\r"]  # fmt: skip


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.sampled_from(FRAGMENTS), st.lists(st.sampled_from(_LINE_CHARS)).map("".join)))
def test_the_salient_rank_prefilters_change_no_verdict(line: str):
    """_salient_rank gives the first pattern of _SALIENT a line matches, as a plain search."""
    from compactctl.layers.micro import _salient_rank

    expected = next((r for r, p in enumerate(_SALIENT) if p.search(line)), None)
    assert _salient_rank(line) == expected


def _micro_log() -> list[Event]:
    log: list[Event] = []
    for turn in range(1, 6):
        log.append(
            ev({"type": "message", "uuid": f"u{turn}", "role": "user", "content": "go"}, turn)
        )
        call = {"id": f"c{turn}", "name": "bash", "arguments": {"command": "pytest"}}
        log.append(
            ev(
                {
                    "type": "message",
                    "uuid": f"a{turn}",
                    "role": "assistant",
                    "content": "",
                    "toolCalls": [call],
                },
                turn,
            )  # fmt: skip
        )
        out = "\n".join(["collecting", *noise(80, turn), *MYPY_ERRORS[:3], *noise(80, turn + 9)])
        log.append(
            ev(
                {
                    "type": "message",
                    "uuid": f"t{turn}",
                    "role": "tool",
                    "toolCallId": f"c{turn}",
                    "content": out,
                },
                turn,
            )  # fmt: skip
        )
    return log


def ev(data: dict[str, Any], turn: int) -> Event:
    return event_from_dict(data, turn=turn)


def test_a_replay_after_the_plan_reuses_its_elisions_and_gives_the_same_context():
    """apply_micro takes a planned event's elided contents (micro._PLANNED) only for the
    very event and the contents it planned: the replay is what eliding again gives."""
    from compactctl.layers import micro

    log = _micro_log()
    view = replay(log)
    event, after = plan_micro_view(log, view, MicroParams(), timestamp=NOW)
    assert event is not None and event.targets == ["t1", "t2", "t3"]
    assert id(event) in micro._PLANNED
    fresh = [m.content for m in replay([*log, event])]
    assert fresh == [m.content for m in after]
    micro._PLANNED.clear()
    assert [m.content for m in replay([*log, event])] == fresh  # elided again: the same
    # a target whose content differs from the planned one is elided from its own content
    event, _ = plan_micro_view(log, view, MicroParams(), timestamp=NOW)
    assert event is not None
    changed = [
        m.evolve(content=m.content.replace("collecting", "gathering"))
        if m.uuid == "t2" and isinstance(m.content, str)
        else m
        for m in view
    ]
    out = {m.uuid: m.content for m in apply_micro(changed, event)}
    assert isinstance(out["t2"], str) and out["t2"].startswith("gathering")
    assert out["t2"] == elide(changed[5].content, event.params)
    # an equal but other event (a copy read back from the log) is elided afresh
    copy = event_from_dict(dict(event.data))
    assert isinstance(copy, CompactEvent) and id(copy) not in micro._PLANNED
    assert [m.content for m in apply_micro(view, copy)] == fresh
