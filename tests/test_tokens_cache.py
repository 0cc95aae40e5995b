"""The tiktoken encoding cache (``tokens.load_encoding``) gives tiktoken's own counts."""

from __future__ import annotations

from pathlib import Path

import pytest

from compactctl import tokens

TEXTS = [
    "hello world",
    "def f(x):\n    return x ** 2  # <|endoftext|> is plain text here",
    "你好，世界！表格 | a | b |",
    "\x1b[31merror\x1b[0m: exit 1\r\n" * 3,
]


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An empty cache folder and no encoding loaded in this process yet."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(tokens, "_ENCODINGS", {})
    tokens.ensure_offline_encodings()
    return tmp_path / "compactctl"


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_cached_encoding_counts_as_tiktoken(fresh: Path, monkeypatch: pytest.MonkeyPatch, name):
    import tiktoken

    first = tokens.load_encoding(name)  # through tiktoken; writes the cache
    files = list(fresh.glob(f"tiktoken-{name}-*.marshal"))
    assert len(files) == 1
    monkeypatch.setattr(tokens, "_ENCODINGS", {})
    second = tokens.load_encoding(name)  # from the cache file
    assert second is not first
    reference = tiktoken.get_encoding(name)
    for text in TEXTS:
        want = reference.encode_ordinary(text)
        assert first.encode_ordinary(text) == want
        assert second.encode_ordinary(text) == want
    assert second.n_vocab == reference.n_vocab


def test_damaged_cache_is_ignored_and_rewritten(fresh: Path, monkeypatch: pytest.MonkeyPatch):
    tokens.load_encoding("cl100k_base")
    (path,) = fresh.glob("tiktoken-cl100k_base-*.marshal")
    good = path.read_bytes()
    path.write_bytes(good[: len(good) // 2])  # a cut-off write
    assert tokens._read_encoding_cache(path) is None
    flipped = bytearray(good)
    flipped[-10] ^= 0xFF  # one byte changed: the digest no longer matches
    path.write_bytes(bytes(flipped))
    assert tokens._read_encoding_cache(path) is None
    monkeypatch.setattr(tokens, "_ENCODINGS", {})
    enc = tokens.load_encoding("cl100k_base")
    assert enc.encode_ordinary("hello world") == [15339, 1917]
    assert path.read_bytes() == good  # rewritten whole


def test_unwritable_cache_folder_is_no_error(fresh: Path, monkeypatch: pytest.MonkeyPatch):
    fresh.parent.mkdir(parents=True, exist_ok=True)
    fresh.write_text("a file where the folder should be")
    enc = tokens.load_encoding("cl100k_base")
    assert enc.encode_ordinary("hello world") == [15339, 1917]
