"""Secret redaction: each kind caught; the literal prefilters never change the result."""

from __future__ import annotations

import json

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
    assert redact_value({"headers": {"Cookie": "sid=Ab12Cd34; theme=dark", "Accept": "a=b"}}) == {
        "headers": {"Cookie": "sid=[REDACTED:cookie]; theme=[REDACTED:cookie]", "Accept": "a=b"}
    }
    messages = [
        {"role": "assistant", "toolCalls": [{"id": "c1", "name": "fetch", "arguments": args}]}
    ]
    assert TOK not in repr(redact_messages(messages))


CLI = "[REDACTED:cli-password]"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("mysql -u root -pS3cretPw99 -h db", f"mysql -u root -p{CLI} -h db"),
        ("mysqldump -uroot -p'Pw 9' shop > x.sql", f"mysqldump -uroot -p'{CLI}' shop > x.sql"),
        (
            'bash -lc "cd /app && mariadb -pInline99 shop"',
            f'bash -lc "cd /app && mariadb -p{CLI} shop"',
        ),
        (
            "docker exec -it db mysql -uroot -pDockPw1 -e 'select 1'",
            f"docker exec -it db mysql -uroot -p{CLI} -e 'select 1'",
        ),
        ("sshpass -p 'SshPassw0rd' ssh root@host", f"sshpass -p '{CLI}' ssh root@host"),
        ("sshpass -pSshPw2 ssh h", f"sshpass -p{CLI} ssh h"),
        (
            "docker login -u me -p D0ckerPw11 registry.io",
            f"docker login -u me -p {CLI} registry.io",
        ),
        ("sudo podman login -pPodPw1 quay.io", f"sudo podman login -p{CLI} quay.io"),
        ("redis-cli -h cache -a R3disPw77 ping", f"redis-cli -h cache -a {CLI} ping"),
        (
            "az login --service-principal -u 1 -p AzPw9999 -t t",
            f"az login --service-principal -u 1 -p {CLI} -t t",
        ),
        (
            "openssl enc -aes-256-cbc -k EncPassw0rd -in x",
            f"openssl enc -aes-256-cbc -k {CLI} -in x",
        ),
        (
            "openssl pkcs12 -export -passout pass:P12Pw99 -out k.p12",
            f"openssl pkcs12 -export -passout pass:{CLI} -out k.p12",
        ),
        ("htpasswd -b .htpasswd admin HtPw1234", f"htpasswd -b .htpasswd admin {CLI}"),
        (
            "htpasswd -cbB -C 12 /etc/.htpasswd admin HtPw5678",
            f"htpasswd -cbB -C 12 /etc/.htpasswd admin {CLI}",
        ),
        ("htpasswd -nb admin HtPw9999", f"htpasswd -nb admin {CLI}"),
        # sshpass's options end where its command begins: mkdir's -p is no password
        ("sshpass -p Pw1 ssh host mkdir -p /srv/x", f"sshpass -p {CLI} ssh host mkdir -p /srv/x"),
        (
            "default login anonymous password guest@x.io",
            "default login anonymous password [REDACTED:assigned-secret]",
        ),
        # a command inside a JSON document printed as text (a tool call's arguments)
        (
            '{"command": "mysql -u root -pS3cretPw99 -h db"}',
            f'{{"command": "mysql -u root -p{CLI} -h db"}}',
        ),
        (
            "machine api.heroku.com login me@x.com password N3trcPw55",
            "machine api.heroku.com login me@x.com password [REDACTED:assigned-secret]",
        ),
        (
            "machine h\n  login u\n  password Multi9\n",
            "machine h\n  login u\n  password [REDACTED:assigned-secret]\n",
        ),
        ("Cookie: session=CookieSess1234567890abcdef", "Cookie: session=[REDACTED:cookie]"),
        (
            "Set-Cookie: sid=abc123xyz; Path=/; HttpOnly",
            "Set-Cookie: sid=[REDACTED:cookie]; Path=/; HttpOnly",
        ),
        (
            'curl -H "Cookie: a=1; b=two" https://x',
            'curl -H "Cookie: a=[REDACTED:cookie]; b=[REDACTED:cookie]" https://x',
        ),
        ('{"Cookie": "session=Xyz123"}', '{"Cookie": "session=[REDACTED:cookie]"}'),
        # review 12: curl's cookies and user without a URL, sudo -S, openssl passwd
        (
            "curl -b 'session=CurlSess42' https://x.io",
            "curl -b 'session=[REDACTED:cookie]' https://x.io",
        ),
        (
            'curl -sS --cookie "sid=S1d99; csrftoken=Csrf77" x.io',
            'curl -sS --cookie "sid=[REDACTED:cookie]; csrftoken=[REDACTED:cookie]" x.io',
        ),
        ("curl --cookie=sid=S1d99 x.io", "curl --cookie=sid=[REDACTED:cookie] x.io"),
        (  # a quoted ";" does not end the command
            "curl -b 'a=Ab1; b=Cd2' -u me:Pw9 x",
            "curl -b 'a=[REDACTED:cookie]; b=[REDACTED:cookie]' -u me:[REDACTED:curl-auth-user] x",
        ),
        (
            "curl -u admin:AdmPw12 localhost:8080",
            "curl -u admin:[REDACTED:curl-auth-user] localhost:8080",
        ),
        ("curl --user=ci:CiPw34 h/x", "curl --user=ci:[REDACTED:curl-auth-user] h/x"),
        (
            "echo 'Sud0Pw1' | sudo -S apt install x",
            f"echo '{CLI}' | sudo -S apt install x",
        ),
        ("echo hello | sudo -S true", f"echo {CLI} | sudo -S true"),
        ("echo -n Pw2|sudo -u root -kS ls", f"echo -n {CLI}|sudo -u root -kS ls"),
        ("cd /x && echo Pw3 | sudo --stdin make", f"cd /x && echo {CLI} | sudo --stdin make"),
        ("printf '%s\\n' PfPw4 | sudo -S ls", f"printf '%s\\n' {CLI} | sudo -S ls"),
        ("printf 'PfPw5\\n' | sudo -S ls", f"printf '{CLI}\\n' | sudo -S ls"),
        ("openssl passwd -6 -salt ab HashPw1", f"openssl passwd -6 -salt ab {CLI}"),
        ("openssl passwd -apr1 Pw6 Pw7; ls", f"openssl passwd -apr1 {CLI} {CLI}; ls"),
    ],
)
def test_short_flag_netrc_and_cookie_passwords_are_redacted(text: str, expected: str) -> None:
    assert redact(text) == expected
    assert redact(text) == _reference(text)
    assert redact(expected) == expected


def test_an_argv_array_is_judged_as_the_command_it_renders() -> None:
    """A shell tool call's command as a list (Codex, many agents): each string is judged with
    the strings before it as its command, as ``shlex.join`` renders it for the summary."""
    assert redact_value({"command": ["mysql", "-u", "root", "-pS3cretPw", "-h", "db"]}) == {
        "command": ["mysql", "-u", "root", f"-p{CLI}", "-h", "db"]
    }
    assert redact_value(["sshpass", "-p", "S3cret", "ssh", "host"]) == [
        "sshpass", "-p", CLI, "ssh", "host"
    ]  # fmt: skip
    assert redact_value(["docker", "login", "-u", "me", "-p", "D0ck"]) == [
        "docker", "login", "-u", "me", "-p", CLI
    ]  # fmt: skip
    assert redact_value(["mysql", "--password", "S3cret", "shop"]) == [
        "mysql", "--password", "[REDACTED:assigned-secret]", "shop"
    ]  # fmt: skip
    assert redact_value(["curl", "-b", "sid=Ab12; theme=dark", "-u", "me:Pw99", "x.io"]) == [
        "curl", "-b", "sid=[REDACTED:cookie]; theme=[REDACTED:cookie]",
        "-u", "me:[REDACTED:curl-auth-user]", "x.io",
    ]  # fmt: skip
    assert redact_value(["curl", "-H", f"Authorization: Bearer {TOK}", "x.io"]) == [
        "curl", "-H", "Authorization: [REDACTED:bearer-token]", "x.io"
    ]  # fmt: skip
    assert redact_value(["bash", "-lc", "mysql -pS3cret"]) == ["bash", "-lc", f"mysql -p{CLI}"]
    # redacting twice changes nothing; ordinary lists and commands are kept
    once = redact_value(["sshpass", "-p", "S3cret", "ssh", "host"])
    assert redact_value(once) == once
    for kept in (
        ["curl", "-b", "cookies.txt", "https://x.io"],
        ["mkdir", "-p", "/srv/x"],
        ["grep", "-p", "x", "f.txt"],
        ["the password", "is", "-pS3cret"],  # no command: the first string is no word
        ["mysql", 3, "-pX"],
    ):
        assert redact_value(kept) == kept


def test_an_argv_array_in_arguments_kept_as_a_json_string_is_judged_too() -> None:
    """Codex keeps a function call's arguments as a JSON string: the argv array inside is
    judged as its object is; arguments without more to find keep their text."""
    args = '{"command":["sshpass","-p","S3cretPw","ssh","h"],"workdir":"/x"}'
    messages = [{"role": "assistant", "toolCalls": [{"id": "c1", "arguments": args}]}]
    out = redact_messages(messages)[0]["toolCalls"][0]["arguments"]
    assert json.loads(out) == {"command": ["sshpass", "-p", CLI, "ssh", "h"], "workdir": "/x"}
    for kept in ('{"command":["ls","-a"]}', '{"command":["mysql","-pX"]'):
        calls = [{"role": "assistant", "toolCalls": [{"id": "c1", "arguments": kept}]}]
        assert redact_messages(calls)[0]["toolCalls"][0]["arguments"] == kept
