"""Redaction against the generated secrets corpus (issue 14, point 9): every secret of every
kind is gone wherever it sits, ordinary text is left alone, and every secret detect-secrets
finds in the corpus is redacted too."""

from __future__ import annotations

import json

import pytest

from compactctl.formats.reader import load
from compactctl.model import Message
from compactctl.summarize import SummaryRequest, SummaryResult
from compactctl.summarize.redact import (
    KINDS,
    find_secrets,
    redact,
    redact_messages,
    redact_request,
    redact_value,
)
from compactctl.text import string_leaves
from tests.helpers import FIXTURES

from .secret_corpus import PLACES, Secret, corpus, transcript

CASES = corpus()


def _leaks(text: str, cases: list[Secret] = CASES) -> list[tuple[str, str]]:
    """``(kind, value)`` of every secret value still in ``text``."""
    return [(c.kind, v) for c in cases for v in c.values if v in text]


def test_the_corpus_is_large_and_varied() -> None:
    values = [v for c in CASES for v in c.values]
    assert len(CASES) >= 50 and len({c.kind for c in CASES}) >= 40
    assert len(values) >= 50
    assert corpus() == CASES  # deterministic
    assert corpus(seed=15) != CASES


@pytest.mark.parametrize("case", CASES, ids=[c.kind for c in CASES])
def test_each_secret_is_redacted_in_its_context(case: Secret) -> None:
    out = redact(case.text)
    assert _leaks(out, [case]) == [], out
    assert "[REDACTED:" in out
    assert redact(out) == out  # idempotent: a redaction is not redacted again


def test_every_kind_found_is_documented() -> None:
    kinds = {f.kind for c in CASES for f in find_secrets(c.text)}
    assert kinds <= set(KINDS)
    assert len(kinds) >= 30, sorted(kinds)


def test_secrets_inside_json_documents_stay_valid_json() -> None:
    doc = {c.kind: c.text for c in CASES}
    text = json.dumps(doc, indent=2)
    out = redact(text)
    assert _leaks(out) == []
    assert set(json.loads(out)) == set(doc)  # the redacted document still parses
    compact = json.dumps(doc, separators=(",", ":"))
    assert _leaks(redact(compact)) == []
    assert json.loads(redact(compact)).keys() == doc.keys()


@pytest.mark.parametrize("case", CASES, ids=[c.kind for c in CASES])
def test_each_secret_inside_an_escaped_json_string(case: Secret) -> None:
    """The case as a tool prints it inside a JSON document, under a key that says nothing
    (its newlines are ``\\n`` escapes, so a line begins after one): the INI password with
    spaces and the Age key after ``\\n`` were missed there."""
    for doc in (
        json.dumps({"status": "ok", "debug": {"raw": case.text}}, indent=2),
        json.dumps({"command": case.text}),
        json.dumps([case.text]),
    ):
        out = redact(doc)
        assert _leaks(out, [case]) == [], out
        assert json.loads(out)  # still a JSON document


def test_secrets_in_prose_lines_and_tool_arguments() -> None:
    prose = "\n".join(
        f"At step {i} I ran: {c.text} -- then it failed." for i, c in enumerate(CASES)
    )
    assert _leaks(redact(prose)) == []
    args = [{"command": list(c.argv) or c.text, "env": {"CI": "1"}} for c in CASES]
    assert _leaks(json.dumps(redact_value(args))) == []
    # a secret alone under a telling key is judged with its key
    assert redact_value({"password": "hunter2", "user": "bob"}) == {
        "password": "[REDACTED:assigned-secret]",
        "user": "bob",
    }
    assert redact_value({"client_secret": "x9Y8z7W6v5U4t3S2r1Q0"})["client_secret"].startswith(
        "[REDACTED"
    )
    assert redact_value({"cache_key": "user-42"}) == {"cache_key": "user-42"}
    assert redact_value({"pin_password": 4711, "port": 5432, "max_tokens": 9}) == {
        "pin_password": "[REDACTED:assigned-secret]",
        "port": 5432,
        "max_tokens": 9,
    }


def test_the_transcript_places_every_case_everywhere() -> None:
    records = transcript(CASES)
    texts = json.dumps(records)
    for case in CASES:
        assert all(v in texts or json.dumps(v)[1:-1] in texts for v in case.values), case.kind
    places = {PLACES[turn % len(PLACES)] for turn in range(1, len(CASES) + 1)}
    assert places == set(PLACES)
    messages = [r for r in records if r.get("type") == "message"]
    redacted = json.dumps(redact_messages(messages))
    assert _leaks(redacted) == []
    assert len(redact_messages(messages)) == len(messages)
    assert [m["uuid"] for m in redact_messages(messages)] == [m["uuid"] for m in messages]


def test_redact_request_covers_every_text_field() -> None:
    secret = "ghp_" + "aB3" * 12
    request = SummaryRequest(
        messages=[{"role": "user", "content": [{"type": "text", "text": f"use {secret}"}]}],
        prior=SummaryResult(
            text=f"- token {secret}",
            format="task-state",
            task_state={"goal": f"push with {secret}"},  # type: ignore[typeddict-item]
            model="x",
        ),
        instructions=f"keep {secret}",
        pinned_constraints=[f"never print {secret}"],
        first_request=f"log in with {secret}",
        latest_request=("T3", f"rotate {secret}"),
    )
    out = redact_request(request)
    assert secret not in repr(out)
    assert out.format == request.format and out.max_chars == request.max_chars
    assert out.latest_request == ("T3", "rotate [REDACTED:github-token]")


def _fixture_texts() -> list[tuple[str, str]]:
    """Every message text, tool call argument and summary text of every fixture file."""
    out: list[tuple[str, str]] = []
    for path in sorted(p for p in FIXTURES.rglob("*") if p.is_file()):
        if path.suffix not in (".jsonl", ".json", ".traj"):
            continue
        try:
            _, events = load(str(path))
        except Exception:  # a deliberately misleading file: read it as text
            out.append((path.name, path.read_text("utf-8", "replace")))
            continue
        for e in events:
            if isinstance(e, Message):
                values = [e.data.get("content"), e.data.get("toolCalls")]
            elif e.data.get("type") == "summary":
                values = [e.data.get("summaryText")]
            else:
                continue
            out.extend((path.name, text) for value in values for text in string_leaves(value))
    return out


def test_ordinary_text_of_the_fixtures_is_not_redacted() -> None:
    """The false-positive rate on the fixtures: no text, and no word, is redacted."""
    texts = _fixture_texts()
    words = sum(len(t.split()) for _, t in texts)
    assert len(texts) > 1500 and words > 50_000
    found = [(name, t[f.start : f.end], f.kind) for name, t in texts for f in find_secrets(t)]
    assert found == []


def test_prefilter_agrees_with_every_rule_on_the_corpus_and_fixtures() -> None:
    for case in CASES:
        assert redact(case.text) == redact(case.text, prefilter=False), case.kind
    for _, text in _fixture_texts()[:400]:
        assert redact(text) == redact(text, prefilter=False)


def test_what_detect_secrets_finds_in_the_corpus_is_redacted() -> None:
    """A maintained scanner as the oracle: each secret value detect-secrets reports on a line of
    a case is gone from our redaction of the case."""
    pytest.importorskip("detect_secrets")
    from detect_secrets.core.scan import scan_line
    from detect_secrets.settings import default_settings

    missed = []
    checked = 0
    with default_settings():
        for case in CASES:
            out = redact(case.text)  # whole: a key's body lines are redacted with their block
            for line in case.text.splitlines():
                for found in scan_line(line):
                    value = found.secret_value or ""
                    if len(value) < 8 or value not in line:
                        continue
                    entropy = found.type in (
                        "Hex High Entropy String",
                        "Base64 High Entropy String",
                    )
                    if entropy and not any(value in v or v in value for v in case.values):
                        continue  # adhoc scans flag any long word: judge only the secrets'
                    checked += 1
                    if value in out:
                        missed.append((case.kind, found.type, value))
    assert checked >= 40
    assert missed == []


def test_a_key_body_without_its_begin_line_is_redacted() -> None:
    body = next(c for c in CASES if c.kind == "pem-body-without-begin")
    tail = "\n".join(body.text.splitlines()[3:])  # a clip left the last lines and END
    assert _leaks(redact(tail), [body]) == []
    escaped = json.dumps(body.text)[1:-1]  # the same inside a JSON string (\n escapes)
    assert _leaks(redact(escaped), [body]) == []


@pytest.mark.parametrize(
    "text",
    [
        "token = input.table",
        "key: deploy",
        "password: str",
        "password = get_password()",
        "if token_count > max_tokens: return",
        "the cache key is user_42; the secret sauce is patience",
        "cd $PWD && ls",
        "Authorization: Bearer $TOKEN",
        "password=${DB_PASSWORD}",
        'api_key = os.environ["OPENAI_API_KEY"]',
        "commit 3f786850e387550fdab836ed7e6dc881de23001b",
        "uuid 123e4567-e89b-12d3-a456-426614174000",
        "https://github.com/org/repo/pull/42",
        "SELECT key, value FROM settings WHERE key = 'theme'",
        "--password-file /run/secrets/db",
        "private_key_path: ~/.ssh/id_ed25519",
        # review 11: templates of a quoted Authorization value; flag, netrc and cookie
        # look-alikes
        '{"Authorization": f"Bearer {token}"}',
        'headers = {"Authorization": "Bearer " + token}',
        "{'Authorization': 'Bearer %s' % token}",
        '"Authorization": "Bearer ${GITHUB_TOKEN}"',
        '"Authorization": "Bearer <your token>"',
        '"Authorization": "required"',
        "mysql -p",  # prompts
        "mysql -u root -p shop",  # prompts; shop is the database
        "mysql -P3306 -h db",  # -P: the port
        "mysql -u root -p$MYSQL_PWD",
        "grep -p foo bar.txt",
        "ls -a && ls -la",
        "tar -k -xf x.tar",
        "mkdir -p /tmp/x",
        "pytest -k test_login",
        "git checkout -b feature",
        "echo mysql; grep -a x f",
        "grep mysql -a f",
        "docker run -p 8080:80 nginx",
        "docker login -u me --password-stdin registry.io",
        "az vm create -n vm -p x",
        "sshpass -P assword ssh h",
        "openssl rsa -passin env:KEYPW -in k.pem",
        "openssl req -pass file:pw.txt",
        "htpasswd -c .htpasswd admin",
        "enter your login and password hunter2",
        "the machine is down, password reset pending",
        "Cookie: chocolate chip",
        "my_cookie: a=b",
        "Set-Cookie: sid=$SID; Path=/",
        'headers = {"Cookie": f"session={sid}"}',
        "The default password is admin",
        "cmd = f'mysql -u {user} -p{password} {db}'",
    ],
)
def test_code_and_placeholders_are_not_secrets(text: str) -> None:
    assert redact(text) == text
