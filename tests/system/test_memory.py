"""Memory-motivated code paths give the same results (peak RSS itself is measured by
``make bench``, never here): word hashing that stops early, the dedup layer that loads the
token encoding before its search."""

from __future__ import annotations

import random

import pytest

from compactctl import tokens
from compactctl.errors import UsageError
from compactctl.layers import similarity
from compactctl.layers.dedup import _EARLY_ENCODING_CHARS, DedupOptions, plan_dedup
from compactctl.model import event_from_dict
from tests.helpers import SAMPLES


def _mixed_texts() -> list[str]:
    """Normalized texts with long unspaced words (base64-like), many words of the same
    maximal length, fewer than 32 words, and CJK."""
    rng = random.Random(7)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789+/="
    blob = "".join(rng.choice(alphabet) for _ in range(20_000))
    same = " ".join("x" * 50 for _ in range(40))  # 40 words of the longest length
    many = " ".join(
        "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 90))) for _ in range(500)
    )
    texts = [f"data {blob} end", same, many, "few words only", "压缩上下文 和 文本", blob[:3000]]
    return [similarity.normalize(t) for t in texts]


def test_word_hashes_with_long_words_equal_the_pure_python_sets() -> None:
    texts = _mixed_texts()
    grams, offsets = similarity._shingle_arrays(texts)
    expected = similarity._py_shingle_sets(texts)
    for i, want in enumerate(expected):
        assert frozenset(grams[offsets[i] : offsets[i + 1]].tolist()) == want
    assert len(expected[1]) == 1  # "x"*50 repeated: one distinct shingle


@pytest.mark.parametrize("chunk", [64, 1000, 1 << 14])
def test_long_texts_hashed_in_pieces_give_the_same_shingles(
    monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    texts = [
        *_mixed_texts(),
        "a" * 5000 + " b",  # two words, one longer than a piece
        "x" * 70 + " " + "y" * 70 + " " + "z" * 70,  # exactly k words, each cut apart
        "短 " * 300 + "文本压缩" * 100,
        "tiny",
    ] * 2
    grams, offsets = similarity._shingle_arrays(texts)  # long texts in one piece
    monkeypatch.setattr(similarity, "_CHUNK_CHARS", chunk)
    texts_copy = list(texts)
    small, small_offsets = similarity._shingle_arrays(texts_copy, release=True)
    assert small.tolist() == grams.tolist() and small_offsets.tolist() == offsets.tolist()
    assert texts_copy == [""] * len(texts)  # each let go once hashed
    expected = similarity._py_shingle_sets(texts)
    for i, want in enumerate(expected):
        assert frozenset(small[small_offsets[i] : small_offsets[i + 1]].tolist()) == want


def _session(texts: list[str]) -> list:
    events = [event_from_dict({"type": "session", "model": "gpt-4o"})]
    for i, text in enumerate(texts):
        events.append(
            event_from_dict(
                {"type": "message", "uuid": f"a{i}", "role": "assistant", "content": text}
            )
        )
    return events


def test_dedup_of_a_large_session_loads_the_encoding_before_the_search(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = random.Random(3)
    vocab = [f"w{i}" for i in range(5000)]
    texts = [" ".join(rng.choice(vocab) for _ in range(300)) for _ in range(120)]
    texts.append(texts[5])  # one exact duplicate
    assert sum(map(len, texts)) >= _EARLY_ENCODING_CHARS
    order: list[str] = []
    counter = tokens.TokenCounter("cl100k_base")
    real_load = counter.load
    monkeypatch.setattr(counter, "load", lambda: (order.append("load"), real_load())[1])
    real_find = similarity.find_duplicates

    def find(*args, **kwargs):
        order.append("search")
        return real_find(*args, **kwargs)

    monkeypatch.setattr(similarity, "find_duplicates", find)
    event, report = plan_dedup(_session(texts), DedupOptions(), timestamp="t", counter=counter)
    assert order == ["load", "search"]
    assert event is not None and report["exact"] == 1 and report["pairs"] == 1
    assert report["tokensSaved"] == counter.count(texts[5]) + tokens.MESSAGE_OVERHEAD


def test_early_load_of_an_unavailable_encoding_fails_only_if_there_is_something_to_count() -> None:
    rng = random.Random(4)
    vocab = [f"v{i}" for i in range(5000)]
    texts = [" ".join(rng.choice(vocab) for _ in range(300)) for _ in range(120)]
    assert sum(map(len, texts)) >= _EARLY_ENCODING_CHARS
    broken = tokens.TokenCounter("no_such_encoding")
    event, report = plan_dedup(_session(texts), DedupOptions(), timestamp="t", counter=broken)
    assert event is None and report["pairs"] == 0  # as before: no duplicates, no error
    with pytest.raises(UsageError, match="unknown tiktoken encoding"):
        plan_dedup(_session([*texts, texts[0]]), DedupOptions(), timestamp="t", counter=broken)


def test_counting_leaves_no_utf8_copy_on_the_text_and_counts_as_encode_ordinary() -> None:
    import sys

    counter = tokens.TokenCounter("cl100k_base")
    counter.load()  # offline: through litellm's copy of the encoding
    enc = tokens.load_encoding("cl100k_base")
    text = "压缩上下文 résumé 🙂 " * 500  # built at run time: no cached UTF-8 yet
    size = sys.getsizeof(text)  # counts CPython's UTF-8 cache of a str once it exists
    counts = counter.count_many([text])
    assert sys.getsizeof(text) == size
    copy = text.encode().decode()  # tiktoken's own count, on a copy (it caches UTF-8 on it)
    assert counts == [len(enc.encode_ordinary(copy))] == [6000]
    # a lone surrogate (legal in a JSON escape) counts as "?"
    assert tokens.TokenCounter("cl100k_base").count("a\ud83db") == len(enc.encode_ordinary("a?b"))


def test_normalize_of_a_long_text_is_the_same_without_a_word_list(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    spaces = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()]
    assert len(spaces) == 29
    rng = random.Random(11)
    pool = [*spaces, *"aBc中É", "\x1b[31m", "\ud83d"]
    texts = ["".join(rng.choice(pool) for _ in range(rng.randint(0, 400))) for _ in range(300)]
    texts += ["  \u3000\n", "", "\x85word\xa0word\u2028"]
    monkeypatch.setattr(similarity, "_CHUNK_CHARS", 8)  # every text above: the long path
    for text in texts:
        want = " ".join(similarity._ANSI_RE.sub("", text).lower().split())
        assert similarity.normalize(text) == want


def test_heap_is_trimmed_after_large_sessions_of_transforming_commands_only(
    tmp_path, monkeypatch
) -> None:
    """``run_files`` gives the heap back after each session of at least TRIM_MIN_BYTES when
    a command holds events (rules), never for inspect (which holds none)."""

    from typer.testing import CliRunner

    from compactctl import cli
    from compactctl.app import runner

    sample = SAMPLES / "small-s1.canonical.jsonl"
    big, small = tmp_path / "big.jsonl", tmp_path / "small.jsonl"
    big.write_bytes(sample.read_bytes())
    small.write_bytes(sample.read_bytes().split(b"\n", 1)[0] + b"\n")
    trims: list[int] = []
    monkeypatch.setattr(runner, "_release_memory", lambda: trims.append(1))
    monkeypatch.setattr(runner, "TRIM_MIN_BYTES", big.stat().st_size)
    runner = CliRunner()
    args = [str(big), str(small), "--jobs", "1", "--estimate", "-q"]
    assert runner.invoke(cli.app, ["inspect", *args]).exit_code == 0
    assert trims == []
    assert runner.invoke(cli.app, ["rules", *args]).exit_code == 0
    assert trims == [1]  # after big.jsonl, not after the one-line small.jsonl
