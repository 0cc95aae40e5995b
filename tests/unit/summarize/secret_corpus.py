"""A corpus of generated fake secrets (issue 14, point 9), and a transcript that holds them.

Every secret is made by a seeded :class:`random.Random` in the shape its provider documents
(prefix, alphabet, length, checksum-free), so no real key is ever here, and the same seed gives
the same bytes. :func:`corpus` gives one :class:`Secret` per case: its kind, the text it sits in
as a user would paste it (a command, an env line, a JSON document, a header, a key file), and
the substrings that must never reach a model or a written byte (:attr:`Secret.values`).

:func:`transcript` places the cases in a canonical transcript, rotating over four places: the
user's text, a tool's output, a tool call's arguments (a JSON object) and a JSON document
printed by a tool. The cases are in old turns, so ``compact --force`` summarizes all of them.
"""

from __future__ import annotations

import base64
import json
import random
import shlex
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

UPPER = string.ascii_uppercase
LOWER = string.ascii_lowercase
DIGITS = string.digits
ALNUM = UPPER + LOWER + DIGITS
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"


@dataclass(frozen=True)
class Secret:
    """One case of the corpus.

    Attributes:
        kind: what the secret is (``aws-secret-access-key``, ``json-password``, ...).
        text: the secret in its context, as it appears in a session.
        values: the substrings that must not appear after redaction (the secret itself, or
            each line of a key's body).
        argv: the command as an argv array (``["mysql", "-pPW"]``), as a tool call holds it
            in the tool-arguments place; ``text`` is then its ``shlex.join``. Empty: a text.
    """

    kind: str
    text: str
    values: tuple[str, ...]
    argv: tuple[str, ...] = ()


def _pick(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _pem_body(rng: random.Random, der_prefix: bytes, size: int) -> list[str]:
    """Base64 lines of 64 columns of ``size`` random bytes after a DER-like prefix."""
    raw = der_prefix + bytes(rng.getrandbits(8) for _ in range(size))
    text = base64.b64encode(raw).decode()
    return [text[i : i + 64] for i in range(0, len(text), 64)]


def _pem(rng: random.Random, label: str, der: bytes, size: int) -> tuple[str, list[str]]:
    lines = _pem_body(rng, der, size)
    block = f"-----BEGIN {label}-----\n" + "\n".join(lines) + f"\n-----END {label}-----\n"
    return block, lines


def _jwt(rng: random.Random) -> str:
    header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    payload = _b64url(
        json.dumps({"sub": str(rng.randrange(10**9)), "name": "dev", "iat": 1700000000}).encode()
    )
    return f"{header}.{payload}.{_pick(rng, URLSAFE, 43)}"


def _cases(rng: random.Random) -> list[Secret]:
    out: list[Secret] = []

    def add(kind: str, text: str, *values: str) -> None:
        out.append(Secret(kind, text, values))

    def gen(kind: str, make: Callable[[], str], context: str) -> None:
        value = make()
        add(kind, context.format(value), value)

    aws_id = "AKIA" + _pick(rng, UPPER + "234567", 16)
    aws_secret = _pick(rng, B64, 40)
    add(
        "aws-credentials-file",
        f"[default]\naws_access_key_id = {aws_id}\naws_secret_access_key = {aws_secret}\n",
        aws_id,
        aws_secret,
    )
    gen("aws-secret-export", lambda: _pick(rng, B64, 40), "export AWS_SECRET_ACCESS_KEY={}")
    gen("aws-session-key-id", lambda: "ASIA" + _pick(rng, UPPER + "234567", 16), "key id {} ok")
    gen(
        "aws-json",
        lambda: _pick(rng, B64, 40),
        '{{"AccessKeyId": "AKIAEXAMPLE", "SecretAccessKey": "{}", "Expiration": "soon"}}',
    )
    key_id = _pick(rng, HEX, 40)
    gcp_pem, gcp_lines = _pem(rng, "PRIVATE KEY", b"0\x82\x04\xbe\x02\x01\x000\r", 900)
    gcp = {
        "type": "service_account",
        "project_id": "demo-project",
        "private_key_id": key_id,
        "private_key": gcp_pem,
        "client_email": "ci@demo-project.iam.gserviceaccount.com",
    }
    add("gcp-service-account", json.dumps(gcp, indent=2), key_id, *gcp_lines)
    gen("gcp-api-key", lambda: "AIza" + _pick(rng, URLSAFE, 35), "maps key={}&q=x")
    gen(
        "azure-storage-account-key",
        lambda: _pick(rng, B64, 86) + "==",
        "DefaultEndpointsProtocol=https;AccountName=demo;AccountKey={};EndpointSuffix=core.windows.net",
    )
    gen(
        "azure-sas-signature",
        lambda: _pick(rng, ALNUM, 43) + "%3D",
        "https://demo.blob.core.windows.net/c/f.txt?sv=2022-11-02&se=2030-01-01&sig={}",
    )
    gen(
        "azure-client-secret",
        lambda: _pick(rng, ALNUM, 3) + "8Q~" + _pick(rng, ALNUM + "_~.-", 34),
        "AZURE_CLIENT_SECRET={}",
    )
    gen("github-pat", lambda: "ghp_" + _pick(rng, ALNUM, 36), "git push https://{}@github.com/o/r")
    gen(
        "github-fine-grained-pat",
        lambda: "github_pat_" + _pick(rng, ALNUM, 22) + "_" + _pick(rng, ALNUM, 59),
        "gh auth login --with-token {}",
    )
    gen("github-oauth", lambda: "gho_" + _pick(rng, ALNUM, 36), "token: {}")
    gen("gitlab-pat", lambda: "glpat-" + _pick(rng, URLSAFE, 20), "PRIVATE-TOKEN: {}")
    gen("gitlab-runner-token", lambda: "glrt-" + _pick(rng, URLSAFE, 20), "register {}")
    gen(
        "slack-bot-token",
        lambda: f"xoxb-{_pick(rng, DIGITS, 12)}-{_pick(rng, DIGITS, 13)}-{_pick(rng, ALNUM, 24)}",
        "SLACK_BOT_TOKEN is {}",
    )
    gen(
        "slack-webhook",
        lambda: (
            f"T{_pick(rng, UPPER + DIGITS, 8)}/B{_pick(rng, UPPER + DIGITS, 10)}/"
            + _pick(rng, ALNUM, 24)
        ),
        'curl -X POST https://hooks.slack.com/services/{} -d \'{{"text":"hi"}}\'',
    )
    gen(
        "discord-webhook",
        lambda: f"{_pick(rng, DIGITS, 18)}/{_pick(rng, URLSAFE, 68)}",
        "POST https://discord.com/api/webhooks/{}",
    )
    gen("huggingface-token", lambda: "hf_" + _pick(rng, UPPER + LOWER, 34), "hf download --t {}")
    gen("npm-token", lambda: "npm_" + _pick(rng, ALNUM, 36), "npm publish with {}")
    gen(
        "npmrc-auth-token",
        lambda: (
            f"{_pick(rng, HEX, 8)}-{_pick(rng, HEX, 4)}-{_pick(rng, HEX, 4)}-"
            f"{_pick(rng, HEX, 4)}-{_pick(rng, HEX, 12)}"
        ),
        "//registry.npmjs.org/:_authToken={}",
    )
    gen(
        "pypi-token",
        lambda: "pypi-AgEIcHlwaS5vcmc" + _pick(rng, URLSAFE, 70),
        "twine upload -p {} dist/*",
    )
    gen("twilio-api-key", lambda: "SK" + _pick(rng, HEX, 32), "twilio key {}")
    gen(
        "sendgrid-key",
        lambda: "SG." + _pick(rng, URLSAFE, 22) + "." + _pick(rng, URLSAFE, 43),
        "sg = SendGridAPIClient({!r})",
    )
    gen("mailgun-key", lambda: "key-" + _pick(rng, HEX, 32), "api:{} for domain")
    gen("mailchimp-key", lambda: _pick(rng, HEX, 32) + "-us12", "mailchimp = {}")
    gen("stripe-secret-key", lambda: "sk_live_" + _pick(rng, ALNUM, 24), "stripe.api_key = '{}'")
    gen(
        "openai-key",
        lambda: "sk-proj-" + _pick(rng, URLSAFE, 74) + "T3BlbkFJ" + _pick(rng, URLSAFE, 74),
        "client = OpenAI(api_key={!r})",
    )
    gen(
        "anthropic-key",
        lambda: "sk-ant-api03-" + _pick(rng, URLSAFE, 93) + "AA",
        "ANTHROPIC_API_KEY={}",
    )
    gen("jwt", lambda: _jwt(rng), "cookie session={}; Path=/")
    gen(
        "json-password",
        lambda: _pick(rng, ALNUM + "!#%", 14),
        '{{"user": "bob", "password": "{}"}}',
    )
    gen(
        "json-client-secret",
        lambda: _pick(rng, URLSAFE, 40),
        '{{"client_id": "app-1", "client_secret": "{}"}}',
    )
    gen("secret-line", lambda: _pick(rng, ALNUM, 20), "SECRET={}")
    gen("token-line", lambda: _pick(rng, ALNUM, 12), "TOKEN={}")
    gen("jwt-secret-line", lambda: _pick(rng, LOWER + DIGITS, 16), "JWT_SECRET={}")
    gen(
        "quoted-password-spaces",
        lambda: " ".join(_pick(rng, LOWER, 6) for _ in range(4)),
        'DB_PASSWORD="{}"',
    )
    gen("short-password", lambda: _pick(rng, LOWER, 3) + _pick(rng, DIGITS, 2), "password: {}")
    gen("pgpassword", lambda: _pick(rng, ALNUM, 9), "PGPASSWORD={} psql -h db -U app")
    gen(
        "basic-auth-header",
        lambda: base64.b64encode(f"admin:{_pick(rng, ALNUM, 10)}".encode()).decode(),
        'curl -H "Authorization: Basic {}" https://api.local/v1',
    )
    gen("bearer-header", lambda: _pick(rng, ALNUM, 32), "Authorization: Bearer {}")
    gen("redis-url-password", lambda: _pick(rng, ALNUM, 14), "REDIS_URL=redis://:{}@cache:6379/0")
    gen(
        "postgres-url-password",
        lambda: _pick(rng, ALNUM, 12),
        "psql postgresql://app:{}@db.internal:5432/app",
    )
    gen(
        "mysql-dsn-password",
        lambda: _pick(rng, ALNUM, 12),
        'dsn := "app:{}@tcp(127.0.0.1:3306)/shop?parseTime=true"',
    )
    rsa, rsa_lines = _pem(rng, "RSA PRIVATE KEY", b"0\x82\x04\xa4\x02\x01\x00\x02\x82", 1100)
    add("rsa-private-key", f"$ cat id_rsa\n{rsa}", *rsa_lines)
    ec, ec_lines = _pem(rng, "EC PRIVATE KEY", b"0w\x02\x01\x01\x04 ", 90)
    add("ec-private-key", ec, *ec_lines)
    ssh, ssh_lines = _pem(rng, "OPENSSH PRIVATE KEY", b"openssh-key-v1\x00", 360)
    add("openssh-private-key", ssh, *ssh_lines)
    body, body_lines = _pem(rng, "PRIVATE KEY", b"0\x82\x04\xbe\x02\x01\x000\r", 1200)
    clipped = "\n".join(body.split("\n")[6:])  # the BEGIN line and 5 lines fell in a clip
    add("pem-body-without-begin", f"[... 420 chars elided ...]\n{clipped}", *body_lines[5:])
    gen("square-token", lambda: "sq0atp-" + _pick(rng, URLSAFE, 22), "square token {}")
    gen(
        "telegram-bot-token",
        lambda: _pick(rng, DIGITS, 9) + ":AA" + _pick(rng, URLSAFE, 33),
        "bot = Bot({!r})",
    )
    gen("databricks-token", lambda: "dapi" + _pick(rng, HEX, 32), "databricks token {}")
    gen("shopify-token", lambda: "shpat_" + _pick(rng, HEX, 32), "X-Shopify-Access-Token: {}")
    gen("digitalocean-token", lambda: "dop_v1_" + _pick(rng, HEX, 64), "doctl auth init -t {}")
    gen("vault-token", lambda: "hvs." + _pick(rng, URLSAFE, 95), "VAULT_TOKEN is {}")
    gen(
        "grafana-service-account-token",
        lambda: "glsa_" + _pick(rng, ALNUM, 32) + "_" + _pick(rng, HEX, 8),
        "grafana: {}",
    )
    gen(
        "docker-config-auth",
        lambda: base64.b64encode(f"bot:{_pick(rng, ALNUM, 20)}".encode()).decode(),
        '{{"auths": {{"registry.local": {{"auth": "{}"}}}}}}',
    )
    gen("curl-user-password", lambda: _pick(rng, ALNUM, 11), "curl -u deploy:{} https://ci.local/")
    gen("password-flag", lambda: _pick(rng, ALNUM, 10), "mysql --user app --password {} shop")
    gen("x-api-key-header", lambda: _pick(rng, HEX, 32), "X-API-Key: {}")
    gen(
        "age-secret-key",
        lambda: "AGE-SECRET-KEY-1" + _pick(rng, "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58),
        "# key file\n{}",
    )
    gen(
        "brevo-key",
        lambda: "xkeysib-" + _pick(rng, HEX, 64) + "-" + _pick(rng, ALNUM, 16),
        "brevo {}",
    )
    gen("artifactory-key", lambda: "AKCp" + _pick(rng, ALNUM, 69), "jfrog {}")
    gen(
        "heroku-api-key",
        lambda: (
            f"{_pick(rng, HEX, 8)}-{_pick(rng, HEX, 4)}-{_pick(rng, HEX, 4)}-"
            f"{_pick(rng, HEX, 4)}-{_pick(rng, HEX, 12)}"
        ),
        "HEROKU_API_KEY={}",
    )
    gen("datadog-api-key", lambda: _pick(rng, HEX, 32), "export DD_API_KEY={}")
    gen(
        "yaml-password",
        lambda: _pick(rng, LOWER, 7) + _pick(rng, DIGITS, 3),
        "db:\n  password: {}\n",
    )
    gen(
        "ini-password-spaces",
        lambda: " ".join(_pick(rng, LOWER, 5) for _ in range(3)),
        "[db]\npassword = {}\n",
    )
    gen("python-kwarg-password", lambda: _pick(rng, ALNUM, 10) + "!", 'connect(password="{}")')
    # review 11: quoted Authorization values; short-flag, netrc and cookie passwords
    for kind, alphabet, size, context in (
        (
            "json-authorization-bearer",
            ALNUM,
            40,
            '{{"url": "https://api.local/v1", "headers": {{"Authorization": "Bearer {}"}}}}',
        ),
        (
            "python-repr-authorization",
            ALNUM,
            32,
            "HTTPError: 401 Client Error; sent headers {{'Authorization': 'Bearer {}'}}",
        ),
        ("yaml-authorization-token", HEX, 40, 'headers:\n  Authorization: "Token {}"\n'),
        ("mysql-attached-password", ALNUM, 12, "mysql -u root -p{} -h db shop"),
        ("sshpass-password", ALNUM, 10, "sshpass -p '{}' ssh deploy@web1"),
        ("docker-login-password", ALNUM, 14, "docker login -u ci -p {} reg.io"),
        ("redis-cli-password", ALNUM, 16, "redis-cli -h cache -a {} ping"),
        ("openssl-pass", ALNUM, 12, "openssl rsa -in k.pem -passin pass:{}"),
        ("htpasswd-password", ALNUM, 10, "htpasswd -b .htpasswd admin {}"),
        ("netrc-password", ALNUM, 12, "machine api.x.io\n  login bot\n  password {}"),
        ("cookie-header", URLSAFE, 32, "Cookie: theme=dark; session={}"),
        # review 12: curl cookies and a user without a URL, sudo -S, openssl passwd
        ("curl-cookie-flag", URLSAFE, 32, "curl -sb 'session={}' https://app.local/api"),
        ("curl-cookie-long", ALNUM, 24, 'curl --cookie "sid={}; theme=dark" https://app.local/'),
        ("curl-user-no-url", ALNUM, 12, "curl -u admin:{} localhost:8080/api"),
        ("sudo-stdin-echo", ALNUM, 10, "echo '{}' | sudo -S apt-get install -y nginx"),
        ("sudo-stdin-printf", ALNUM, 10, "printf '%s\\n' {} | sudo -S systemctl restart app"),
        ("openssl-passwd", ALNUM, 10, "openssl passwd -6 -salt xyz {}"),
    ):
        gen(kind, lambda a=alphabet, n=size: _pick(rng, a, n), context)
    # review 12: a shell tool call's command as an argv array (Codex, many agents)
    for kind, argv in (
        ("argv-mysql", ("mysql", "-u", "root", "-p{}", "-h", "db")),
        ("argv-sshpass", ("sshpass", "-p", "{}", "ssh", "deploy@web1")),
        ("argv-docker-login", ("docker", "login", "-u", "ci", "-p", "{}", "reg.io")),
        ("argv-curl-cookie", ("curl", "-b", "session={}", "https://app.local/")),
    ):
        value = _pick(rng, ALNUM, 14)
        filled = tuple(word.format(value) for word in argv)
        out.append(Secret(kind, shlex.join(filled), (value,), filled))
    return out


def corpus(seed: int = 14) -> list[Secret]:
    """The cases, deterministic in ``seed``."""
    return _cases(random.Random(seed))


PLACES = ("user", "tool-output", "tool-arguments", "json-output")


def transcript(cases: list[Secret], shift: int = 0) -> list[dict[str, Any]]:
    """A canonical transcript holding every case in old turns, the places rotating over
    :data:`PLACES` (turn ``t`` in place ``(t + shift) % 4``: the four shifts put every case
    in every place); ten ordinary turns after them (kept by ``keep_recent``)."""
    ts = "2025-03-01T{:02d}:{:02d}:00.000Z"
    records: list[dict[str, Any]] = [
        {"type": "session", "uuid": "s0", "sessionId": "secret-corpus", "model": "gpt-4o",
         "timestamp": ts.format(9, 0)},
    ]  # fmt: skip
    n = 0

    def stamp() -> str:
        nonlocal n
        n += 1
        return ts.format(10 + n // 60, n % 60)

    for turn, case in enumerate(cases, start=1):
        place = PLACES[(turn + shift) % len(PLACES)]
        call = f"call{turn}"
        if place == "user":
            ask = f"Here is what I have, fix the deploy:\n{case.text}\nDo not rename the module."
            args: dict[str, Any] = {"command": "make deploy"}
            output = "deploy: ok\n" * 3
        elif place == "tool-output":
            ask = "Show me the config."
            args = {"command": "cat config/settings.txt"}
            output = f"# settings\n{case.text}\n# end\n"
        elif place == "tool-arguments":
            ask = "Run the setup step."
            command = list(case.argv) if case.argv else case.text
            args = {"command": command, "env": {"CI": "1"}, "cwd": "/srv/app"}
            output = "done\n"
        else:
            ask = "What does the API return?"
            args = {"command": "curl -s https://api.local/debug"}
            output = json.dumps({"status": "ok", "debug": {"raw": case.text}}, indent=2)
        records += [
            {"type": "message", "uuid": f"u{turn}", "role": "user", "turnId": turn,
             "timestamp": stamp(), "content": ask},
            {"type": "message", "uuid": f"a{turn}", "role": "assistant", "turnId": turn,
             "timestamp": stamp(), "content": f"Step {turn}: checking.",
             "toolCalls": [{"id": call, "name": "bash", "arguments": args}]},
            {"type": "message", "uuid": f"t{turn}", "role": "tool", "toolCallId": call,
             "toolName": "bash", "turnId": turn, "timestamp": stamp(), "content": output},
            {"type": "message", "uuid": f"r{turn}", "role": "assistant", "turnId": turn,
             "timestamp": stamp(), "content": f"Step {turn} done: `{case.kind}` handled."},
        ]  # fmt: skip
    last = len(cases)
    for turn in range(last + 1, last + 11):
        records += [
            {"type": "message", "uuid": f"u{turn}", "role": "user", "turnId": turn,
             "timestamp": stamp(), "content": f"Next, tidy module {turn}."},
            {"type": "message", "uuid": f"r{turn}", "role": "assistant", "turnId": turn,
             "timestamp": stamp(), "content": f"Module {turn} tidied."},
        ]  # fmt: skip
    return records
