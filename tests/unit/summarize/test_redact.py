"""Secret redaction: each kind caught; the literal prefilters never change the result."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactctl.summarize.redact import redact, redact_messages, redact_value
from tests.helpers import SAMPLES

SECRETS = [
    ("sk-ant-" + "a1" * 15, "anthropic-key"),
    ("sk-proj-" + "B2" * 15, "openai-key"),
    ("sk_live_" + "c3" * 10, "stripe-key"),
    ("AKIA" + "D4E5" * 4, "aws-access-key"),
    ("AKIAQZ7XK2M4P9R3TW6B", "aws-access-key"),  # digits outside base32: a new user's fake key
    ("ghp_" + "f6" * 20, "github-token"),
    ("xoxb-" + "1234567890ab", "slack-token"),
    ("AIza" + "G7h8" * 8 + "abc", "google-api-key"),
    ("Authorization: BEARER " + "tok" * 8, "bearer-token"),
    ("postgres://admin:s3cretpw@db/x", "url-password"),
    ("API_KEY=" + "zz" * 6, "assigned-secret"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----", "private-key"),
]


def _reference(text: str) -> str:
    """Every rule, no prefilter: what redact() must equal."""
    return redact(text, prefilter=False)


def test_each_kind_is_redacted():
    for secret, kind in SECRETS:
        out = redact(f"before {secret} after")
        assert f"[REDACTED:{kind}]" in out, (kind, out)
        assert out == _reference(f"before {secret} after")


def test_prefilters_agree_with_the_patterns_on_the_samples():
    for path in SAMPLES.glob("*.jsonl"):
        text = path.read_text("utf-8", "replace")
        assert redact(text) == _reference(text), path.name


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from([s for s, _ in SECRETS] + ["word", " ", "\n", "Key: ", "x" * 8]),
        max_size=12,
    )
)
def test_prefilters_agree_on_generated_text(parts):
    text = "".join(parts)
    assert redact(text) == _reference(text)


def test_letters_that_case_fold_onto_ascii_do_not_hide_a_secret():
    """``re.IGNORECASE`` matches ſ as s, the Kelvin sign as k and İ/ı as i; ``str.lower``
    does not, so the lower-case shortcut alone would have missed these."""
    for text in (
        "paſſword=hunter2222",
        "client_ſecret: abcdefgh12345678",
        "API_\u212aEY=abcdefghijklmnop",
        "Authorization: Bearer abcdefghijklmnop1234 and \u0130",
        "tok\u0131n=" + "q" * 12,
    ):
        assert redact(text) == _reference(text), text
    assert "[REDACTED:assigned-secret]" in redact("paſſword=hunter2222")


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["pa", "ss", "\u017f", "word", "=", ": ", "se", "cret", "\u212a", "ey", "to", "ken"]
            + ["\u0130", "\u0131", "hunter2222", "x" * 8, " ", "\n"]
        ),
        max_size=14,
    )
)
def test_prefilters_agree_with_case_folding_letters(parts):
    text = "".join(parts)
    assert redact(text) == _reference(text)


TOK = "R11opaqueTok3n0987654321abcdef"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # the header form, as before: the reference the quoted forms match
        (f"Authorization: Bearer {TOK}", "Authorization: [REDACTED:bearer-token]"),
        ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "Authorization: Basic [REDACTED:basic-auth]"),
        # JSON, a Python repr (a traceback's headers), YAML, JSON inside a JSON string
        (f'{{"Authorization": "Bearer {TOK}"}}', '{"Authorization": "[REDACTED:bearer-token]"}'),
        (
            f"sent headers {{'Authorization': 'Bearer {TOK}'}}",
            "sent headers {'Authorization': '[REDACTED:bearer-token]'}",
        ),
        (f'Authorization: "Bearer {TOK}"', 'Authorization: "[REDACTED:bearer-token]"'),
        (
            f'{{"args": "{{\\"Authorization\\": \\"Bearer {TOK}\\"}}"}}',
            '{"args": "{\\"Authorization\\": \\"[REDACTED:bearer-token]\\"}"}',
        ),
        (
            '"authorization": "Basic dXNlcjpwYXNzd29yZA=="',
            '"authorization": "Basic [REDACTED:basic-auth]"',
        ),
        (
            '"Authorization": "Token abc123def456"',
            '"Authorization": "Token [REDACTED:auth-header]"',
        ),
        (
            f'headers["Proxy-Authorization"] = "Bearer {TOK}"',
            'headers["Proxy-Authorization"] = "[REDACTED:bearer-token]"',
        ),
    ],
)
def test_a_quoted_authorization_value_loses_its_credential(text: str, expected: str) -> None:
    assert redact(text) == expected
    assert redact(text) == _reference(text)


@pytest.mark.parametrize(
    "text",
    [
        '{"Authorization": f"Bearer {token}"}',
        'headers = {"Authorization": "Bearer " + token}',
        "{'Authorization': 'Bearer %s' % token}",
        '"Authorization": "Bearer ${GITHUB_TOKEN}"',
        '"Authorization": "Bearer <your token>"',
        '"Authorization": "required"',
    ],
)
def test_a_quoted_authorization_template_is_kept(text: str) -> None:
    assert redact(text) == text


def test_authorization_in_tool_call_arguments_loses_its_credential() -> None:
    args = {"url": "https://api.local/v1", "headers": {"Authorization": f"Bearer {TOK}"}}
    assert redact_value(args) == {
        "url": "https://api.local/v1",
        "headers": {"Authorization": "[REDACTED:bearer-token]"},
    }
    assert redact_value({"authorization": "Basic dXNlcjpwYXNzd29yZA=="}) == {
        "authorization": "Basic [REDACTED:basic-auth]"
    }
    assert redact_value({"Authorization": "Bearer $TOKEN"}) == {"Authorization": "Bearer $TOKEN"}
    messages = [
        {"role": "assistant", "toolCalls": [{"id": "c1", "name": "fetch", "arguments": args}]}
    ]
    assert TOK not in repr(redact_messages(messages))
