"""The context window decision (session.context_window): override, recorded, model table,
Claude's 200k and 1M windows, and the stated default for an unknown model, with a warning."""

from __future__ import annotations

import warnings
from pathlib import Path

import orjson
import pytest

from compactctl.errors import CompactWarning
from compactctl.formats.reader import load
from compactctl.model import SessionEvent
from compactctl.session import (
    CLAUDE_LONG_WINDOW,
    CLAUDE_WINDOW,
    DEFAULT_CONTEXT_WINDOW,
    Session,
    context_window,
)
from compactctl.tokens import context_window_for


def session(**data: object) -> SessionEvent:
    return SessionEvent({"type": "session", "uuid": "s", **data})


def test_an_unknown_model_gets_the_default_window_with_a_warning():
    with pytest.warns(CompactWarning) as caught:
        assert context_window(None, session(model="acme-coder-7b"), "acme-coder-7b") == 128_000
    (w,) = caught
    assert str(w.message) == (
        "model 'acme-coder-7b' has no known context window: assuming a context window of "
        "128,000 tokens (pass --context-window N to set it)"
    )
    assert DEFAULT_CONTEXT_WINDOW == 128_000


def test_known_windows_say_nothing():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert context_window(None, None, "gpt-4o") == context_window_for("gpt-4o") == 128_000
        assert context_window(None, session(contextWindow=32_000), "acme") == 32_000
        assert context_window(4_000, session(contextWindow=32_000), "gpt-4o") == 4_000
        # a dated name the table lacks falls back to its undated name
        assert context_window_for("gpt-4o-2099-01-01") is None
        assert context_window(None, None, "gpt-4o-2099-01-01") == 128_000
        # a Claude model the table lacks has Claude's standard window
        assert context_window_for("claude-opus-4-1-20250805") is None
        assert context_window(None, None, "claude-opus-4-1-20250805") == CLAUDE_WINDOW


def test_a_claude_session_past_200k_ran_on_the_1m_window():
    model = "claude-sonnet-4-5-20250929"
    assert context_window_for(model) == 200_000
    assert context_window(None, session(peakPromptTokens=150_000), model) == CLAUDE_WINDOW
    assert context_window(None, session(peakPromptTokens=230_000), model) == CLAUDE_LONG_WINDOW
    assert context_window(None, None, "claude-sonnet-4-5[1m]") == CLAUDE_LONG_WINDOW
    # an explicit window still wins, and a non-Claude model is not moved
    assert (
        context_window(None, session(peakPromptTokens=230_000, contextWindow=200_000), model)
        == 200_000
    )
    assert context_window(None, session(peakPromptTokens=230_000), "gpt-4o") == 128_000


def _claude_code_file(path: Path, prompts: list[int]) -> Path:
    """A Claude Code session file whose assistant responses report these prompt sizes
    (split over input, cache-read and cache-creation tokens, as the API reports them)."""
    lines = []
    parent = None
    for i, size in enumerate(prompts):
        u, a = f"u{i}", f"a{i}"
        lines.append(
            {
                "type": "user",
                "uuid": u,
                "parentUuid": parent,
                "sessionId": "S",
                "timestamp": "2025-01-01T00:00:00Z",
                "message": {"role": "user", "content": f"step {i}"},
            }
        )
        usage = {
            "input_tokens": 10,
            "cache_read_input_tokens": size - 110,
            "cache_creation_input_tokens": 100,
            "output_tokens": 50,
        }
        lines.append(
            {
                "type": "assistant",
                "uuid": a,
                "parentUuid": u,
                "sessionId": "S",
                "timestamp": "2025-01-01T00:00:01Z",
                "message": {
                    "id": f"m{i}",
                    "role": "assistant",
                    "model": "claude-sonnet-4-5",
                    "content": [{"type": "text", "text": "ok"}],
                    "usage": usage,
                },
            }
        )
        parent = a
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in lines))
    return path


def test_claude_code_usage_decides_the_window(tmp_path: Path):
    big = _claude_code_file(tmp_path / "big.jsonl", [90_000, 240_000, 120_000])
    fmt, events = load(str(big))
    (head,) = [e for e in events if isinstance(e, SessionEvent)]
    assert fmt == "claude-code" and head.peak_prompt_tokens == 240_000
    assert Session.open(str(big)).meta.context_window == CLAUDE_LONG_WINDOW
    small = _claude_code_file(tmp_path / "small.jsonl", [90_000, 150_000])
    assert Session.open(str(small)).meta.context_window == CLAUDE_WINDOW
