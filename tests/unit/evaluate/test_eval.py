"""`eval` through the library: probes, checks, retention, tokens, gates, --against.

A planted probe (``fixtures/samples/*.probes.json``) counts as found by the extractor when an
extracted probe of the same kind contains its text, both compared normalised (case folded,
whitespace runs as one space): the extractor may keep a little more of the sentence (a
constraint's clause, an error line's tail), never less. The direct check of the planted
probes is the same matcher (:class:`compactctl.evaluate.check.Context`) run on the planted
texts themselves.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from compactctl.app.inspect import InspectOptions, inspect_path
from compactctl.app.jobs import OutputOptions, compact_path
from compactctl.errors import InputError, UsageError
from compactctl.evaluate import Context, EvalOptions, Probe, evaluate_session, extract_probes
from compactctl.evaluate.job import eval_path
from compactctl.evaluate.probes import KINDS, normalise
from compactctl.evaluate.report import gate_failures, parse_minimum
from compactctl.layers.options import CompactOptions
from compactctl.model import Message, event_from_dict
from compactctl.session import Session
from tests.helpers import ROOT, SAMPLES
from tests.sessions import nothing_to_report, probes

FIXTURES = sorted(p.name for p in SAMPLES.glob("*.jsonl"))
"""Every sample with planted probes, canonical and foreign: small-s1 in five formats,
messy-s2 in two, cjk-s3 canonical."""

EST = EvalOptions(encoding="estimate")


def _sample(name: str) -> str:
    return name.split(".", 1)[0]


def _found(planted: dict[str, object], extracted: list[Probe]) -> bool:
    key = normalise(str(planted["text"]))
    return any(p.kind == planted["kind"] and key in normalise(p.text) for p in extracted)


def _direct(session: Session, name: str) -> float:
    """The share of the planted probes found in the session's effective context."""
    planted = probes(_sample(name))
    ctx = Context(session.effective())
    kept = sum(ctx.match(Probe(str(p["kind"]), str(p["text"]), None, None)) is not None
               for p in planted)  # fmt: skip
    return kept / len(planted)


# --- probes ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", FIXTURES)
def test_extractor_finds_the_planted_probes(name: str):
    session = Session.open(str(SAMPLES / name), encoding="estimate")
    extracted = extract_probes(session.events)
    planted = probes(_sample(name))
    found = [p for p in planted if _found(p, extracted)]
    assert len(found) / len(planted) >= 0.9, [p for p in planted if p not in found]
    assert {p.kind for p in extracted} >= {str(p["kind"]) for p in planted}


def test_probes_keep_their_line_and_turn():
    session = Session.open(str(SAMPLES / "small-s1.canonical.jsonl"), encoding="estimate")
    by_text = {p.text: p for p in extract_probes(session.events)}
    command = by_text["python -m pytest tests/test_storage.py -q"]
    assert (command.kind, command.line, command.turn) == ("command", 9, 1)
    error = by_text["AssertionError: assert ['e-3', 'e-4', 'e-5'] == ['e-4', 'e-5', 'e-6']"]
    assert (error.kind, error.line) == ("error", 10)
    lease = by_text["LeaseExpired: lease 8525 held by worker-5 expired after 30s while flushing "
                    "segment 98209 (job-bfad32)"]  # fmt: skip
    assert (lease.kind, lease.line, lease.turn) == ("error", 37, 3)
    assert by_text["fix the slice start in storage.page_of instead of compensating in the CLI"
                   ].kind == "decision"  # fmt: skip
    assert by_text["document --since-days in README.md"].line == 68
    assert by_text["write a migration note for the 0.6.0 release"].line == 27  # user, turn 2
    assert by_text["Do not add new dependencies"].kind == "user_constraint"
    first = [p for p in by_text.values() if p.kind == "first_request"]
    assert len(first) == 1 and first[0].text.startswith("`quillpad list --page 2` shows")
    latest = [p for p in by_text.values() if p.kind == "latest_request"]
    assert latest[0].line == 63 and latest[0].turn == 6


def test_foreign_formats_keep_source_lines():
    session = Session.open(str(SAMPLES / "small-s1.codex-rollout.jsonl"), encoding="estimate")
    by_text = {p.text: p for p in extract_probes(session.events)}
    line = by_text["QUI-8564"].line
    raw = (SAMPLES / "small-s1.codex-rollout.jsonl").read_bytes().split(b"\n")[line - 1]
    assert b"QUI-8564" in raw


def test_done_items_are_not_pending_and_cjk_decisions_lose_their_label():
    session = Session.open(str(SAMPLES / "cjk-s3.canonical.jsonl"), encoding="estimate")
    extracted = extract_probes(session.events)
    decisions = [p.text for p in extracted if p.kind == "decision"]
    assert "保留 strptime，只在 TIMESTAMP_FORMAT 里加上 %z，不引入 python-dateutil" in decisions
    pending = [p.text for p in extracted if p.kind == "pending_task"]
    assert pending == [
        "给 report 命令加一个 --json 选项",
        "合并前在生产账本的副本上验证 HAR-2273 的修复",
    ]


def test_a_constraint_the_summary_cannot_list_is_no_probe():
    """Eval's constraint probes are the summarizer's constraints (one rule, intent.
    constraint_flags): "Don't touch it." with nothing before it is left out of the summary
    on purpose (no reader knows what "it" is), so it is no probe either; with a sentence
    before it that names the thing, it is both."""
    from compactctl.summarize.extractive.extract import Extractor

    texts = [
        "Don't touch it. Do not add new dependencies.",
        "Add a `--json` flag. Without the flag the output must stay as it is.",
    ]
    data = [{"type": "message", "role": "user", "turnId": n, "content": t}
            for n, t in enumerate(texts, start=1)]  # fmt: skip
    extracted = extract_probes(event_from_dict(d, line=n) for n, d in enumerate(data, 1))
    assert [p.text for p in extracted if p.kind == "user_constraint"] == [
        "Do not add new dependencies",
        "Without the flag the output must stay as it is",
    ]
    assert Extractor(data).run().constraints == [
        "Do not add new dependencies.",
        "Without the flag the output must stay as it is. (re: `--json`)",
    ]


@pytest.mark.parametrize("name", FIXTURES)
def test_constraint_probes_are_the_constraints_the_summarizer_lists(name: str):
    """Every constraint probe is inside a constraint the extractive summarizer lists, and
    every listed constraint holds a probe (a probe is a clause of the sentence; the summary
    may add the sentence before it)."""
    from compactctl.summarize.extractive.extract import Extractor

    session = Session.open(str(SAMPLES / name), encoding="estimate")
    messages = [e.data for e in session.events if isinstance(e, Message)]
    listed = [normalise(c) for c in Extractor(messages).run().constraints]
    extracted = [normalise(p.text) for p in extract_probes(session.events)
                 if p.kind == "user_constraint"]  # fmt: skip
    assert extracted and listed
    assert [p for p in extracted if not any(p in c for c in listed)] == []
    assert [c for c in listed if not any(p in c for p in extracted)] == []


def _shipped_transcripts() -> list[Path]:
    """Every transcript file shipped in fixtures/samples, fixtures/real and fixtures/formats
    (the planted-probe lists, metadata and manifests left out; unreadable ones are skipped
    by the caller: fixtures/formats/misleading holds files compactctl must refuse)."""
    skip = (".probes.json", ".meta.json", "manifest.json")
    folders = (SAMPLES, ROOT / "fixtures" / "real", ROOT / "fixtures" / "formats")
    return sorted(p for d in folders for p in d.rglob("*")
                  if p.is_file() and not p.name.endswith(skip))  # fmt: skip


def test_every_shipped_transcript_uncompacted_keeps_every_probe():
    """Issue 16: "on an uncompacted file retention is 1.0". Each shipped transcript's
    messages alone (its compaction events left out: the uncompacted session) evaluated
    against the file keep every probe, and every probe stands in its source message by
    the check's own rule (:func:`compactctl.evaluate.probes.occurs`): nothing is rewritten
    (a list-form command is checked as the probe renders it, ``cargo test tiles`` of the
    Codex rollout)."""
    import warnings

    from compactctl.errors import CompactWarning
    from compactctl.evaluate.check import message_strings
    from compactctl.evaluate.probes import occurs

    read = 0
    for path in _shipped_transcripts():
        try:
            session = Session.open(str(path), encoding="estimate")
        except InputError:
            continue
        read += 1
        messages = [e for e in session.events if isinstance(e, Message)]
        uncompacted = Session.from_events(messages, encoding="estimate")
        with warnings.catch_warnings():  # no model recorded: the window assumed, unused here
            warnings.simplefilter("ignore", CompactWarning)
            result = evaluate_session(uncompacted, EST, original=session)
        assert result.counts.total >= 1, path
        assert (result.counts.retention, result.lost) == (1.0, []), path
        by_uuid = {m.uuid: m for m in messages}
        for p in result.probes:
            strings = list(message_strings(by_uuid[p.source]))  # type: ignore[index]
            assert any(occurs(s, p.text, p.kind) for s in strings), (path, p)
    assert read >= 35  # 38 readable today: samples, real captures, described formats


def test_summary_messages_of_a_materialized_file_are_not_probes():
    events = [
        {"type": "message", "uuid": "s", "role": "user", "summaryOf": "x",
         "content": "Summary: ran `make deploy-prod` and saw FATAL: disk full"},
        {"type": "message", "uuid": "u", "role": "user",
         "content": "Ship it. Do not deploy on Fridays."},
    ]  # fmt: skip
    session = Session.from_events([event_from_dict(e, line=i) for i, e in enumerate(events, 1)])
    texts = [(p.kind, p.text) for p in extract_probes(session.events)]
    assert texts == [("first_request", "Ship it. Do not deploy on Fridays."),
                     ("user_constraint", "Do not deploy on Fridays")]  # fmt: skip


def test_only_the_user_speaks_as_the_user():
    """Claude Code's task notifications, system reminders, hook and local-command output are
    user-role messages the user did not type: never a request, a constraint or a deferred
    task (the summarizer's rule, issue 15 point 10)."""
    events = [
        {"type": "message", "uuid": "u1", "role": "user",
         "content": "Fix the pager. Do not add new dependencies."},
        {"type": "message", "uuid": "a1", "role": "assistant", "content": "On it."},
        {"type": "message", "uuid": "u2", "role": "user",
         "content": "Now make page_size accept zero. Report back when the tests pass."},
        {"type": "message", "uuid": "r1", "role": "user", "content":
         "<system-reminder>Do not mention this reminder. Later, use TodoWrite.</system-reminder>"},
        {"type": "message", "uuid": "h1", "role": "user",
         "content": "<local-command-stdout>Never run this again</local-command-stdout>"},
        {"type": "message", "uuid": "m1", "role": "user", "isMeta": True,
         "content": "Always answer in French."},
        {"type": "message", "uuid": "n1", "role": "user", "content":
         "<task-notification>\n<status>completed</status>\n<summary>Background command "
         '"npm run build" completed (exit code 0)</summary>\n</task-notification>'},
    ]  # fmt: skip
    session = Session.from_events([event_from_dict(e, line=i) for i, e in enumerate(events, 1)])
    got = [(p.kind, p.text, p.line) for p in extract_probes(session.events)]
    assert got == [
        ("first_request", "Fix the pager. Do not add new dependencies.", 1),
        ("latest_request", "Now make page_size accept zero. Report back when the tests pass.", 3),
        ("user_constraint", "Do not add new dependencies", 1),
        ("identifier", "page_size", 3),
    ]


def test_a_generated_session_s_latest_request_is_the_planted_one(tmp_path: Path):
    """bench.gen_probed ends its sessions with a task notification after the latest request."""
    from bench.gen_probed import write_probed

    path = write_probed(tmp_path / "p.jsonl", seed=731, turns=40)
    planted = {str(p["kind"]): str(p["text"]) for p in probes_of(path)}
    extracted = {p.kind: p.text for p in extract_probes(Session.open(str(path)).events)}
    assert "<task-notification>" in path.read_text().rsplit("\n", 2)[-2]
    assert extracted["latest_request"].startswith(planted["latest_request"])
    assert extracted["first_request"].startswith(planted["first_request"])


def probes_of(path: Path) -> list[dict[str, object]]:
    import json

    return list(json.loads(path.with_name(path.name.split(".")[0] + ".probes.json").read_text()))


# --- checking ------------------------------------------------------------------------------


def test_context_matches_exact_normalised_and_whole_words():
    ctx = Context([
        Message({"type": "message", "uuid": "a", "role": "assistant", "content": "Ran it.",
                 "toolCalls": [{"id": "c", "name": "bash",
                                "arguments": {"command": 'grep -n "a  b" src/x.py'}}]}),
        Message({"type": "message", "uuid": "b", "role": "user",
                 "content": "KEEP the\n  ledger format. pages_of is new."}),
    ])  # fmt: skip
    assert ctx.match(Probe("command", 'grep -n "a  b" src/x.py', 1, 1)) == "exact"
    assert ctx.match(Probe("user_constraint", "keep the ledger format", 1, 1)) == "normalised"
    assert ctx.match(Probe("identifier", "page_of", 1, 1)) is None
    assert ctx.match(Probe("identifier", "pages_of", 1, 1)) == "exact"
    # a probe never matches across two messages
    assert ctx.match(Probe("error", "src/x.py KEEP", 1, 1)) is None
    # the source message answers first; a missing source falls back to the whole context
    assert ctx.match(Probe("file_path", "src/x.py", 1, 1, "gone")) == "exact"


def test_cjk_punctuation_as_the_rules_layer_writes_it_is_the_same_prose():
    """The ``rules`` layer's ``cjk_punct`` rule rewrites a user's ，。：（） in place: its
    message still says the same, for every character that rule maps (its own table)."""
    from compactctl.layers.text_rules.cjk import normalize_cjk_punct

    said = (
        "不要修改（公共接口）：「计费」、『导出』，“都”‘在’用！？；"
        + "【它】〔呢〕｛好｝［吗］．＂＇％。"
    )
    rewritten = normalize_cjk_punct(said)
    assert rewritten.isascii() is False and rewritten.count("(") == 2  # （ and 〔
    ctx = Context([Message({"type": "message", "uuid": "u", "role": "user", "content": rewritten})])
    assert ctx.match(Probe("user_constraint", said, 1, 1, "u")) == "normalised"
    assert ctx.match(Probe("first_request", said[:9], 1, 1)) == "normalised"
    assert ctx.match(Probe("decision", rewritten, 1, 1)) == "exact"
    # what the rule leaves alone (｜, ——) is no other character to eval either
    other = Context([Message({"type": "message", "role": "user", "content": "接口|导出--好"})])
    assert other.match(Probe("user_constraint", "接口｜导出——好", 1, 1)) is None


def _log(*records: dict[str, object]) -> list[Message]:
    return [event_from_dict({"type": "message", "turnId": 1, **r}, line=n)  # type: ignore[misc]
            for n, r in enumerate(records, start=1)]  # fmt: skip


def test_a_list_form_command_and_a_quoted_path_are_kept_uncompacted():
    """review 10, finding 3: a command given as a list is the probe ``shlex.join`` renders
    (``git commit -m 'fix bug'``), found in the call both in its source message and in the
    whole context; a file shell quoting rewrote (``"other"'x'.py`` is ``otherx.py``) is
    no probe, a quoted name that stays a substring (``'src/my_file.txt'``) is one."""
    log = _log(
        {"uuid": "u1", "role": "user", "content": "Please fix the build."},
        {"uuid": "a1", "role": "assistant", "content": "", "toolCalls": [
            {"id": "c1", "name": "shell", "arguments": {"command": ["git", "commit", "-m",
                                                                     "fix bug"]}}]},
        {"uuid": "a2", "role": "assistant", "content": "", "toolCalls": [
            {"id": "c2", "name": "bash", "arguments": {
                "command": "cat 'src/my_file.txt' \"other\"'x'.py"}}]},
    )  # fmt: skip
    probes = extract_probes(log)
    assert [(p.kind, p.text) for p in probes] == [
        ("first_request", "Please fix the build."),
        ("command", "git commit -m 'fix bug'"),
        ("command", "cat 'src/my_file.txt' \"other\"'x'.py"),
        ("file_path", "src/my_file.txt"),
    ]
    ctx = Context(log)
    assert ctx.check(probes) == ["exact"] * 4
    command = probes[1]
    assert ctx.match(Probe(command.kind, command.text, 2, 1)) == "exact"  # no source: context
    result = evaluate_session(Session.from_events(log, encoding="estimate"), EST)
    assert (result.counts.retention, result.lost) == (1.0, [])


def test_short_probes_are_not_found_inside_other_words():
    """review 10, finding 4: a probe stands alone (no word character next to it; a command
    or a path no ``.`` or ``-`` that makes another name), and commands, paths and names
    keep their case while prose is case folded."""
    lost = Context(_log({"role": "user", "content":
                         "Nothing to report. Make sure the tools work; see data.py, a book, "
                         "a.py.bak, x-a.py and page_of_x. The Summary is README.MD."}))  # fmt: skip
    kept = Context(_log({"role": "user", "content":
                         "Ran ls, then make; read /home/u/src/a.py (see a.py). OK. Keep "
                         "the summary in README.md; page_of stays."}))  # fmt: skip
    probes = [Probe("command", "ls", 1, 1), Probe("command", "make", 1, 1),
              Probe("file_path", "a.py", 1, 1), Probe("file_path", "src/a.py", 1, 1),
              Probe("latest_request", "ok", 1, 1), Probe("identifier", "page_of", 1, 1),
              Probe("file_path", "README.md", 1, 1),
              Probe("user_constraint", "keep the summary in readme.md", 1, 1)]  # fmt: skip
    assert lost.check(probes) == [None] * 8
    assert kept.check(probes) == ["exact"] * 4 + ["normalised", "exact", "exact", "normalised"]
    # prose kinds fold case; the code kinds compare it
    assert kept.match(Probe("latest_request", "OK", 1, 1)) == "exact"
    assert kept.match(Probe("latest_request", "ok.", 1, 1)) == "normalised"
    assert kept.match(Probe("command", "Make", 1, 1)) is None
    assert kept.match(Probe("file_path", "readme.md", 1, 1)) is None
    # whitespace runs are one space for commands too
    spaced = Context(_log({"role": "user", "content": "ran git  commit\n -m x"}))
    assert spaced.match(Probe("command", "git commit -m x", 1, 1)) == "normalised"


def test_identifiers_next_to_cjk_text_are_kept():
    """review 10, finding 5: word characters are ``[A-Za-z0-9_]`` only."""
    ctx = Context(_log({"role": "user", "content": "已修复QUI-8564的分页问题，修改了page_of函数"}))
    probes = [Probe("identifier", t, 1, 1) for t in ("QUI-8564", "page_of", "QUI-856")]
    assert ctx.check(probes) == ["exact", "exact", None]


def test_a_redacted_secret_counts_only_when_no_other_secret_shares_its_form():
    """review 10, finding 11: once redacted, two keys in the same command cannot be told
    apart, so a summary holding ``OPENAI_API_KEY=[REDACTED:openai-key]`` keeps the command
    of the only key of that form, and neither of two."""
    from compactctl.summarize.redact import redact

    key_a = "sk-proj-" + "A" * 40
    key_b = "sk-proj-" + "B" * 40
    one = Probe("command", f"export OPENAI_API_KEY={key_b}", 3, 1)
    other = Probe("command", f"export OPENAI_API_KEY={key_a}", 2, 1)
    unrelated = Probe("command", f"curl -H 'Authorization: Bearer {key_a}' x.io", 4, 1)
    summary = Context(_log({"role": "user", "content": "ran " + redact(one.text)}))
    assert "[REDACTED:openai-key]" in summary.text and key_b not in summary.text
    assert summary.check([one, unrelated]) == ["exact", None]
    assert summary.check([other, one, unrelated]) == [None, None, None]
    # a key kept as written is kept whatever the other probes
    verbatim = Context(_log({"role": "user", "content": "ran " + one.text}))
    assert verbatim.check([other, one]) == [None, "exact"]


# --- retention and tokens ----------------------------------------------------------------------


@pytest.mark.parametrize("name", FIXTURES)
def test_uncompacted_file_keeps_everything(name: str):
    result = eval_path(str(SAMPLES / name), EST)["result"]
    assert result.counts.retention == 1.0
    assert result.counts.total >= 20
    assert result.tokens_before == result.tokens_after and result.ratio == 1.0
    assert result.lost == []


def test_tokens_agree_with_inspect(tmp_path: Path):
    path = str(SAMPLES / "small-s1.canonical.jsonl")
    for encoding in ("estimate", "cl100k_base"):
        result = eval_path(path, EvalOptions(encoding=encoding))["result"]
        seen = inspect_path(path, InspectOptions(encoding=encoding))
        assert (result.tokens_before, result.tokens_after) == (seen["tokens"],
                                                               seen["effectiveTokens"])  # fmt: skip
        assert result.tokenizer == encoding
    compacted = tmp_path / "c.jsonl"
    compacted.write_bytes((SAMPLES / "small-s1.canonical.jsonl").read_bytes())
    compact_path(
        str(compacted), CompactOptions(force=True, encoding="estimate"), OutputOptions(db="")
    )
    result = eval_path(str(compacted), EST)["result"]
    seen = inspect_path(str(compacted), InspectOptions(encoding="estimate"))
    assert (result.tokens_before, result.tokens_after) == (seen["tokens"], seen["effectiveTokens"])
    assert result.tokens_after < result.tokens_before


def test_nothing_to_report_loses_almost_everything(tmp_path: Path):
    result = eval_path(str(nothing_to_report(tmp_path)), EST)["result"]
    assert result.counts.retention < 0.3
    assert result.counts.retention == 0.0  # not one probe says "Nothing to report."
    # 36: pytest's located lines (``tests/test_storage.py:12: AssertionError``) are error lines
    assert len(result.lost) == result.counts.total == 36
    assert result.tokens_after == 11  # one short user message: 5 + 3 overhead + 3 priming
    lost = {p.text: p.line for p in result.lost}
    assert lost["python -m pytest tests/test_storage.py -q"] == 9


@pytest.mark.parametrize("name", FIXTURES)
def test_retention_after_compact_agrees_with_the_planted_probes(name: str, tmp_path: Path):
    out = tmp_path / f"{_sample(name)}.jsonl"
    opts = CompactOptions(force=True, encoding="estimate")
    if name.endswith(".canonical.jsonl"):
        out.write_bytes((SAMPLES / name).read_bytes())
        # messy-s2 ends in a torn line, written just now: torn after 0.2 s, as in conftest
        compact_path(str(out), opts, OutputOptions(db="", torn_wait=0.2))
    else:
        compact_path(str(SAMPLES / name), opts, OutputOptions(output=str(out), db=""))
    session = Session.open(str(out), encoding="estimate")
    result = evaluate_session(session, EST)
    assert result.tokens_after < 0.5 * result.tokens_before  # it did compact
    direct = _direct(session, name)
    assert abs(result.counts.retention - direct) <= 0.05, (result.counts.retention, direct)


def test_openai_chat_failures_without_is_error_are_probes_the_summary_misses(tmp_path: Path):
    """The OpenAI chat format has no isError: a pytest run with "1 failed" is still a
    failure to eval (its error line is a probe), and the extractive summary does not keep
    it (the planted direct check agrees: 12 of 14)."""
    out = tmp_path / "o.jsonl"
    compact_path(str(SAMPLES / "small-s1.openai-chat.jsonl"),
                 CompactOptions(force=True, encoding="estimate"),
                 OutputOptions(output=str(out), db=""))  # fmt: skip
    session = Session.open(str(out), encoding="estimate")
    result = evaluate_session(session, EST)
    assert {p.kind for p in result.lost} == {"error", "identifier"}
    assert "AssertionError: assert ['e-3', 'e-4', 'e-5'] == ['e-4', 'e-5', 'e-6']" in {
        p.text for p in result.lost
    }
    assert _direct(session, "small-s1") == 12 / 14


def test_against_the_original_for_a_materialized_output(tmp_path: Path):
    src = SAMPLES / "messy-s2.claude-code.jsonl"
    log, ctx = tmp_path / "log.jsonl", tmp_path / "ctx.jsonl"
    opts = CompactOptions(force=True, encoding="estimate", max_summary_chars=900)
    compact_path(str(src), opts, OutputOptions(output=str(log), db=""))
    compact_path(str(src), opts, OutputOptions(output=str(ctx), materialize=True, db=""))
    direct = eval_path(str(log), EST)["result"]
    against = eval_path(str(ctx), EvalOptions(encoding="estimate", against=str(src)))["result"]
    assert against.against == str(src)
    assert against.counts.total == direct.counts.total
    assert against.counts.retention == direct.counts.retention
    # the materialized summary is framed for the resuming agent (the session continues
    # from a compacted conversation; the transcript's path; no <analysis> block): its
    # tokens differ from the summary's in the log by exactly that frame
    from compactctl.io.files import read
    from compactctl.model import SummaryEvent
    from compactctl.summarize.summary_format import RESUME_PREAMBLE
    from compactctl.tokens import TokenCounter, message_payload

    (summary,) = [e for e in read(str(log)) if isinstance(e, SummaryEvent)]
    (framed,) = [e for e in read(str(ctx)) if isinstance(e, Message) and "summaryOf" in e.data]
    assert framed.text.startswith(RESUME_PREAMBLE) and f"is at {src}." in framed.text
    est = TokenCounter("estimate")
    frame = est.count(message_payload(framed.data)) - est.count(
        message_payload({**framed.data, "content": summary.summary_text})
    )
    assert against.tokens_before == direct.tokens_before
    assert against.tokens_after == direct.tokens_after + frame
    # alone, the materialized file has only its kept messages: it would be checked against
    # itself (retention 1.0 whatever the summary lost), so it is refused, naming --against
    with pytest.raises(InputError, match=r"effective context, not a log: line \d+ is a summary"
                       r" message .* pass --against ORIGINAL") as refused:  # fmt: skip
        eval_path(str(ctx), EST)
    assert refused.value.exit_code == 3


def test_against_a_folder_finds_the_original_by_name(tmp_path: Path):
    originals = tmp_path / "orig"
    originals.mkdir()
    (originals / "a.jsonl").write_bytes((SAMPLES / "small-s1.canonical.jsonl").read_bytes())
    (originals / "b.jsonl").write_bytes((SAMPLES / "cjk-s3.canonical.jsonl").read_bytes())
    out = tmp_path / "out"
    out.mkdir()
    compact_path(str(originals / "b.jsonl"), CompactOptions(force=True, encoding="estimate"),
                 OutputOptions(output=str(out / "b.jsonl"), materialize=True, db=""))  # fmt: skip
    options = EvalOptions(encoding="estimate", against=str(originals))
    result = eval_path(str(out / "b.jsonl"), options)["result"]
    assert result.against == str(originals / "b.jsonl")
    assert result.counts.total == 33  # cjk-s3's probes, not small-s1's


# --- the JSON entry and the gates --------------------------------------------------------------


def test_json_entry_has_exactly_the_issue_schema(tmp_path: Path):
    doc = eval_path(str(nothing_to_report(tmp_path)), EST)["result"].to_json()
    assert list(doc) == ["path", "format", "tokenizer", "tokensBefore", "tokensAfter",
                         "tokensSaved", "ratio", "probes", "belowMin"]  # fmt: skip
    assert (doc["format"], doc["tokenizer"], doc["belowMin"]) == ("canonical", "estimate", [])
    assert list(doc["probes"]) == ["total", "kept", "retention", "byKind", "lost"]
    assert list(doc["probes"]["byKind"]) == list(KINDS)
    assert all(list(v) == ["total", "kept"] for v in doc["probes"]["byKind"].values())
    assert all(list(x) == ["kind", "text", "line"] for x in doc["probes"]["lost"])
    assert doc["probes"]["byKind"]["command"] == {"total": 7, "kept": 0}
    assert doc["ratio"] == round(doc["tokensAfter"] / doc["tokensBefore"], 4)


def test_gates():
    result = eval_path(str(SAMPLES / "small-s1.canonical.jsonl"), EST)["result"]
    assert gate_failures(result.counts, 0.9, {"error": 1.0}) == []
    with pytest.raises(UsageError, match="not between 0 and 1"):
        gate_failures(result.counts, 1.5, {})
    assert parse_minimum("file-path=0.5") == ("file_path", 0.5)
    for bad in ("file_path", "nope=0.5", "error=x", "error=2"):
        with pytest.raises(UsageError):
            parse_minimum(bad)


# --- the extractor's shortcuts agree with the rules they skip ------------------------------


def test_pending_prefilter_never_skips_a_match():
    """_may_be_pending skips PENDING_RE only for texts it cannot match: every alternative of
    the regex, in any case, with case-folding look-alikes (ſ, K), and every assistant text
    of the samples."""
    from compactctl.evaluate.probes import _may_be_pending
    from compactctl.summarize.extractive.intent import PENDING_RE

    phrases = ["left undone", "still need to", "still needs to", "need to ship it later", "todo",
               "to-do", "later", "follow-up", "follow up", "not done", "not yet", "still open",
               "remaining", "pending", "open item", "haven't", "have not done",
               "have not yet started", "待办", "还需要", "尚未", "未完成", "还没做", "稍后",
               "以后再", "之后再做", "遗留", "记下", "nothing here", "done and dusted"]  # fmt: skip
    texts = [f"x {p} y" for p in phrases] + [f"X {p.upper()}." for p in phrases]
    texts += ["ſtill open", "\u212aeep it pending", "not\u00a0yet", "LATER", "Laterally"]
    for name in FIXTURES:
        session = Session.open(str(SAMPLES / name), encoding="estimate")
        texts += [e.text for e in session.events
                  if isinstance(e, Message) and e.role == "assistant"]  # fmt: skip
    assert sum(PENDING_RE.search(t) is not None for t in texts) >= 60
    for text in texts:
        assert _may_be_pending(text, text.lower()) == (PENDING_RE.search(text) is not None), text


def test_code_name_hint_is_in_every_text_with_a_code_name():
    """_CODE_NAME_HINT_RE (or a "_") is in every text _CODE_NAME_RE finds a name in: the
    names of each shape, next to letters, digits, dots and slashes, and the user texts of
    the samples."""
    from compactctl.evaluate.probes import _CODE_NAME_HINT_RE, _CODE_NAME_RE

    names = ["page_of", "_x1", "PageOf", "Page2Of", "HTTPServer", "pageOf", "iOS", "a1B",
             "ÄbcDef", "xÄy", "Ab", "ab", "AB", "a.b", "a/b"]  # fmt: skip
    texts = [f"{a}{n}{b}" for n in names for a in ("", " ", ".", "x") for b in ("", " ", "()")]
    for name in FIXTURES:
        session = Session.open(str(SAMPLES / name), encoding="estimate")
        texts += [e.text for e in session.events
                  if isinstance(e, Message) and e.role == "user"]  # fmt: skip
    with_names = [t for t in texts if _CODE_NAME_RE.findall(t)]
    assert len(with_names) >= 20
    for text in with_names:
        assert "_" in text or _CODE_NAME_HINT_RE.search(text), text


def test_log_level_lines_give_found_errors_the_same_answer():
    """found_errors on the ERROR/FATAL/CRITICAL lines alone equals found_errors on the whole
    output, for every tool output of the samples and of a generated session without a
    traceback, and for outputs made of many such lines."""
    from bench.gen_corpus import session_lines
    from compactctl.evaluate.probes import _log_level_lines
    from compactctl.summarize.extractive.failures import found_errors

    texts = []
    for name in FIXTURES:
        session = Session.open(str(SAMPLES / name), encoding="estimate")
        texts += [e.text for e in session.events if isinstance(e, Message) and e.role == "tool"]
    for line in session_lines(5, 3_000_000):
        record = orjson.loads(line)
        if record.get("role") == "tool" and isinstance(record.get("content"), str):
            texts.append(record["content"])
    texts += ["ERROR a\nERROR a\nx FATAL y: z\n  CRITICAL ValueError: bad\n" * 50,
              "no newline ERROR at all FATAL", "ERRORS\nFATALITY\n", "CRITICAL"]  # fmt: skip
    texts = [t for t in texts if "Traceback (most recent call last)" not in t]
    with_errors = [t for t in texts if found_errors(t)]
    assert len(with_errors) >= 10
    for text in texts:
        assert found_errors(_log_level_lines(text)) == found_errors(text)


def test_secrets_redacted_in_a_summary_still_count_and_are_never_printed() -> None:
    """A command with a secret is kept by a summary that redacted the secret (counted kept,
    not lost), and a lost probe is printed with its secrets redacted (found by a new user:
    eval printed --password hunter2secret)."""
    from compactctl.evaluate.check import Context
    from compactctl.evaluate.probes import Probe
    from compactctl.evaluate.report import _shown
    from compactctl.model import Message
    from compactctl.summarize.redact import redact

    command = "AWS_ACCESS_KEY_ID=AKIAQZ7XK2M4P9R3TW6B ./deploy.sh --password hunter2secret"
    summary = Message({"type": "message", "role": "user", "content": "ran " + redact(command)})
    assert "hunter2secret" not in summary.content
    assert Context([summary]).match(Probe("command", command, 3, 1)) == "exact"
    shown = _shown(command)
    assert "AKIAQZ7XK2M4P9R3TW6B" not in shown and "hunter2secret" not in shown
    assert shown.startswith("AWS_ACCESS_KEY_ID=") and "./deploy.sh" in shown
