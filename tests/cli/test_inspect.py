"""`inspect`: hand-counted numbers, findings with line numbers, bad input, startup imports."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import orjson

from tests.helpers import FIXTURES, SAMPLES, run_cli

HAND = FIXTURES / "cases" / "handcount.jsonl"


def _inspect(*args: str, input: bytes | None = None) -> tuple[int, dict, bytes]:
    r = run_cli("inspect", "--json", *args, input=input)
    return r.returncode, orjson.loads(r.stdout) if r.stdout else {}, r.stderr


def test_numbers_equal_hand_counts():
    code, doc, _ = _inspect("--estimate", str(HAND))
    assert code == 0
    (f,) = doc["files"]
    # 9 lines: session, 7 messages, 1 malformed (line 6)
    assert f["lines"] == 9
    assert f["events"] == {"bad": 1, "message": 7, "session": 1}
    assert (f["messages"], f["turns"], f["model"], f["contextWindow"]) == (7, 2, "gpt-4o", 1000)
    # payload chars: assistant m3 "Reading it." 11 + \n + "read_file" 9 + \n +
    # '{"path":"parser.py"}' 20 = 42; m5 "Done." 5; m7 "" + \n + "bash" + \n +
    # '{"command":"pytest -q"}' 23 = 29; total 76. Estimate = ceil(chars/4): 11 + 2 + 8 = 21.
    assert f["byRole"]["assistant"] == {"messages": 3, "bytes": 76, "chars": 76, "tokens": 21}
    assert f["byRole"]["system"] == {"messages": 1, "bytes": 14, "chars": 14, "tokens": 4}
    assert f["byRole"]["user"] == {"messages": 2, "bytes": 26, "chars": 26, "tokens": 5 + 2}
    assert f["byRole"]["tool"] == {"messages": 1, "bytes": 38, "chars": 38, "tokens": 10}
    assert f["byTool"]["read_file"] == {
        "calls": 1,
        "results": 1,
        "errors": 0,
        "bytes": 38,
        "chars": 38,
        "tokens": 10,
    }
    assert f["byTool"]["bash"]["calls"] == 1 and f["byTool"]["bash"]["results"] == 0
    # 42 text tokens + 3 per message * 7 + 3 reply priming
    assert f["tokens"] == f["effectiveTokens"] == 66
    assert f["tokenizer"] == "estimate"
    assert f["largestToolOutputs"] == [
        {"uuid": "m4", "line": 5, "tool": "read_file", "tokens": 10, "chars": 38}
    ]
    assert [(x["line"], x["kind"]) for x in f["findings"]] == [
        (6, "malformed"),
        (9, "tool-call-without-result"),
    ]
    assert doc["totals"]["messages"] == 7 and doc["totals"]["findings"] == 2


def test_exact_tokens_with_tiktoken(tmp_path: Path):
    p = tmp_path / "t.jsonl"
    p.write_bytes(
        b'{"type":"session","uuid":"s","model":"gpt-4o"}\n'
        b'{"type":"message","uuid":"a","role":"user","content":"hello world"}\n'
        b'{"type":"message","uuid":"b","role":"user","content":"<|endoftext|> hello world"}\n'
    )
    code, doc, _ = _inspect(str(p))
    (f,) = doc["files"]
    assert f["tokenizer"] == "o200k_base"
    # "hello world" is 2 tokens in o200k_base ("hello", " world"); the special token's text
    # is encoded as plain text ("<", "|", "end", "of", "text", "|", ">" = 7) instead of raising.
    assert f["byRole"]["user"]["tokens"] == 2 + 7 + 2
    assert f["tokens"] == 11 + 3 * 2 + 3


def test_table_output_and_stdin(tmp_path: Path):
    r = run_cli("inspect", "--estimate", "-", input=HAND.read_bytes())
    assert r.returncode == 0
    out = r.stdout.decode()
    assert "7 messages, 2 turns" in out
    assert "-:6: malformed: malformed JSON line" in out
    assert r.stderr == b""


def test_effective_prints_messages_only():
    r = run_cli("inspect", "--effective", str(HAND))
    lines = r.stdout.splitlines()
    assert len(lines) == 7
    assert all(orjson.loads(x)["type"] == "message" for x in lines)
    # untouched messages are their raw bytes
    assert lines[0] == HAND.read_bytes().splitlines()[1]


def test_bad_inputs_report_file_and_line(tmp_path: Path):
    (tmp_path / "empty.jsonl").write_bytes(b"")
    (tmp_path / "bom.jsonl").write_bytes(
        b'\xef\xbb\xbf{"type":"message","uuid":"a","role":"user","content":"x"}\r\n'
    )
    (tmp_path / "torn.jsonl").write_bytes(b'{"type":"message","uuid":"a","role":"user","cont')
    (tmp_path / "gz.jsonl.gz").write_bytes(
        gzip.compress(b'{"type":"message","uuid":"a","role":"user","content":"x"}\n')
    )
    (tmp_path / "nul.jsonl").write_bytes(b"\x00\x00\x00\n")
    empty_dir = tmp_path / "nothing"
    empty_dir.mkdir()
    code, doc, err = _inspect(
        "--estimate",
        str(tmp_path / "empty.jsonl"),
        str(tmp_path / "bom.jsonl"),
        str(tmp_path / "torn.jsonl"),
        str(tmp_path / "gz.jsonl.gz"),
        str(tmp_path / "nul.jsonl"),
        str(tmp_path / "missing.jsonl"),
        str(empty_dir),
    )
    assert code == 3  # some inputs could not be processed; the others were
    by_name = {Path(f["path"]).name: f for f in doc["files"]}
    assert by_name["empty.jsonl"]["messages"] == 0 and by_name["empty.jsonl"]["findings"] == []
    assert [x["kind"] for x in by_name["bom.jsonl"]["findings"]] == ["bom"]
    assert by_name["bom.jsonl"]["messages"] == 1
    assert [(x["line"], x["kind"]) for x in by_name["torn.jsonl"]["findings"]] == [(1, "torn")]
    assert by_name["gz.jsonl.gz"]["messages"] == 1
    # no line is a JSON object: refused, its entry says so (and stderr, below)
    assert by_name["nul.jsonl"]["outcome"] == "failed"
    assert by_name["nul.jsonl"]["error"]["message"].startswith("not a JSON lines transcript")
    assert by_name["missing.jsonl"]["error"]["message"] == "no such file or folder"
    stderr = err.decode()
    assert f"{tmp_path / 'missing.jsonl'}: no such file or folder" in stderr
    assert f"warning: {empty_dir}: folder has no *.jsonl or *.jsonl.gz transcripts" in stderr
    assert "Traceback" not in stderr
    # the missing file is a failure; the empty folder only a warning
    assert f"{tmp_path / 'nul.jsonl'}: not a JSON lines transcript" in stderr
    assert [e["path"] for e in doc["totals"]["errors"]] == [
        str(tmp_path / "missing.jsonl"),  # found missing before any file is read
        str(tmp_path / "nul.jsonl"),
    ]
    r = run_cli("inspect", str(empty_dir))
    assert r.returncode == 0 and b"warning:" in r.stderr


def test_folder_is_searched_recursively_and_jobs(tmp_path: Path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    for name in ["a/one.jsonl", "a/b/two.jsonl", "a/b/skip.txt"]:
        (tmp_path / name).write_bytes(HAND.read_bytes())
    code, doc, _ = _inspect("--estimate", "--jobs", "2", str(tmp_path))
    assert code == 0
    assert sorted(Path(f["path"]).name for f in doc["files"]) == ["one.jsonl", "two.jsonl"]
    assert doc["totals"]["messages"] == 14


def test_check_exits_1_on_findings():
    assert run_cli("inspect", "--check", "--estimate", str(HAND)).returncode == 1
    clean = SAMPLES / "small-s1.canonical.jsonl"
    assert run_cli("inspect", "--check", "--estimate", str(clean)).returncode == 0


def test_inspect_and_help_never_import_litellm():
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from compactctl.cli import app\n"
        f"r = CliRunner().invoke(app, ['inspect', '--json', {str(HAND)!r}])\n"
        "assert r.exit_code == 0, r.output\n"
        "r = CliRunner().invoke(app, ['--help'])\n"
        "assert r.exit_code == 0\n"
        "print('litellm' in sys.modules, 'datasketch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False"


def test_usage_errors_exit_2():
    r = run_cli("inspect", "--tier", "L9", str(HAND))
    assert r.returncode == 2
    assert b"--tier must be L0, L1 or L2" in r.stderr
    r = run_cli("inspect", "--config", "/nonexistent/c.toml", str(HAND))
    assert r.returncode == 2
    assert b"config file not found" in r.stderr
