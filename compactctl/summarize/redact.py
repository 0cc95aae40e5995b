"""Secret redaction: what is sent to a model and what compactctl writes holds no secret.

:func:`redact` replaces each secret found in a text by ``[REDACTED:<kind>]`` (so a summary can
still say that a key was involved); :func:`redact_value` does the same inside JSON-like
values (a dict value is judged with its key: ``{"password": "pw"}``), and
:func:`redact_request` inside every string of a :class:`~compactctl.summarize.SummaryRequest`.
The kinds and their sources (:data:`KINDS` lists them all):

- **Provider formats**, as gitleaks' default rules (config/gitleaks.toml, rule ids given
  in :data:`KINDS`) and GitHub secret scanning document them: OpenAI and Anthropic ``sk-``,
  AWS ``AKIA``/``ASIA``/..., Google ``AIza``, GitHub ``ghp_``/``github_pat_``, GitLab
  ``glpat-`` and its other token prefixes, Slack ``xox?-``/``xapp-``, Stripe
  ``sk_live_``, Hugging Face ``hf_``, npm ``npm_``, PyPI ``pypi-AgE``, SendGrid ``SG.``,
  Twilio ``SK``, Mailgun ``key-``, Mailchimp ``-us``, JWTs, Square, Telegram, Databricks,
  Shopify, DigitalOcean, Vault, Grafana, Artifactory, Atlassian, Age, Bedrock, Brevo;
- **private keys**: PEM blocks (BEGIN/END lines, raw or ``\\n``-escaped inside JSON), and
  a body whose BEGIN line is gone (the base64 lines before an END line);
- **credentials in URLs and DSNs**: ``scheme://user:pw@``, ``redis://:pw@``, MySQL
  ``user:pw@tcp(...)``, query parameters such as ``sig=`` / ``access_token=``, Slack,
  Discord and Teams webhook URLs, ``curl -u user:pw``;
- **assignments** (gitleaks' generic-api-key, detect-secrets' KeywordDetector): a name
  holding a secret word (``password``, ``passwd``, ``pwd``, ``passphrase``, ``secret``,
  ``credentials``, ``api_key``, ``AccountKey``, ``private_key_id``, ``*_TOKEN``, ...) with
  ``=``, ``:``, ``:=``, ``=>``: env lines (``SECRET=...``, ``export TOKEN=...``), JSON
  (``"client_secret": "..."``), YAML, INI (the AWS credentials file), code, quoted values
  with spaces, short passwords; ``--password X`` flags; ``Authorization: Basic|Bearer|token
  ...`` headers, their value quoted too (``"Authorization": "Bearer X"`` in JSON, a Python
  dict's repr, YAML; a tool call's ``{"headers": {"Authorization": "Bearer X"}}``); a
  ``.netrc`` entry's ``password X`` (after ``machine``/``default`` and ``login``);
- **cookies**: the values of a ``Cookie:`` header, the first pair of a ``Set-Cookie:``;
- **short-flag passwords**, where the command's program makes the flag one (its first word,
  or after ``sudo``, ``docker exec``, ``ssh HOST``, ...): ``mysql``/``mariadb``/``mysqldump
  -pPW`` (attached; ``-p PW`` prompts, PW is a database), ``sshpass -p``, ``docker``/
  ``podman``/``az login -p``, ``redis-cli -a``, ``openssl -k``/``-K``/``-pass pass:PW``
  (also ``-passin``, ``-passout``), ``htpasswd -b``'s password argument, ``openssl passwd``'s
  arguments, ``curl -b``/``--cookie``'s cookie values (an argument without ``=`` is a cookie
  file's name, curl's manual: kept) and ``curl -u user:PW`` without a URL too; what ``echo``
  or ``printf`` pipes to ``sudo -S`` (``echo PW | sudo -S ...``: any word, ``hello`` too).
  ``grep -p``, ``ls -a``, ``tar -k`` and a ``-p`` after any other program are no password.
  ``mysql --password X`` loses X although mysql then prompts and X names the database: the
  ``--password X`` rule does not know the program, and a database name redacted is harmless;
- **argv arrays**: a list of strings whose first is a word (``["mysql", "-u", "root",
  "-pPW"]``, a shell tool call's command as Codex writes it) is judged as the command
  ``shlex.join`` renders, each string with the strings before it as its command.

A name with ``key``, ``token`` or ``auth`` alone (``cache_key``, ``max_tokens``) is weak:
its value is redacted only when it looks generated (hex of 16+, or letters, digits and
case mixed, or base64); a value that is code (``input.token``, ``get_key()``), a
placeholder (``$TOKEN``, ``<password>``, ``***``) or a type (``password: str``) is kept.

A JSON document printed as text (a tool's output, a tool call's arguments as a string) holds
its newlines as ``\\n`` escapes: a line, and a word, begin after one as after a newline
(``{"raw": "[db]\\npassword = a b c"}`` loses ``a b c``, as the INI line itself does).

Not recognised: a random string with neither a known prefix nor a telling name
(detect-secrets' entropy plugins flag quoted ones; here they would take ids and hashes too),
Discord bot tokens, the data of a Kubernetes Secret, PuTTY key files, a ``Bearer`` token
outside an ``Authorization`` header, a password given by a short flag of a program not listed
above, one piped to ``sudo -S`` by another program than ``echo``/``printf`` (or by a here
string), an argv array inside a JSON text (a tool's output printing one: its strings are
judged one by one).

Speed (``make bench``, row ``redact``; issue 14 asks 50 MB/s): 14 regexes, each starting
with a literal, so each costs about one ``str.find`` over the text; the tokens that share a
character share a regex (``A``: AWS, Google, Artifactory, Age, Bedrock, Atlassian, PyPI,
Telegram; ``k``: names with ``key`` or ``token``, cookies, Stripe, OpenAI, Anthropic,
Mailgun; ``p``: names with ``pass`` or ``pwd``, netrc, Shopify, npm, Databricks, Square;
``-``: PEM lines, ``--password`` and the short flags, sudo's ``-S``; ...), a literal the
text lacks costs a ``str.find`` (a ``memchr`` for one character; ``secret``, ``auth``,
``hf_`` and ``://`` are found so too), and a rule's search starts at its literal's first
occurrence. The case-insensitive rules run on
one lower-cased copy. Matches are judged in Python. detect-secrets (Apache-2.0, on PyPI)
ran at 0.1 MB/s here with its 27 plugins line by line, so it is not used at run time; its
plugins and gitleaks' rule ids are the checklist of :data:`KINDS`, and a test checks that
every secret detect-secrets finds in the secrets corpus is redacted.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import fields, replace
from typing import TYPE_CHECKING, Any, NamedTuple

from compactctl.text import folds_to_ascii

if TYPE_CHECKING:
    from compactctl.summarize import SummaryRequest

__all__ = [
    "KINDS",
    "Finding",
    "find_secrets",
    "redact",
    "redact_messages",
    "redact_request",
    "redact_value",
]

KINDS: dict[str, str] = {
    "private-key": "gitleaks private-key; detect-secrets PrivateKeyDetector",
    "private-key-body": "the base64 body of a PEM key whose BEGIN line is gone",
    "anthropic-key": "gitleaks anthropic-api-key, anthropic-admin-api-key",
    "openai-key": "gitleaks openai-api-key; detect-secrets OpenAIDetector",
    "stripe-key": "gitleaks stripe-access-token; detect-secrets StripeDetector",
    "aws-access-key": "gitleaks aws-access-token; detect-secrets AWSKeyDetector",
    "google-api-key": "gitleaks gcp-api-key",
    "artifactory-key": "gitleaks artifactory-api-key; detect-secrets ArtifactoryDetector",
    "aws-bedrock-key": "gitleaks aws-amazon-bedrock-api-key-long-lived",
    "age-secret-key": "gitleaks age-secret-key",
    "atlassian-token": "gitleaks atlassian-api-token",
    "github-token": "gitleaks github-pat, github-oauth, github-app-token, github-refresh-token,"
    " github-fine-grained-pat; detect-secrets GitHubTokenDetector",
    "gitlab-token": "gitleaks gitlab-pat, gitlab-ptt, gitlab-rrt, gitlab-deploy-token, ...;"
    " detect-secrets GitLabTokenDetector",
    "grafana-token": "gitleaks grafana-cloud-api-token, grafana-service-account-token,"
    " grafana-api-key",
    "slack-token": "gitleaks slack-bot-token, slack-user-token, slack-app-token, ...;"
    " detect-secrets SlackDetector",
    "slack-webhook": "gitleaks slack-webhook-url; detect-secrets SlackDetector",
    "discord-webhook": "Discord webhook URLs (detect-secrets DiscordBotTokenDetector's service)",
    "teams-webhook": "gitleaks microsoft-teams-webhook",
    "brevo-key": "gitleaks sendinblue-api-token",
    "huggingface-token": "gitleaks huggingface-access-token",
    "npm-token": "gitleaks npm-access-token; detect-secrets NpmDetector",
    "pypi-token": "gitleaks pypi-upload-token; detect-secrets PypiTokenDetector",
    "sendgrid-key": "gitleaks sendgrid-api-token; detect-secrets SendGridDetector",
    "twilio-key": "gitleaks twilio-api-key; detect-secrets TwilioKeyDetector",
    "mailgun-key": "gitleaks mailgun-private-api-token",
    "mailchimp-key": "gitleaks mailchimp-api-key; detect-secrets MailchimpDetector",
    "jwt": "gitleaks jwt, 1password-service-account-token; detect-secrets JwtTokenDetector",
    "square-token": "gitleaks square-access-token; detect-secrets SquareOAuthDetector",
    "telegram-token": "gitleaks telegram-bot-api-token; detect-secrets TelegramBotTokenDetector",
    "databricks-token": "gitleaks databricks-api-token",
    "shopify-token": "gitleaks shopify-access-token, shopify-shared-secret, ...",
    "digitalocean-token": "gitleaks digitalocean-pat, digitalocean-access-token, ...",
    "vault-token": "gitleaks vault-service-token, vault-batch-token",
    "url-password": "credentials in a URL; detect-secrets BasicAuthDetector",
    "url-secret": "a secret query parameter of a URL (sig=, access_token=, ...)",
    "dsn-password": "the password of a Go/MySQL DSN user:pw@tcp(...)",
    "curl-auth-user": "gitleaks curl-auth-user",
    "basic-auth": "an Authorization: Basic header (gitleaks curl-auth-header)",
    "bearer-token": "an Authorization: Bearer header",
    "auth-header": "another Authorization scheme (token, Digest, ...)",
    "cookie": "the values of a Cookie or Set-Cookie header (RFC 6265: a session cookie is a"
    " bearer credential)",
    "cli-password": "a password given to a program by a short flag or argument, as its manual"
    " defines it: mysql/mariadb -pPW, sshpass -p, docker/podman/az login -p, redis-cli -a,"
    " openssl -k/-K/-pass pass:, htpasswd -b's password, openssl passwd's, what echo or printf"
    " pipes to sudo -S",
    "assigned-secret": "gitleaks generic-api-key; detect-secrets KeywordDetector, and the"
    " keyword-based provider rules (AWS secret access key, Azure AccountKey, GCP"
    " private_key_id, IBM, Softlayer, Cloudant)",
}
"""Every kind of ``[REDACTED:<kind>]``, with the scanner rules it covers."""


class Finding(NamedTuple):
    """A secret found in a text: ``text[start:end]`` is replaced by ``[REDACTED:kind]``."""

    start: int
    end: int
    kind: str


Span = tuple[int, int, str]
Handler = Callable[[str, str, "re.Match[str]"], Iterator[Span]]


_WORD = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")


def _escape_before(text: str, i: int) -> bool:
    """Whether ``text[i - 2 : i]`` is a ``\\n``, ``\\r`` or ``\\t`` escape: in a JSON
    document printed as text (a tool's output), a line or a word begins after it."""
    return i >= 2 and text[i - 2] == "\\" and text[i - 1] in "nrt"


def _word_start(text: str, i: int) -> bool:
    """Whether a token starting at ``text[i]`` begins a word: at the start, after a
    character that is no word character, or after a ``\\n`` escape."""
    return i == 0 or text[i - 1] not in _WORD or _escape_before(text, i)


# --------------------------------------------------------------------------- provider tokens

_END = r"(?![a-z0-9_\-])"  # (lower-cased text) a token ends where its alphabet does


class _Alt(NamedTuple):
    """One alternative of a rule's regex: ``kind`` (the group's name, ``-`` as ``_``), the
    regex after the rule's literal (a lookbehind may check what precedes the literal), and
    ``left``: characters before the literal that belong to the token (``"digits"``: the
    8-10 digits of a Telegram bot id)."""

    kind: str
    rest: str
    left: int | str = 0


_A = (  # case-sensitive, on the text: the literal is "A"
    # gitleaks takes [A-Z2-7] (base32); detect-secrets [0-9A-Z]: the wider class, so that a
    # key with a 0, 1, 8 or 9 (a fake one in a test, a mistyped one in a log) is not missed
    _Alt("aws-access-key", r"(?:KIA|SIA|BIA|CCA|3T[A-Z0-9])[0-9A-Z]{16}(?![A-Za-z0-9])"),
    _Alt("google-api-key", r"Iza[0-9A-Za-z_\-]{35}(?![A-Za-z0-9_\-])"),
    _Alt("artifactory-key", r"KCp[A-Za-z0-9]{69}(?![A-Za-z0-9])"),
    _Alt("aws-bedrock-key", r"BSK[A-Za-z0-9+/]{109,269}={0,2}"),
    _Alt("age-secret-key", r"GE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}"),
    _Alt("atlassian-token", r"TATT3[A-Za-z0-9_\-=]{100,}"),
    _Alt("pypi-token", r"(?<=pypi-A)gE[A-Za-z0-9_\-]{50,}", 5),
    _Alt("telegram-token", r"(?<=[0-9]{8}:A)A[0-9A-Za-z_\-]{33}(?![0-9A-Za-z_\-])", "digits"),
)
_S = (  # case-sensitive: "S"
    _Alt("twilio-key", r"K[0-9a-fA-F]{32}(?![A-Za-z0-9])"),
    _Alt("sendgrid-key", r"G\.[A-Za-z0-9_\-]{16,32}\.[A-Za-z0-9_\-]{16,64}"),
)
_K = (  # lower-cased: "k" (names with "key" or "token" are in the same regex)
    _Alt("mailgun-key", r"ey-[0-9a-f]{32}(?![0-9a-z])"),
    _Alt("stripe-key", r"_(?<=[rs]k_)(?:live|test|prod)_[a-z0-9]{10,99}", 1),
    _Alt("anthropic-key", r"-(?<=sk-)ant-[a-z0-9_\-]{20,}", 1),
    _Alt("openai-key", r"-(?<=sk-)(?:proj-|svcacct-|admin-|or-v1-)?[a-z0-9_\-]{20,}", 1),
)
_G = (  # lower-cased: "g"
    _Alt("github-token", r"h[pousr]_[a-z0-9]{36,}|ithub_pat_[a-z0-9_]{22,}"),
    _Alt(
        "gitlab-token",
        r"l(?:pat|dt|rt|ptt|ft|imt|agent|oas|soat|cbt|ffct)-[\w\-]{20,}(?:\.[0-9a-z]{9})?",
    ),
    _Alt("grafana-token", r"lc_[a-z0-9+/]{32,400}={0,3}|lsa_[a-z0-9]{32}_[a-f0-9]{8}"),
)
_X = (  # lower-cased: "x"
    _Alt(
        "slack-token",
        r"ox[abposre]-[a-z0-9\-]{10,}|oxe\.xox[bp]-\d-[a-z0-9]{100,}|app-\d-[a-z0-9]+-\d+-[a-z0-9]+",
    ),
    _Alt("brevo-key", r"keysib-[a-f0-9]{64}-[a-z0-9]{16}"),
)
_HF = (_Alt("huggingface-token", r"[a-z0-9]{30,}" + _END),)  # lower-cased: "hf_"
_V = (  # lower-cased: "v"
    _Alt("vault-token", r"(?<=hv)[sb]\.[a-z0-9_\-]{90,300}", 1),
    _Alt("digitalocean-token", r"(?<=do[opr]_v)1_[a-f0-9]{64}", 4),
)
_P = (  # lower-cased: "p" (names with "pass" or "pwd" are in the same regex)
    _Alt("shopify-token", r"(?<=shp)(?:at|ca|pa|ss)_[a-f0-9]{32}", 2),
    _Alt("npm-token", r"(?<=np)m_[a-z0-9]{36,}" + _END, 1),
    _Alt("databricks-token", r"(?<=dap)i[a-f0-9]{32}(?:-\d)?(?![a-z0-9])", 2),
    _Alt("square-token", r"(?<=sq0atp|sq0csp)-[a-z0-9_\-]{22,60}", 5),
)
_J = (  # lower-cased: "j", the third letter of "eyJ" (rarer than its first)
    _Alt(
        "jwt",
        r"(?<=eyj)[a-z0-9_\-]{8,}={0,2}\.[a-z0-9_\-]{8,}={0,2}(?:\.[a-z0-9_\-+/]*={0,2})?"
        r"|(?<=eyj)[a-z0-9+/_\-]{60,}={0,3}",
        2,
    ),
)


def _group(alt: _Alt) -> str:
    return f"(?P<{alt.kind.replace('-', '_')}>{alt.rest})"


def _token(alt: _Alt) -> Handler:
    """The whole match, with ``alt.left`` characters before it, unless it starts in the
    middle of a word."""

    def handler(text: str, low: str, m: re.Match[str]) -> Iterator[Span]:
        start = m.start()
        if alt.left == "digits":
            start -= 1  # the colon
            while start > 0 and text[start - 1].isdigit() and m.start() - start < 11:
                start -= 1
        else:
            start -= int(alt.left)
        if _word_start(text, start):
            yield start, m.end(), alt.kind

    return handler


def _mailchimp(text: str, low: str, m: re.Match[str]) -> Iterator[Span]:
    """``<32 hex>-us<dc>``: the hex before ``-us`` is part of the key."""
    start = m.start() - 32
    if _word_start(text, start):
        yield start, m.end(), "mailchimp-key"


# --------------------------------------------------------------------------- private keys

_B64 = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")
_PEM_RE = (
    r"----(?:begin|end)[a-z0-9 _\-]{0,40}private key(?: block)?-----"
    r"|----begin (?:ssh2 encrypted|openssh) private key-----"
)
"""A PEM private key's BEGIN or END line, lower-cased, after its first ``-``."""
_PEM_END = re.compile(r"-----end[a-z0-9 _\-]{0,40}private key(?: block)?-----")
_ESCAPES = ("\\n", "\\r", "\\t")


def _body_end(text: str, i: int, limit: int = 16384) -> int:
    """The end of a base64 body starting at ``i``: base64 characters, whitespace, armor
    header lines (``Proc-Type:``, ``Version:``) and ``\\n`` escapes, up to ``limit`` chars."""
    stop = min(len(text), i + limit)
    last = i
    while i < stop:
        c = text[i]
        if c in _B64:
            i += 1
            last = i
        elif c in " \t\r\n":
            i += 1
        elif c == "\\" and text.startswith(_ESCAPES, i):
            i += 2
        else:
            break
    return last


def _body_start(text: str, i: int, limit: int = 16384) -> int:
    """The start of the base64 body that ends at ``i`` (the mirror of :func:`_body_end`)."""
    stop = max(0, i - limit)
    first = i
    while i > stop:
        c = text[i - 1]
        if c in "nrt" and i >= 2 and text[i - 2] == "\\":
            i -= 2  # a \n escape: backslash is no base64 character
        elif c in _B64:
            i -= 1
            first = i
        elif c in " \t\r\n":
            i -= 1
        else:
            break
    return first


def _pem(text: str, low: str, m: re.Match[str]) -> Iterator[Span]:
    """A BEGIN line and its body up to the END line (or as far as the body goes); an END
    line and the body before it (its BEGIN line fell in a clipped middle)."""
    if low.startswith("-----begin", m.start()):
        end = _PEM_END.search(low, m.end(), m.end() + 65536)
        if end is not None and _body_end(text, m.end(), 65536) >= end.start() - 1:
            yield m.start(), end.end(), "private-key"
        else:
            yield m.start(), max(m.end(), _body_end(text, m.end())), "private-key"
    else:
        start = _body_start(text, m.start())
        yield start, m.end(), ("private-key" if start == m.start() else "private-key-body")


# --------------------------------------------------------------------------- URLs and DSNs

_URL_END = re.compile(r"[\s\"'<>`\\|{}^]|$")
_USERINFO = re.compile(r"[^/\s:@?#\[\]]*:[^/\s@?#\[\]]+(?=@)")
_WEBHOOKS = re.compile(
    r"(?P<slack_webhook>hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/_\-]{20,})"
    r"|(?P<discord_webhook>(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/\d+/[\w\-]{20,})"
    r"|(?P<teams_webhook>[\w\-]+\.webhook\.office\.com/webhookb?2?/[\w@/\-]{20,})"
)
_QUERY_SECRET = re.compile(
    r"[?&;](?:sig|signature|x-amz-signature|x-amz-security-token|token|access_token|"
    r"refresh_token|id_token|api_key|apikey|api-key|key|password|passwd|pwd|secret|"
    r"client_secret|private_token|auth|code)=([^&#;\s]+)",
    re.IGNORECASE,
)


def _url(text: str, low: str, m: re.Match[str]) -> Iterator[Span]:
    """``://``: the user:password before ``@``, a webhook's secret path, secret query
    parameters."""
    start = m.end()
    end = _URL_END.search(text, start, start + 4096)
    stop = end.start() if end is not None else min(len(text), start + 4096)
    info = _USERINFO.match(text, start, stop)
    if info is not None:
        yield info.start(), info.end(), "url-password"
    hook = _WEBHOOKS.match(text, start, stop)
    if hook is not None and hook.lastgroup is not None:
        yield hook.start(), hook.end(), hook.lastgroup.replace("_", "-")
    if "=" in text[start:stop]:
        for q in _QUERY_SECRET.finditer(text, start, stop):
            value = q.group(1)
            if len(value) >= 8 and not _placeholder(value):
                yield q.start(1), q.end(1), "url-secret"
    line = text.rfind("\n", 0, m.start()) + 1
    if "curl" in low[line : m.start()]:
        yield from _curl(text, line, text.find("\n", m.start()))


_DSN_USER = re.compile(r"([^\s:@/'\"`=(]+):([^\s@'\"`]+)$")


def _dsn(text: str, low: str, m: re.Match[str]) -> Iterator[Span]:
    """``user:pw@tcp(host)`` (Go's MySQL driver): the password before ``@``."""
    head = text[max(0, m.start() - 256) : m.start()]
    found = _DSN_USER.search(head)
    if found is not None:
        base = m.start() - len(head)
        yield base + found.start(2), base + found.end(2), "dsn-password"


_CURL_USER = re.compile(r"(?:-u|--user)(?:=|[ \t]+)(['\"]?)([^\s'\":]+):([^\s'\"]+)\1")


def _curl(text: str, start: int, end: int) -> Iterator[Span]:
    """``curl ... -u user:pw`` on the line ``text[start:end]`` (``end`` -1: to the end)."""
    stop = end if end >= 0 else len(text)
    for u in _CURL_USER.finditer(text, start, min(stop, start + 4096)):
        if not _placeholder(u.group(3)):
            yield u.start(3), u.end(3), "curl-auth-user"


# --------------------------------------------------------------------------- assignments


def _wordset(words: str) -> frozenset[str]:
    return frozenset(words.split())


_STRONG = _wordset(
    "password passwd passphrase pwd pass pw secret secrets credential credentials creds "
    "apikey privatekey secretkey accesskey accountkey sharedaccesskey masterkey authkey "
    "signingkey encryptionkey clientkey consumerkey appkey hmackey authtoken accesstoken "
    "refreshtoken idtoken sessiontoken bearertoken oauthtoken clientsecret jwtsecret"
)
"""Name words whose value is a secret whatever it looks like."""

_SUFFIXES = ("password", "passwd", "passphrase", "secret", "pwd")
"""A name word ending with one of these is strong too (``PGPASSWORD``, ``jwtsecret``)."""

_WEAK = _wordset("key token auth authorization")
"""Name words whose value is redacted only when it looks generated, unless a qualifier
(:data:`_QUALIFIERS`) or the env style (``TOKEN=...``) makes them strong."""

_QUALIFIERS = _wordset(
    "api access secret private auth account shared master signing encryption client "
    "refresh session bearer oauth personal admin deploy bot app service id consumer "
    "webhook csrf license subscription storage"
)

_NOT_SECRET = _wordset(
    "count counts length len size type types name names file files path paths dir url uri "
    "endpoint endpoints ids prefix suffix header headers field fields env var vars ref "
    "arn version versions policy rotation store manager provider method mode required "
    "enabled used usage budget window limit limits max min expiry expires expiration ttl "
    "timeout format hint prompt label placeholder help column regex pattern error errors "
    "message valid validation check changed updated created at source location scheme "
    "index list bits algorithm encoding kind class schema spec generator reset strength "
    "tokens keys passed passes passing hash hashed salt rounds policy lookup reader "
    "loader cache"
)
"""A last name word that makes the name about a secret, not the secret (``token_count``,
``secret_name``, ``password_file``)."""

_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.$@")
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_TYPES = _wordset(
    "str string bytes int integer bool boolean float number none null nil true false any "
    "optional undefined object dict list map secretstr secretbytes char varchar text"
)
_LINE_LEAD = re.compile(r"(?:[ \t]*(?:export|set|setx|env|ENV|ARG|-)?[ \t]+|[ \t]*)$")


@functools.lru_cache(maxsize=4096)
def _name_class(name: str) -> int:
    """2 for a strong name, 1 for a weak one, 0 for a name that holds no secret (cached: a
    session's tool arguments repeat a few keys thousands of times)."""
    words = _WORDS.findall(name.lower() if name.isupper() or name.islower() else name)
    words = [w.lower() for w in words] if not name.islower() else words
    if not words or words[-1] in _NOT_SECRET:
        return 0
    strong = any(w in _STRONG or w.endswith(_SUFFIXES) for w in words)
    if strong:
        return 2
    weak = [i for i, w in enumerate(words) if w in _WEAK]
    if not weak:
        return 0
    if any(w in _QUALIFIERS for w in words[: weak[-1]]):
        return 2
    return 1


def _placeholder(value: str) -> bool:
    """A value that stands for a secret without being one: empty, a variable or template
    (``$X``, ``${X}``, ``{{x}}``, ``<x>``, ``%(x)s``), a mask (``***``, ``xxxx``), a type,
    ``null``/``true``/..., or an earlier redaction."""
    v = value.strip()
    if not v:
        return True
    low = v.lower()
    if low in _TYPES or v.startswith(("$", "{{", "%(", "[REDACTED", "REDACTED")):
        return True
    if v[0] == "<" and v[-1] == ">":
        return True
    return not v.strip("*xX.#?-_•") or low.startswith(("os.environ", "process.env", "getenv"))


_CODE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+|[A-Za-z_]\w*\(.*")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z_]*")
_PATHISH = re.compile(
    r"(?:/|\./|\.\./|~/|[A-Za-z]:\\|https?://|file:).*"
    r"|.*\.(?:pem|key|json|txt|ya?ml|env|crt|cer|p12|pfx|jks|toml|ini|cfg|conf|py|js|ts)$"
)


def _generated(value: str) -> bool:
    """A value that looks generated, not written: 16+ characters without spaces that are
    hex with 4+ digits (a UUID too), or mix digits with upper- and lower-case letters, or
    use base64's ``+/``."""
    if len(value) < 16 or any(c.isspace() for c in value):
        return False
    digits = sum(c.isdigit() for c in value)
    if digits >= 4 and all(c in "0123456789abcdefABCDEF-" for c in value):
        return True
    has_upper = any(c.isupper() for c in value)
    has_lower = any(c.islower() for c in value)
    if digits and has_upper and has_lower:
        return True
    return digits >= 2 and ("+" in value or "/" in value) and len(value) >= 20


def _plausible(value: str, quoted: bool, code: bool) -> bool:
    """A strong name's value that is a literal, not code, a path or a placeholder."""
    if _placeholder(value):
        return False
    if not quoted:
        if code and (_CODE.fullmatch(value) or _IDENT.fullmatch(value)):
            return False  # password=get_password(), token=self.token, password=password
        if any(c in value for c in "()[]{}") and not any(c.isdigit() for c in value):
            return False
    return not _PATHISH.fullmatch(value)


_SCHEMES = ("basic", "bearer", "token", "digest", "negotiate", "ntlm", "apikey", "sso-key")


_UNQUOTED = re.compile(r"""(?:[^\s"'`,;)}\]>&\\]|\\(?![nrt"']))*""")
_LINE_REST = re.compile(r"(?:[^\r\n\\ \t]|[ \t](?!#)|\\(?![nrt]))*")
_GENERATED_START = re.compile(r"""\\?["'`]?[A-Za-z0-9+/=_\-.~]{16}""")


def _value(text: str, i: int, line_style: bool) -> tuple[int, int, bool]:
    """``(start, end, quoted)`` of the value that starts at ``text[i]``: a quoted string to
    its closing quote on the same line (``\\"`` quotes in JSON inside JSON too), else the
    rest of a config line (``line_style``; a `` #`` comment and trailing ``,;`` dropped),
    else a run of characters up to a delimiter. Values are cut at 8,192 characters."""
    c = text[i : i + 2]
    if c[:1] in ("'", '"', "`") and c or c in ('\\"', "\\'"):
        quote = c if c[0] == "\\" else c[0]
        start = i + len(quote)
        eol = text.find("\n", start, start + 8192)
        stop = eol if eol >= 0 else min(len(text), start + 8192)
        j = text.find(quote, start, stop)
        while j > start and len(quote) == 1 and text[j - 1] == "\\":
            j = text.find(quote, j + 1, stop)
        return start, (j if j >= 0 else stop), True
    if line_style:
        end = _LINE_REST.match(text, i, i + 8192).end()  # type: ignore[union-attr]
        return i, len(text[i:end].rstrip(" \t,;")) + i, False
    end = _UNQUOTED.match(text, i, i + 8192).end()  # type: ignore[union-attr]
    while end > i and text[end - 1] in ".:":
        end -= 1
    return i, end, False


def _quote_len(text: str, i: int) -> int:
    """The length of the quote that opens ``text[i:]``: 1 for ``"``, ``'`` or a backtick, 2
    for ``\\"`` or ``\\'`` (JSON inside a JSON string), else 0."""
    c = text[i : i + 1]
    if c in ("'", '"', "`") and c:
        return 1
    return 2 if c == "\\" and text[i + 1 : i + 2] in ('"', "'") else 0


@functools.lru_cache(maxsize=256)
def _auth_name(name: str) -> bool:
    """Whether a name is an Authorization header's (its last word ``auth`` or
    ``authorization``: ``Authorization``, ``Proxy-Authorization``, ``auth``)."""
    words = _WORDS.findall(name)
    return bool(words) and words[-1].lower() in ("auth", "authorization")


def _template(value: str) -> bool:
    """A value that code fills in: ``{token}`` (an f-string, ``str.format``), ``#{token}``."""
    return value[:1] in ("{", "#") and value[-1:] == "}"


def _credential(text: str, low: str, i: int) -> Span | None:
    """The credential of an ``Authorization`` value that starts at ``text[i]`` with a scheme
    word (``Bearer X``, ``Basic X``, ``token X``), bare or quoted (``"Bearer X"``,
    ``'Bearer X'``, ``\\"Bearer X\\"``): the span to redact, which keeps the quotes, and
    the scheme word but for ``Bearer`` (``Authorization: [REDACTED:bearer-token]``). An empty
    span for a placeholder or a template (``Bearer $TOKEN``, ``f"Bearer {token}"``,
    ``"Bearer " + token``); ``None`` when the value opens with no scheme word (RFC 9110,
    section 11.6.2: ``Authorization: <scheme> <credentials>``)."""
    quote = _quote_len(text, i)
    start = i + quote
    scheme_end = low.find(" ", start, start + 12)
    scheme = low[start:scheme_end]
    if scheme_end < 0 or scheme not in _SCHEMES:
        return None
    kind = {"basic": "basic-auth", "bearer": "bearer-token"}.get(scheme, "auth-header")
    if quote:
        s, e, _ = _value(text, i, False)  # to the closing quote
        s = scheme_end + 1
        e = s + len(text[s:e].rstrip())
    else:
        s, e, _ = _value(text, scheme_end + 1, False)
    value = text[s:e]
    if e - s < 6 or _placeholder(value) or _template(value):
        return s, s, kind
    return (start if kind == "bearer-token" else s), e, kind


def _assignment(text: str, low: str, m: re.Match[str]) -> Iterator[Span]:
    """``NAME op VALUE`` where NAME holds the keyword found: judged by :func:`_name_class`
    and the value's shape (see the module docstring)."""
    kw = m.start()
    start = kw
    while start > 0 and text[start - 1] in _NAME_CHARS and kw - start < 64:
        if _escape_before(text, start):
            break  # ``\\npassword = ...``: the name begins a line of an escaped text
        start -= 1
    name = text[start : m.start("close")].lstrip("$@-.")
    if not name.isascii():
        name = name.translate(_FOLD_NAME)
    strength = _name_class(name)
    if not strength:
        return
    op = m.group("op")
    spaced = bool(m.group("sp1") or m.group("sp2"))
    env = op == "=" and not spaced and name.isupper()
    i = m.end()
    if strength == 1 and not env:
        # weak name: only a generated-looking value (or an Authorization scheme) is a secret
        if _GENERATED_START.match(text, i) is None and not low.startswith(
            _SCHEMES, i + _quote_len(text, i)
        ):
            return
    elif strength == 1:
        strength = 2  # TOKEN=..., API_KEY=...
    if _auth_name(name):
        found = _credential(text, low, i)
        if found is not None:
            if found[1] > found[0]:
                yield found
            return
    lead = text[max(0, start - 32) : start]
    # the line's start: after a newline, or after a ``\\n`` escape (in an escaped text)
    escaped = max(lead.rfind("\\n"), lead.rfind("\\r"))
    nl = max(lead.rfind("\n"), escaped + 1 if escaped >= 0 else -1)
    line_style = (nl >= 0 or start <= 32) and _LINE_LEAD.fullmatch(lead[nl + 1 :]) is not None
    # a config line's value runs to its end (YAML ``key: a b``, INI ``key = a b``); a shell
    # assignment's (``KEY=a b``) to the first space
    s, e, quoted = _value(text, i, line_style and (op == ":" or spaced))
    value = text[s:e]
    if not quoted and value.lower() in _TYPES:
        # ``password: str = "hunter2"``: the value follows the annotation
        after = _ANNOTATED.match(text, e)
        if after is None:
            return
        s, e, quoted = _value(text, after.end(), False)
        value = text[s:e]
    if strength == 2:
        # an unquoted word in code or prose is a variable unless it holds a digit or symbol
        ok = _plausible(value, quoted, code=not line_style and not env)
    else:
        ok = not _placeholder(value) and _generated(value)
    if ok and e > s:
        yield s, e, "assigned-secret"


_ANNOTATED = re.compile(r"[ \t]*=[ \t]*")
_ASSIGN_TAIL = (
    r"(?P<tail>[a-z0-9_\-]{0,30})(?P<close>(?:\\?[\"'`])?\]?)(?P<sp1>[ \t]{0,3})"
    r"(?P<op>=>|:=|\?=|=(?!=)|:(?![:/]))(?P<sp2>[ \t]{0,3})"
)
_FLAG_RE = (
    r"-(?:[a-z0-9]+[-_])*(?P<kw>password|passwd|pass|pwd|passphrase|token|secret|api-?key|key"
    r"|auth)(?P<flag_op>=|[ \t]+)"
)
"""``--name VALUE`` / ``--name=VALUE``, lower-cased, after the first ``-``."""


def _flag(text: str, low: str, m: re.Match[str]) -> Iterator[Span]:
    """``--password X``, ``--api-key=X``, ``--with-token X``: strong for password-like
    flags, else the value must look generated."""
    s, e, quoted = _value(text, m.end(), False)
    value = text[s:e]
    if value.startswith("-") or _placeholder(value):
        return
    strong = m.group("kw") in ("password", "passwd", "pass", "pwd", "passphrase", "secret")
    if (strong and _plausible(value, quoted, code=False)) or _generated(value):
        yield s, e, "assigned-secret"


# --------------------------------------------------------------------------- command lines

_PROGRAMS = {
    "mysql": "mysql",
    "mysqldump": "mysql",
    "mysqladmin": "mysql",
    "mariadb": "mysql",
    "mariadb-dump": "mysql",
    "sshpass": "sshpass",
    "docker": "login",
    "podman": "login",
    "az": "login",
    "redis-cli": "redis-cli",
    "openssl": "openssl",
    "htpasswd": "htpasswd",
    "curl": "curl",
}
"""The programs whose short flag (or argument) is a password, by the group that says which:
``mysql``: ``-pPW`` attached (``-p PW`` prompts and names a database); ``sshpass``: ``-p``;
``login`` (``docker login``, ``podman login``, ``az login``): ``-p``; ``redis-cli``: ``-a``;
``openssl``: ``-k``, ``-K`` (the key itself), ``-pass``/``-passin``/``-passout pass:PW``;
``htpasswd``: ``-b``'s password, the last argument; ``curl``: ``-b``/``--cookie``'s cookies
(an argument without ``=`` is a cookie file's name) and ``-u``/``--user``'s password after
the first ``:`` (each program's manual page)."""

_ENDS = ";|&`("
"""What ends a command before its program (a line, ``;``, a pipe, ``&&``, ``$(``; and a
``\\n`` escape)."""
_PROGRAM_HINT = re.compile("|".join(sorted(_PROGRAMS)))
_SHELL_WORD = re.compile(r"""(?:[^\s;|&<>()`'"\\]|\\(?![nrt"']))+""")
_ARG_SPLIT = re.compile(r"(?:\s|\\[nrt])+")


_OPENERS = "\"'\\[{(`"
"""What may precede a word in a command written inside code or JSON (``["mysql``)."""


def _program(low: str, flag: int) -> tuple[str, list[str]] | None:
    """The program group (:data:`_PROGRAMS`) of the command whose flag starts at
    ``low[flag]``, and the words between the program and the flag; ``None`` when no known
    program comes before the flag in its command (``grep -p``, ``ls -a``, ``echo mysql; tar
    -k``). The program is the nearest known one (``docker exec db mysql -pX``: ``mysql``); a
    command ends at a line, ``;``, a pipe, ``&&`` or ``$(``, unless that is quoted (an odd
    number of ``'`` or ``"`` between it and the flag: ``curl -b 'a=1; b=2' -u``)."""
    lo = max(0, flag - 512)
    lo = max(lo, low.rfind("\n", lo, flag) + 1)  # one memrchr: the line, then the command
    if _PROGRAM_HINT.search(low, lo, flag) is None:
        return None  # the common case (mkdir -p, ls -a): no known program on the line
    escape = low.rfind("\\n", lo, flag)
    lo = escape + 2 if escape >= 0 else lo
    start = max(lo, *[low.rfind(c, lo, flag) + 1 for c in _ENDS])
    while start > lo and (low.count("'", start, flag) % 2 or low.count('"', start, flag) % 2):
        start = max(lo, *[low.rfind(c, lo, start - 1) + 1 for c in _ENDS])
    words = low[start:flag].split()
    for k in range(len(words) - 1, -1, -1):
        word = words[k].rsplit('"', 1)[-1].rsplit("'", 1)[-1]  # {"k":"mysql: after a quote
        group = _PROGRAMS.get(word.lstrip(_OPENERS).rsplit("/", 1)[-1])
        if group is not None:
            return group, words[k + 1 :]
    return None


def _two_words(words: list[str]) -> bool:
    """Whether two words in a row are no flag (the options have ended: a command follows)."""
    return any(a[:1] != "-" and b[:1] != "-" for a, b in zip(words, words[1:], strict=False))


def _arg(text: str, i: int, skip: bool = True) -> tuple[int, int, int] | None:
    """The command-line argument at ``text[i]`` (after spaces when ``skip``): ``(start, end,
    next)``, its text without quotes and where the next one may start; ``None`` at the end
    of the command."""
    if skip:
        while i < len(text) and text[i] in " \t":
            i += 1
    quote = _quote_len(text, i)
    if quote:
        s, e, _ = _value(text, i, False)
        return s, e, e + quote
    m = _SHELL_WORD.match(text, i)
    return None if m is None else (i, m.end(), m.end())


def _password_arg(text: str, found: tuple[int, int, int] | None) -> Iterator[Span]:
    """A command-line password argument, unless it is a placeholder or another flag."""
    if found is not None:
        s, e, _ = found
        value = text[s:e]
        if not value.startswith("-") and not _placeholder(value) and not _template(value):
            yield s, e, "cli-password"


def _command_flag(text: str, low: str, m: re.Match[str]) -> Iterator[Span]:
    """`` -p``, `` -a``, `` -k``, `` -u``, `` -pass``, a cluster with ``b``, curl's
    ``--cookie``/``--user``: a password when the command's program (:func:`_program`) makes
    it one (:data:`_PROGRAMS`); `` -S``, ``--stdin``: sudo's (:func:`_sudo_stdin`)."""
    flag = m.start()  # the "-"
    word = _SHELL_WORD.match(text, flag)
    end = word.end() if word is not None else m.end()
    name = text[flag + 1 : end]  # as written: -P (a port) is not -p
    if "S" in name or name == "-stdin":
        yield from _sudo_stdin(text, low, flag)  # sudo -S, -kS, --stdin
    if name[:1] in ("s", "S") and "b" not in name and "u" not in name:
        return  # -s, -S: no password flag of a program in _PROGRAMS
    lo = max(0, flag - 512)
    if name[:1] == "u" and low.rfind("curl", max(lo, low.rfind("\n", lo, flag) + 1), flag) < 0:
        return  # -u: only curl's, on the line (mysql -u, git push -u are common)
    found = _program(low, flag)
    if found is None:
        return
    group, between = found
    if group == "curl":
        yield from _curl_flag(text, flag, name, end)
        return
    attached = name[:1] == "p" and len(name) > 1 or text[flag + 2 : flag + 3] in ("'", '"')
    if group == "sshpass" and _two_words(between):
        return  # sshpass -p PW ssh host mkdir -p /x: -p is the wrapped command's
    if group == "mysql" or (group in ("sshpass", "login") and attached):
        # -pPW (mysql: only so; -p PW prompts and PW names the database)
        if attached and name[:1] == "p" and (group != "login" or "login" in between):
            yield from _password_arg(text, _arg(text, flag + 2, skip=False))
    elif group in ("sshpass", "login", "redis-cli", "openssl"):
        wanted = {"sshpass": ("p",), "login": ("p",), "redis-cli": ("a",)}.get(
            group, ("k", "K", "pass", "passin", "passout")
        )
        if name not in wanted or (group == "login" and "login" not in between):
            return
        arg = _arg(text, end)
        if group == "openssl" and name.startswith("pass"):
            if arg is None or not low.startswith("pass:", arg[0]):
                return
            arg = (arg[0] + 5, arg[1], arg[2])
        yield from _password_arg(text, arg)
    elif group == "htpasswd" and name.isalpha() and "b" in name:
        # htpasswd -b[cmBdpsD] [-C cost] [-r rounds] FILE USER PASSWORD (-n: USER PASSWORD)
        wanted_index = 1 if any("n" in w for w in between if w[:1] == "-") or "n" in name else 2
        args: list[tuple[int, int, int]] = []
        i = end
        takes_value = False
        while len(args) <= wanted_index:
            arg = _arg(text, i)
            if arg is None:
                return
            i = arg[2]
            value = text[arg[0] : arg[1]]
            if takes_value:
                takes_value = False
            elif value.startswith("-") and arg[1] == arg[2]:  # a flag, not a quoted "-x"
                takes_value = value in ("-C", "-r")
                if "n" in value:
                    wanted_index = 1
            else:
                args.append(arg)
        yield from _password_arg(text, args[wanted_index])


def _curl_flag(text: str, flag: int, name: str, end: int) -> Iterator[Span]:
    """curl's ``-b``/``--cookie`` (``-b 'sid=X; csrf=Y'``: every cookie's value; an argument
    without ``=`` names a cookie file, curl's manual) and ``-u``/``--user`` (``-u user:pw``:
    what follows the first ``:``; ``-u user`` prompts), the value after a space, an ``=``
    (``--cookie=X``) or attached (``-bX``, ``-uX``); a cluster may end with the flag
    (``-sb X``)."""
    base, eq, _ = name.partition("=")
    if base in ("-cookie", "-user"):
        cookie = base == "-cookie"
        arg = _arg(text, flag + 2 + len(base), skip=False) if eq else _arg(text, end)
    elif base[:1] in ("b", "u") and len(base) > 1 and not eq:
        cookie = base[0] == "b"
        arg = _arg(text, flag + 2, skip=False)
    elif base.isalpha() and base[-1:] in ("b", "u"):
        cookie = base[-1] == "b"
        arg = _arg(text, end)
    else:
        return
    if arg is None:
        return
    s, e, _ = arg
    if cookie:
        if "=" in text[s:e]:
            yield from _cookie_values(text, s, e, False)
        return
    colon = text.find(":", s, e)
    if colon >= 0 and not _placeholder(text[colon + 1 : e]) and not _template(text[colon + 1 : e]):
        yield colon + 1, e, "curl-auth-user"


_SUDO_VALUED = frozenset("ugphCrtUDTR")
"""sudo's short options that take a value (``-u USER``, ``-p PROMPT``, ...; sudo's manual)."""
_SUDO_LONG_VALUED = _wordset(
    "user group prompt host close-from role type other-user chdir chroot command-timeout"
)


def _sudo_reads_stdin(text: str, i: int) -> bool:
    """Whether the sudo options that start at ``text[i]`` hold ``-S`` (alone, in a cluster
    such as ``-kS``, or ``--stdin``) before the command sudo runs."""
    takes_value = False
    while (arg := _arg(text, i)) is not None:
        word = text[arg[0] : arg[1]]
        i = arg[2]
        if takes_value:
            takes_value = False
        elif word == "--stdin":
            return True
        elif word.startswith("--"):
            takes_value = "=" not in word and word[2:] in _SUDO_LONG_VALUED
        elif word.startswith("-") and len(word) > 1:
            for k, c in enumerate(word[1:], start=1):
                if c == "S":
                    return True
                if c in _SUDO_VALUED:
                    takes_value = k == len(word) - 1
                    break
        else:
            return False
    return False


def _sudo_stdin(text: str, low: str, flag: int) -> Iterator[Span]:
    """``echo PW | sudo -S CMD`` and ``printf '%s\\n' PW | sudo -S CMD`` (``flag``: where
    ``-S`` starts): ``-S`` reads the password from the pipe (sudo's manual), so what ``echo``
    or ``printf`` writes is one (``echo``: its arguments after ``-n``/``-e``; ``printf``: its
    arguments after the format, else the format; a trailing ``\\n`` is kept)."""
    lo = max(0, flag - 256)
    at = low.rfind("sudo", max(lo, low.rfind("\n", lo, flag) + 1), flag)  # on the line
    if at < 0 or not _word_start(text, at) or not _sudo_reads_stdin(text, at + 4):
        return
    j = at
    while j > 0 and text[j - 1] in " \t":
        j -= 1
    if j < 1 or text[j - 1] != "|" or text[j - 2 : j - 1] == "|":
        return
    lo = max(0, j - 512, text.rfind("\n", 0, j) + 1)
    lo = max(lo, *[text.rfind(c, lo, j - 1) + 1 for c in ";&`("])
    # the nearest echo or printf word (in JSON the command may follow a quote or a \n escape)
    for program in ("echo", "printf"):
        at = low.rfind(program, lo, j)
        if at >= 0 and _word_start(text, at):
            words: list[tuple[int, int, int]] = []
            i = at + len(program)
            while (arg := _arg(text, i)) is not None and arg[2] <= j:
                words.append(arg)
                i = arg[2]
            if text[i:j].strip(" \t") == "|":
                yield from _piped_words(text, program, words)
                return


def _piped_words(text: str, program: str, words: list[tuple[int, int, int]]) -> Iterator[Span]:
    """What ``echo`` or ``printf`` (``program``) writes, given its arguments ``words``."""
    if program == "echo":
        while words and text[words[0][0] : words[0][1]] in ("-n", "-e", "-E", "-ne", "-en"):
            words = words[1:]
    else:
        words = words[1:] or words  # printf FORMAT ARGS: the arguments, else the format
    for s, e, nxt in words:
        if text.endswith("\\n", s, e):
            e -= 2
        yield from _password_arg(text, (s, e, nxt))


_OPENSSL_VALUED = _wordset("-salt -in -rand -writerand -provider -provider-path -propquery")
"""``openssl passwd``'s options that take a value (its manual page)."""


def _openssl_passwd(text: str, low: str, m: re.Match[str]) -> Iterator[Span]:
    """``openssl passwd [options] PW...``: each password it hashes (its manual page); the
    arguments end where one is not after a space (``"...PW"`` in JSON: the string's end)."""
    i = m.end()
    takes_value = False
    while text[i : i + 1] in (" ", "\t") and (arg := _arg(text, i)) is not None:
        word = text[arg[0] : arg[1]]
        i = arg[2]
        if takes_value:
            takes_value = False
        elif word.startswith("-") and arg[1] == arg[2]:
            takes_value = word in _OPENSSL_VALUED
        else:
            yield from _password_arg(text, arg)


_NETRC_WORDS = ("machine", "login", "account")


def _netrc(text: str, low: str, m: re.Match[str]) -> Iterator[Span]:
    """``password X`` in a ``.netrc`` entry (``machine HOST login USER password X``, over one
    line or several; ``default login USER password X``): the words before ``password`` are
    netrc pairs back to ``machine`` or ``default`` (curl's and ftp's netrc format)."""
    kw = m.start()
    window = low[max(0, kw - 256) : kw]
    if not _word_start(text, kw) or ("machine" not in window and "default" not in window):
        return
    words = [w.lstrip(_OPENERS) for w in _ARG_SPLIT.split(window)[-9:]]
    j = len(words) - (1 if words and not words[-1] else 0)
    for pairs in range(5):
        if pairs and j >= 1 and words[j - 1] == "default":
            break  # default login USER password X (not "the default password is ...")
        if pairs == 4 or j < 2 or words[j - 2] not in _NETRC_WORDS:
            return
        if words[j - 2] == "machine":
            break
        j -= 2
    found = _arg(text, m.end())
    if found is not None and not _placeholder(text[found[0] : found[1]]):
        yield found[0], found[1], "assigned-secret"


_COOKIE_END = re.compile(r"""[^\r\n"'`\\]*""")


def _cookie(text: str, low: str, m: re.Match[str]) -> Iterator[Span]:
    """A ``Cookie:`` header's values (every ``name=value``) and a ``Set-Cookie:`` header's
    (the first pair; ``Path=``, ``Expires=`` and the other attributes are kept), the header
    bare or quoted (``"Cookie": "session=X"``); a session cookie is a bearer credential (RFC
    6265, section 8)."""
    kw = m.start() - 3  # the "c" of "cookie"
    if not _word_start(text, kw):
        return
    set_cookie = low.startswith("set-", kw - 4)
    i = m.end()
    if _quote_len(text, i):
        s, e, _ = _value(text, i, False)
    else:
        s, e = i, _COOKIE_END.match(text, i, i + 8192).end()  # type: ignore[union-attr]
    yield from _cookie_values(text, s, e, set_cookie)


def _cookie_values(text: str, s: int, e: int, first_only: bool) -> Iterator[Span]:
    """The values of the ``name=value`` pairs of ``text[s:e]``, separated by ``;`` (only the
    first with ``first_only``), but for placeholders and templates."""
    pos = s
    while pos < e:
        semi = text.find(";", pos, e)
        stop = semi if semi >= 0 else e
        eq = text.find("=", pos, stop)
        if eq >= 0:
            vs = eq + 1
            ve = vs + len(text[vs:stop].rstrip())
            while vs < ve and text[vs] == " ":
                vs += 1
            if ve > vs and not _placeholder(text[vs:ve]) and not _template(text[vs:ve]):
                yield vs, ve, "cookie"
        if first_only:
            return
        pos = stop + 1


# --------------------------------------------------------------------------- the rules


class _Rule(NamedTuple):
    """One regex and what its matches mean: ``handlers`` maps the name of the group that
    matched last (``m.lastgroup``) to the handler (``""``: any match); ``literal`` starts
    every match (the prefilter skips the rule when the literal is absent, a ``str.find``:
    ``memchr`` speed for one character, and the search starts at its first occurrence)."""

    literal: str
    pattern: re.Pattern[str]
    lower: bool  # matched against the lower-cased text
    handlers: Mapping[str, Handler]


def _alternatives(
    literal: str,
    alts: Sequence[_Alt],
    lower: bool,
    extra: Sequence[tuple[str, str, Handler]] = (),
) -> _Rule:
    """The rule ``literal(?:(?P<kind>rest)|...)`` of provider alternatives and ``extra``
    ``(group name, regex, handler)`` alternatives."""
    groups = [_group(a) for a in alts] + [f"(?P<{name}>{rest})" for name, rest, _ in extra]
    handlers: dict[str, Handler] = {a.kind.replace("-", "_"): _token(a) for a in alts}
    handlers.update({name: h for name, _, h in extra})
    pattern = re.compile(re.escape(literal) + "(?:" + "|".join(groups) + ")")
    return _Rule(literal, pattern, lower, handlers)


_K_NAMES = (
    ("key", "(?:ey|(?<=tok)en)" + _ASSIGN_TAIL, _assignment),
    ("cookie", r"(?<=cook)ie(?:\\?[\"'])?[ \t]*:[ \t]*", _cookie),
)
"""The ``k`` rule's name alternatives: ``key``/``token`` assignments, ``Cookie:`` headers."""
_P_NAMES = (
    ("pass", "(?:ass|wd)" + _ASSIGN_TAIL, _assignment),
    ("netrc", r"assword[ \t]+", _netrc),
    ("openssl_passwd", r"(?<=openssl p)asswd(?=[ \t])", _openssl_passwd),
)
"""The ``p`` rule's: ``pass``/``pwd`` assignments, a ``.netrc`` ``password X``."""


def _rules() -> tuple[_Rule, ...]:
    """Every rule, one regex each, each starting with a literal (one scan per rule).

    Where two spans overlap they are merged, and the kind kept is that of the earliest
    start, then the longest, then a provider's kind before ``assigned-secret``, then the
    earlier rule."""
    rules = [
        _alternatives("A", _A, False),
        _alternatives("S", _S, False),
        _alternatives(
            "-",
            (),
            True,
            (
                ("pem", _PEM_RE, _pem),
                ("flag", _FLAG_RE, _flag),
                (
                    "command_flag",
                    r"(?<=[ \t]-)(?:p|a|k|u|s|[cnimsdp25]{0,6}b|-cookie|-user|-stdin)",
                    _command_flag,
                ),
                ("mailchimp", r"us(?<=[0-9a-f]{32}-us)[0-9]{1,2}(?![0-9a-z])", _mailchimp),
            ),
        ),
        _alternatives("k", _K, True, _K_NAMES),
        _alternatives("p", _P, True, _P_NAMES),
        _alternatives("g", _G, True),
        _alternatives("x", _X, True),
        _alternatives("v", _V, True),
        _alternatives("hf_", _HF, True),
        _alternatives("j", _J, True),
        _Rule("://", re.compile("://"), False, {"": _url}),
        _Rule("@", re.compile(r"@(?:tcp|unix)\("), False, {"": _dsn}),
    ]
    for kw in ("secret", "auth"):
        pattern = re.compile(re.escape(kw) + _ASSIGN_TAIL)
        rules.append(_Rule(kw, pattern, True, {"": _assignment}))
    return tuple(rules)


_RULES = _rules()
_PLAN = tuple(
    (order, r.literal, r.pattern.search, r.lower, r.handlers) for order, r in enumerate(_RULES)
)
"""The rules as :func:`find_secrets` runs them (fewer lookups per text)."""

_FOLD = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s"})
_FOLD_NAME = str.maketrans({"\u0130": "I", "\u0131": "i", "\u017f": "s", "\u212a": "K"})


def _lowered(text: str) -> str:
    """``text`` lower-cased with as many characters: İ, ı and ſ (which ``re.IGNORECASE``
    matches as ASCII letters) become i, i and s; ``str.lower`` keeps every other length."""
    if folds_to_ascii(text):
        text = text.translate(_FOLD)
    return text.lower()


def find_secrets(text: str, *, prefilter: bool = True) -> list[Finding]:
    """The secrets in ``text``: non-overlapping findings in text order.

    Args:
        text: any text.
        prefilter: skip a rule whose literal the text lacks, and search from the literal's
            first occurrence (every match starts with it: the result is the same; ``False``
            runs every rule's regex from the start, for tests).

    >>> find_secrets("export GITHUB_TOKEN=ghp_" + "a1B2" * 9)
    [Finding(start=20, end=60, kind='github-token')]
    """
    if len(text) < 6:
        return []
    low = _lowered(text)
    found: list[tuple[int, int, bool, int, str]] = []
    for order, literal, search, lower, handlers in _PLAN:
        target = low if lower else text
        first = target.find(literal) if prefilter else 0  # memchr speed for one character
        if first < 0:
            continue
        m = search(target, first)
        while m is not None:
            handler = handlers.get(m.lastgroup or "") or handlers[""]
            for start, end, kind in handler(text, low, m):
                if end > start:
                    found.append((start, -end, kind == "assigned-secret", order, kind))
            m = search(target, max(m.end(), m.start() + 1))
    if not found:
        return []
    found.sort()
    merged: list[Finding] = []
    for start, neg_end, _generic, _order, kind in found:
        end = -neg_end
        if merged and start < merged[-1].end:
            last = merged[-1]
            if end > last.end:
                merged[-1] = last._replace(end=end)
            continue
        merged.append(Finding(start, end, kind))
    return merged


def redact(text: str, *, prefilter: bool = True) -> str:
    """Replace the secrets in ``text`` by ``[REDACTED:<kind>]`` (:func:`find_secrets`).

    Deterministic and idempotent; a text without secrets is returned unchanged (the same
    object).

    >>> redact("export OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwx and https://bob:hunter22@db.local/x")
    'export OPENAI_API_KEY=[REDACTED:openai-key] and https://[REDACTED:url-password]@db.local/x'
    >>> redact("Authorization: Bearer abcdefghijklmnop1234")
    'Authorization: [REDACTED:bearer-token]'
    >>> redact('{"password": "correct horse battery", "user": "bob"}')
    '{"password": "[REDACTED:assigned-secret]", "user": "bob"}'
    """
    findings = find_secrets(text, prefilter=prefilter)
    if not findings:
        return text
    out: list[str] = []
    pos = 0
    for start, end, kind in findings:
        out.append(text[pos:start])
        out.append(f"[REDACTED:{kind}]")
        pos = end
    out.append(text[pos:])
    return "".join(out)


# --------------------------------------------------------------------------- structures


def redact_value(value: Any, key: str | None = None) -> Any:
    """``value`` with every string redacted, recursively through lists and dicts (keys are
    kept). A string under a key is judged with its key as ``"key": "value"`` is, so
    ``{"password": "pw"}`` loses ``pw`` (a number under a password-like key too); other
    values are returned as they are.

    >>> redact_value({"password": "pw", "n": 3, "args": ["--token", "ghp_" + "x1Y2" * 9]})
    ... # doctest: +NORMALIZE_WHITESPACE
    {'password': '[REDACTED:assigned-secret]', 'n': 3,
     'args': ['--token', '[REDACTED:github-token]']}
    """
    return _redact_value(value, key, {})


def _redact_value(value: Any, key: str | None, seen: dict[str, str]) -> Any:
    """:func:`redact_value`, each distinct string redacted once: ``seen`` maps a string to
    :func:`redact` of it, for the strings of one request (the 32 MB bench session's
    summary request: 22.8 MB in 20,783 strings, 10.9 MB distinct)."""
    if isinstance(value, str):
        if key is not None and value:
            strength = _name_class(key)
            if (strength == 2 and _plausible(value, True, False)) or (
                strength == 1 and _generated(value)
            ):
                return "[REDACTED:assigned-secret]"
            if strength == 1 and _auth_name(key):  # {"Authorization": "Bearer X"}
                found = _credential(value, _lowered(value), 0)
                if found is not None and found[1] > found[0]:
                    s, e, kind = found
                    return f"{value[:s]}[REDACTED:{kind}]{redact(value[e:])}"
            elif strength == 0 and key.lower() in ("cookie", "set-cookie"):
                header = f"{key}: "  # {"Cookie": "session=X"}: judged as the header
                judged = redact(header + value)
                if judged.startswith(header):
                    return judged[len(header) :]
        out = seen.get(value)
        if out is None:
            out = seen[value] = redact(value)
        return out
    if isinstance(value, (int, float)) and not isinstance(value, bool) and key is not None:
        # a numeric password or PIN: {"password": 123456}
        return "[REDACTED:assigned-secret]" if _name_class(key) == 2 else value
    if isinstance(value, Mapping):
        return {
            k: _redact_value(v, k if isinstance(k, str) else None, seen) for k, v in value.items()
        }
    if type(value) is list:  # a JSON array (a list comprehension: no generator)
        items = [_redact_value(v, None, seen) for v in value]
        if len(value) > 1 and type(value[0]) is str and _SHELL_WORD.fullmatch(value[0]):
            return _redact_argv(items)
        return items
    if isinstance(value, (list, tuple)):
        return type(value)(_redact_value(v, None, seen) for v in value)
    return value


_UNSAFE = re.compile(r"[^\w@%+=:,./-]", re.ASCII)
"""A character that makes ``shlex.quote`` quote a word."""


def _redact_argv(items: list[Any]) -> list[Any]:
    """An argv array (``["mysql", "-u", "root", "-pPW"]``, as agents write a shell tool call's
    command), its strings already redacted one by one, with each string judged again with the
    strings before it as its command: they are joined as ``shlex.join`` renders them (the
    command the extractive summary quotes) and the findings in that line are mapped back
    into the strings. A list whose items are not all strings is returned as it is."""
    if not all(type(v) is str for v in items):
        return items
    parts: list[str] = []
    starts: list[int] = []
    pos = 0
    for item in items:
        quote = ""
        if not item or _UNSAFE.search(item) is not None:
            quote = "'" if "'" not in item else '"' if '"' not in item else ""
        starts.append(pos + len(quote))
        parts.append(f"{quote}{item}{quote}")
        pos += len(parts[-1]) + 1
    findings = find_secrets(" ".join(parts))
    if not findings:
        return items
    out = list(items)
    for k, item in enumerate(items):
        a, b = starts[k], starts[k] + len(item)
        spans = [(max(f.start, a) - a, min(f.end, b) - a, f.kind) for f in findings]
        spans = [span for span in spans if span[1] > span[0]]
        if spans:
            out[k] = _replace_spans(item, spans)
    return out


def _replace_spans(text: str, spans: list[Span]) -> str:
    """``text`` with each span (in order, not overlapping) replaced by ``[REDACTED:kind]``;
    a span that cuts an earlier ``[REDACTED:...]`` marker takes the whole marker."""
    out: list[str] = []
    pos = 0
    for start, end, kind in spans:
        mark = text.rfind("[REDACTED:", 0, end)
        if mark >= 0 and (close := text.find("]", mark) + 1) > start:
            start, end = min(start, mark), max(end, close)
        start = max(start, pos)
        if end > start:
            out += [text[pos:start], f"[REDACTED:{kind}]"]
            pos = end
    out.append(text[pos:])
    return "".join(out)


def redact_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Canonical message dicts with their text redacted: ``content`` (a string or parts),
    ``toolCalls`` (their ``arguments``, a JSON string or an object). Ids, roles and other
    metadata are kept as they are."""
    return _redact_messages(messages, {})


def _redact_messages(
    messages: Sequence[Mapping[str, Any]], seen: dict[str, str]
) -> list[dict[str, Any]]:
    """:func:`redact_messages` with the strings already redacted (see :func:`_redact_value`)."""
    out = []
    for m in messages:
        d = dict(m)
        if "content" in d:
            d["content"] = _redact_value(d["content"], None, seen)
        calls = d.get("toolCalls")
        if isinstance(calls, list):
            d["toolCalls"] = [
                {**c, "arguments": _redact_arguments(c.get("arguments"), seen)}
                if isinstance(c, dict)
                else c
                for c in calls
            ]
        out.append(d)
    return out


def _redact_arguments(args: Any, seen: dict[str, str]) -> Any:
    """A tool call's arguments redacted: an object (:func:`_redact_value`), or a JSON object
    in a string (as Codex keeps a function call's). A string holding an array is judged as
    its object too (an argv array's strings with their command, :func:`_redact_argv`); when
    that finds more than the text alone, the string is the object's redaction, serialized
    and redacted as text again."""
    out = _redact_value(args, None, seen)
    if not isinstance(args, str) or "[" not in args:
        return out
    try:
        parsed = json.loads(args)
        plain = json.loads(out)
    except ValueError:
        return out
    if not isinstance(parsed, dict):
        return out
    judged = _redact_value(parsed, None, seen)
    return out if judged == plain else redact(json.dumps(judged, ensure_ascii=False))


def redact_request(request: SummaryRequest) -> SummaryRequest:
    """``request`` with every text a summarizer reads redacted: the messages and the kept
    messages after them (:func:`redact_messages`), the prior summary (text and task state),
    the instructions, the pinned constraints, the first and latest requests, and any text
    field added later (every field but ``format`` and ``max_chars`` is walked)."""
    changes: dict[str, Any] = {}
    seen: dict[str, str] = {}  # each distinct string redacted once
    for f in fields(request):
        value = getattr(request, f.name)
        if f.name in ("format", "max_chars") or value is None:
            continue
        if f.name in ("messages", "later"):
            changes[f.name] = _redact_messages(value, seen)
        elif f.name == "prior":
            changes[f.name] = replace(
                value,
                text=redact(value.text),
                task_state=_redact_value(value.task_state, None, seen),
            )
        else:
            changes[f.name] = _redact_value(value, None, seen)
    return replace(request, **changes)
