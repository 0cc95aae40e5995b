"""Terminal manners (issue 19 point 8): the progress bar and the lines above it, color on a
terminal only, ``-V``, shell completion, PATHS from a piped stdin, one error style.

The bar and the colors show only when stderr is a terminal, so those tests run compactctl
with stderr on a pseudo-terminal (80 columns) and replay what it wrote there on a minimal
screen (``\\r`` returns to the line's start, ``\\n`` starts a new line, other characters
overwrite): what a person sees, not the bytes.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import shutil
import struct
import subprocess
import sys
import termios
from pathlib import Path

from tests.helpers import SAMPLES, run_cli

ESC = re.compile(rb"\x1b\[[0-9;]*[A-Za-z]")


def _on_tty(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> bytes:
    """Run compactctl with stderr on a pseudo-terminal of 80 columns; what it wrote there."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    full = {**os.environ, "TERM": "xterm"}
    full.pop("NO_COLOR", None)
    full.update(env or {})
    proc = subprocess.Popen(
        [sys.executable, "-m", "compactctl", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=slave,
        cwd=cwd,
        env=full,
    )
    os.close(slave)
    out = bytearray()
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert proc.wait(timeout=300) in (0, 1, 2, 3)
    return bytes(out)


def _screen(raw: bytes) -> list[str]:
    """The lines a terminal shows after ``raw`` (escape sequences dropped)."""
    lines: list[list[str]] = [[]]
    col = 0
    for ch in ESC.sub(b"", raw).decode():
        if ch == "\r":
            col = 0
        elif ch == "\n":
            lines.append([])
            col = 0
        else:
            row = lines[-1]
            if col < len(row):
                row[col] = ch
            else:
                row.append(ch)
            col += 1
    return ["".join(r).rstrip() for r in lines]


def test_per_file_lines_are_written_above_the_progress_bar_whole(tmp_path: Path):
    for i in range(4):
        shutil.copyfile(SAMPLES / "small-s1.canonical.jsonl", tmp_path / f"s{i}.jsonl")
    names = [f"s{i}.jsonl" for i in range(4)]
    raw = _on_tty(["rules", "--dry-run", "--jobs", "1", "--encoding", "estimate", *names], tmp_path)
    assert b"file/s]" in raw or b"?file/s" in raw  # the bar was drawn
    screen = _screen(raw)
    for name in names:  # each line starts at column 0, its first character intact
        (line,) = [x for x in screen if f"{name}: would rewrite" in x]
        assert line.startswith(f"{name}: would rewrite 12 messages"), line
    assert screen[-2] == "4 files would be changed by rules."


def test_error_and_warning_labels_are_colored_on_a_terminal_only(tmp_path: Path):
    raw = _on_tty(["rules", "--nope"], tmp_path)
    assert raw.startswith(b"compactctl: \x1b[1;31merror:\x1b[0m no such option: --nope")
    raw = _on_tty(["rules", "--nope"], tmp_path, env={"NO_COLOR": "1"})
    assert raw.startswith(b"compactctl: error: no such option: --nope")
    assert b"\x1b[" not in raw
    r = run_cli("rules", "--nope")  # stderr a pipe: no color
    assert r.stderr.startswith(b"compactctl: error: no such option") and b"\x1b[" not in r.stderr


def test_clicks_errors_look_like_compactctls_own():
    cases = {
        ("rules", "--nope"): "no such option: --nope (Possible options: --no-store, --since); "
        "see compactctl rules --help",
        ("frobnicate",): "no such command 'frobnicate'; see compactctl --help",
        ("dedup", "--threshold", "x", "a.jsonl"): "invalid value for '--threshold': 'x' is "
        "not a valid float; see compactctl dedup --help",
        ("tiers", "--tier", "L9", "a.jsonl"): "--tier must be auto, L0, L1 or L2, not 'L9'",
    }
    for args, message in cases.items():
        r = run_cli(*args)
        assert r.returncode == 2
        assert r.stderr.decode() == f"compactctl: error: {message}\n", args


def test_short_version_and_shell_completion():
    r = run_cli("-V")
    assert r.returncode == 0 and r.stdout.startswith(b"compactctl ")
    assert r.stdout == run_cli("--version").stdout
    help_text = run_cli("--help").stdout
    assert b"--install-completion" in help_text and b"--show-completion" in help_text
    script = str(Path(sys.executable).parent / "compactctl")  # the console script
    r = subprocess.run([script, "--show-completion", "bash"], capture_output=True, timeout=300)
    assert r.returncode == 0 and b"complete -o default -F _compactctl_completion compactctl" in (
        r.stdout
    )
    env = {**os.environ, "_COMPACTCTL_COMPLETE": "complete_bash",
           "COMP_WORDS": "compactctl undo --ev", "COMP_CWORD": "2"}  # fmt: skip
    r = subprocess.run([script], capture_output=True, env=env, timeout=300)
    assert r.stdout.split() == [b"--event"]


def test_a_piped_stdin_is_read_when_no_paths_are_given():
    data = (SAMPLES / "small-s1.canonical.jsonl").read_bytes()
    piped = run_cli("inspect", "--json", "--estimate", input=data)
    given = run_cli("inspect", "--json", "--estimate", "-", input=data)
    assert piped.returncode == 0 and piped.stdout == given.stdout
    assert b'"messages": 67' in piped.stdout
    r = run_cli("compact", "--force", "--encoding", "estimate", input=data)
    assert r.returncode == 0 and r.stdout.startswith(data) and len(r.stdout) > len(data)
    # no stdin (a terminal or /dev/null) and no PATHS: the usage error
    for command, also in (("inspect", ", or --store"), ("compact", ""), ("eval", "")):
        r = subprocess.run(
            [sys.executable, "-m", "compactctl", command],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=300,
        )
        assert r.returncode == 2
        assert r.stderr.decode() == (
            f"compactctl: error: missing PATHS (files, folders, or - for stdin){also}; see "
            f"compactctl {command} --help\n"
        )
