"""The shell tokens of a command line: the regex fast path gives what shlex gives."""

from __future__ import annotations

import random
import shlex

import pytest

from compactctl.summarize.extractive.tools import _SHLEX_QUOTING_RE, _shell_tokens

ALPHABET = "ab/._-=~*?:,+@%$!{}[]0 \t\r();<>|&\x0b\x0cßé一"
"""Characters of command lines: words, paths, every punctuation char shlex splits on, its
whitespace and characters it does not count as whitespace (vertical tab, form feed)."""


def _shlex_tokens(line: str) -> tuple[str, ...]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    return tuple(lexer)


@pytest.mark.parametrize(
    "line",
    [
        "pytest tests/test_a.py -q",
        "cd src && make -j4 2>&1 | tail -n 40",
        "grep -rn ERROR logs/ > out.txt; cat out.txt",
        "(cd app; ls)>>log.txt",
        "sed -n 1,40p src/app.py|head",
        "A=1 B=2 env python3 -m pytest",
        "  spaced\tout\r  ",
        "",
        "echo a\x0bb",
    ],
)
def test_fast_path_equals_shlex(line: str) -> None:
    assert _SHLEX_QUOTING_RE.search(line) is None
    assert _shell_tokens.__wrapped__(line) == _shlex_tokens(line)


def test_fast_path_equals_shlex_on_random_lines() -> None:
    rng = random.Random(16)
    fast = 0
    for _ in range(5000):
        line = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 30)))
        assert _shell_tokens.__wrapped__(line) == _shlex_tokens(line), line
        fast += _SHLEX_QUOTING_RE.search(line) is None
    assert fast == 5000  # every line took the fast path: shlex is not compared with itself


@pytest.mark.parametrize(
    ("line", "tokens"),
    [
        ("echo 'a b' # note", ("echo", "a b")),
        ('grep "x|y" f.txt', ("grep", "x|y", "f.txt")),
        ("ls a\\ b", ("ls", "a b")),
        ("echo a#b", ("echo", "a")),
    ],
)
def test_quoting_still_goes_through_shlex(line: str, tokens: tuple[str, ...]) -> None:
    assert _SHLEX_QUOTING_RE.search(line) is not None
    assert _shell_tokens.__wrapped__(line) == tokens == _shlex_tokens(line)
