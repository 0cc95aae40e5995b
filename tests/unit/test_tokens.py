"""The tiktoken encoding cache (``tokens.load_encoding``) gives tiktoken's own counts."""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactctl import tokens
from compactctl.errors import UsageError
from tests.helpers import FIXTURES

TEXTS = [
    "hello world",
    "def f(x):\n    return x ** 2  # <|endoftext|> is plain text here",
    "你好，世界！表格 | a | b |",
    "\x1b[31merror\x1b[0m: exit 1\r\n" * 3,
]


def _forget_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    """No encoding loaded in this process, by compactctl or in tiktoken's registry."""
    import tiktoken.registry

    monkeypatch.setattr(tokens, "_ENCODINGS", {})
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})


def _tiktoken_reference(name: str):
    """tiktoken's own Encoding, built apart from compactctl's (not from the registry)."""
    import tiktoken
    from tiktoken_ext.openai_public import ENCODING_CONSTRUCTORS

    tokens.ensure_offline_encodings()  # offline: litellm's copies (a test may run alone)

    return tiktoken.Encoding(**ENCODING_CONSTRUCTORS[name]())


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An empty cache folder and no encoding loaded in this process yet."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    _forget_loaded(monkeypatch)
    tokens.ensure_offline_encodings()
    return tmp_path / "compactctl"


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_cached_encoding_counts_as_tiktoken(fresh: Path, monkeypatch: pytest.MonkeyPatch, name):
    first = tokens.load_encoding(name)  # through tiktoken; writes the cache
    files = list(fresh.glob(f"tiktoken-{name}-*.marshal"))
    assert len(files) == 1
    _forget_loaded(monkeypatch)
    second = tokens.load_encoding(name)  # from the cache file
    assert second is not first
    reference = _tiktoken_reference(name)
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
    _forget_loaded(monkeypatch)
    enc = tokens.load_encoding("cl100k_base")
    assert enc.encode_ordinary("hello world") == [15339, 1917]
    assert path.read_bytes() == good  # rewritten whole


def test_unwritable_cache_folder_is_no_error(fresh: Path, monkeypatch: pytest.MonkeyPatch):
    fresh.parent.mkdir(parents=True, exist_ok=True)
    fresh.write_text("a file where the folder should be")
    enc = tokens.load_encoding("cl100k_base")
    assert enc.encode_ordinary("hello world") == [15339, 1917]


@pytest.mark.parametrize("cached", [False, True])
def test_loaded_encoding_drops_its_python_ranks_and_pickles_by_name(
    fresh: Path, monkeypatch: pytest.MonkeyPatch, cached: bool
):
    import pickle

    import tiktoken

    if cached:  # the second load reads the marshal cache the first one wrote
        tokens.load_encoding("cl100k_base")
        _forget_loaded(monkeypatch)
    enc = tokens.load_encoding("cl100k_base")
    assert not hasattr(enc, "_mergeable_ranks")  # the dict of 100,256 bytes -> rank is gone
    assert tiktoken.get_encoding("cl100k_base") is enc  # registered: no second load
    blob = pickle.dumps(enc)
    assert len(blob) < 100  # by name, not the ranks
    again = pickle.loads(blob)
    assert again.encode_ordinary("hello world") == [15339, 1917]
    assert again.n_vocab == enc.n_vocab == 100277


def test_an_encoding_tiktoken_already_loaded_is_reused(fresh: Path):
    import tiktoken

    theirs = tiktoken.get_encoding("cl100k_base")
    assert tokens.load_encoding("cl100k_base") is theirs
    assert not list(fresh.glob("*.marshal"))  # nothing loaded, nothing cached


def test_token_counter_load_is_early_and_estimate_loads_nothing(fresh: Path):
    counter = tokens.TokenCounter("cl100k_base")
    counter.load()
    assert counter._enc is tokens.load_encoding("cl100k_base")
    assert counter.count("hello world") == 2
    estimate = tokens.TokenCounter("estimate")
    estimate.load()
    assert estimate._enc is None and estimate.count("abcdefgh") == 2
    with pytest.raises(UsageError, match="unknown tiktoken encoding"):
        tokens.TokenCounter("no_such_encoding").load()


def test_count_many_on_threads_counts_as_tiktoken_each_distinct_text_once(
    monkeypatch: pytest.MonkeyPatch,
):
    # distinct texts together past THREADED_MIN_CHARS, in several batches, plus repeats,
    # an empty text and one longer than CHUNK_CHARS (counted piece by piece)
    monkeypatch.setattr(tokens, "BATCH_CHARS", 4096)
    texts = [f"{t} #{i} " * (i % 40 + 1) for i in range(600) for t in TEXTS[i % 4 : i % 4 + 1]]
    long_text = "alpha beta, gamma 12 " * (tokens.CHUNK_CHARS // 20)
    batch = [*texts, "", texts[0], long_text, texts[1]]
    assert sum(map(len, set(texts))) > tokens.THREADED_MIN_CHARS
    monkeypatch.setattr(tokens, "count_threads", lambda: 2)  # whatever this machine has
    encoded: list[str] = []
    threads: set[str] = set()
    real = tokens._encoded_len

    def spy(enc, text):
        encoded.append(text)
        threads.add(threading.current_thread().name.split("_")[0])
        return real(enc, text)

    monkeypatch.setattr(tokens, "_encoded_len", spy)
    counter = tokens.TokenCounter("cl100k_base")
    got = counter.count_many(batch)
    ref = _tiktoken_reference("cl100k_base")
    want = [len(ref.encode_ordinary(t)) for t in batch]
    assert got == want
    whole = [t for t in encoded if t in set(batch)]  # not the long text's pieces
    assert sorted(whole) == sorted(set(batch) - {""})  # each distinct text once
    assert threads == {"MainThread", "compactctl-count"}  # the long text on the caller's
    assert counter.count_many(batch) == want and len(encoded) == len(set(encoded))


def test_count_many_after_a_prefetch_counts_what_it_needs_without_waiting_for_it(
    monkeypatch: pytest.MonkeyPatch,
):
    # the prefetch's texts are held back until the caller's count_many has returned: it
    # does not wait for the prefetch, and every count is tiktoken's, before and after
    monkeypatch.setattr(tokens, "BATCH_CHARS", 4096)
    monkeypatch.setattr(tokens, "count_threads", lambda: 2)
    texts = [f"{t} #{i} " * (i % 40 + 1) for i in range(400) for t in TEXTS[i % 4 : i % 4 + 1]]
    needed = texts[::5]
    assert sum(map(len, needed)) > tokens.THREADED_MIN_CHARS  # counted on the threads
    released = threading.Event()
    answered: list[bool] = []

    def held_back() -> list[str]:
        answered.append(released.wait(30))
        return texts

    ref = _tiktoken_reference("cl100k_base")
    counter = tokens.TokenCounter("cl100k_base")
    counter.load()
    counter.prefetch(held_back)
    counter.count_ahead(texts[1::5])  # queued, not waited for
    got = counter.count_many(needed)
    released.set()
    assert got == [len(ref.encode_ordinary(t)) for t in needed]
    assert counter._prefetch is not None
    counter._prefetch.join(30)
    assert answered == [True]  # the prefetch went on after count_many had answered
    assert counter.count_many(texts) == [len(ref.encode_ordinary(t)) for t in texts]


def test_a_prefetch_error_is_raised_by_the_callers_own_count(monkeypatch: pytest.MonkeyPatch):
    counter = tokens.TokenCounter("no_such_encoding")
    counter.prefetch(lambda: ["a text"])
    assert counter._prefetch is not None
    counter._prefetch.join(30)
    with pytest.raises(UsageError, match="unknown tiktoken encoding"):
        counter.count_many(["a text"])


@pytest.fixture
def no_counting_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small batches, two counting threads wanted, and none can be started (a process
    limit): ``Thread.start`` refuses the counting threads."""
    monkeypatch.setattr(tokens, "BATCH_CHARS", 4096)
    monkeypatch.setattr(tokens, "count_threads", lambda: 2)
    real_start = threading.Thread.start

    def start(thread: threading.Thread) -> None:
        if thread.name == "compactctl-count":
            raise RuntimeError("can't start new thread")
        real_start(thread)

    monkeypatch.setattr(threading.Thread, "start", start)


@pytest.mark.usefixtures("no_counting_threads")
def test_without_counting_threads_the_texts_are_counted_by_whoever_queued_them():
    texts = [f"{t} #{i} " * (i % 40 + 1) for i in range(400) for t in TEXTS[i % 4 : i % 4 + 1]]
    prefetched, needed = texts[::2], texts[1::2]
    assert sum(map(len, needed)) > tokens.THREADED_MIN_CHARS  # queued, not counted inline
    ref = _tiktoken_reference("cl100k_base")
    counter = tokens.TokenCounter("cl100k_base")
    counter.load()
    counter.prefetch(lambda: prefetched)
    assert counter._prefetch is not None
    counter._prefetch.join(30)
    assert set(prefetched) <= set(counter._cache)  # the prefetch's own thread counted them
    assert counter.count_many(needed) == [len(ref.encode_ordinary(t)) for t in needed]


@pytest.mark.usefixtures("no_counting_threads")
def test_a_caller_counting_alone_counts_only_its_own_batches():
    """No counting thread can be started: the caller counts its texts, not a prefetch's
    batches still queued (they stay queued for whoever needs them)."""
    counter = tokens.TokenCounter("cl100k_base")
    counter.load()
    queue = counter._count_queue()
    from concurrent.futures import Future

    pending: Future[None] = Future()
    queued = [f"prefetched text {i}\n" * 50 for i in range(20)]
    queue._heap.append((tokens._PREFETCH, -1, counter._measure(), queued, pending))
    needed = [f"needed text {i} " * (i % 40 + 30) for i in range(200)]
    assert sum(map(len, needed)) > tokens.THREADED_MIN_CHARS
    ref = _tiktoken_reference("cl100k_base")
    assert counter.count_many(needed) == [len(ref.encode_ordinary(t)) for t in needed]
    assert not pending.done() and not set(queued) & set(counter._cache)
    assert queue._heap == [(tokens._PREFETCH, -1, counter._measure(), queued, pending)]
    assert queue._workers == 0


def test_pool_workers_share_the_cores(monkeypatch) -> None:
    """A --jobs pool of N processes on C cores: each counts on C // N threads (at least 1,
    at most 2), so that two workers on two cores do not run four counting threads."""
    monkeypatch.setattr(tokens, "_cores", lambda: 2)
    assert tokens.count_threads() == 2
    monkeypatch.setattr(tokens, "_POOL_WORKERS", 1)
    tokens.share_cores(2)
    assert tokens.count_threads() == 1
    tokens.share_cores(8)
    assert tokens.count_threads() == 1
    monkeypatch.setattr(tokens, "_cores", lambda: 8)
    tokens.share_cores(2)
    assert tokens.count_threads() == 2


# --- line blocks (LineCounts) ------------------------------------------------------------------

LINE_ALPHABET = st.sampled_from(
    ["\n", "\n\n", "\r\n", " ", "  ", "\t", "a", "Z", "word", "Über", "0", "42", "1234",
     "'s", "'ll", "-", ".", "/", "{", "}", "::", "#", "你好", "表", "\u0301", "é", "🙂",
     "\n ", "\n1", "\nx", "\n-", " \n", "    return x\n", "<|endoftext|>"]
)  # fmt: skip


@pytest.fixture(scope="module", params=sorted(tokens.LINE_CUT_ENCODINGS))
def line_counts(request: pytest.FixtureRequest) -> tokens.LineCounts:
    tokens.ensure_offline_encodings()
    return tokens.LineCounts(_tiktoken_reference(request.param), request.param)


@settings(max_examples=400, deadline=None)
@given(parts=st.lists(LINE_ALPHABET, max_size=60))
def test_line_blocks_count_as_the_whole_text(line_counts: tokens.LineCounts, parts: list[str]):
    """The cut before an ASCII letter or digit after a newline is a piece boundary of each
    encoding: the blocks' counts (cached or not) sum to tiktoken's count of the text."""
    text = "".join(parts)
    assert line_counts(text) == len(line_counts.enc.encode_ordinary(text))


def _strings(value: object) -> list[str]:
    """Every string inside a decoded JSON value."""
    if isinstance(value, str):
        return [value]
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return [s for v in items for s in _strings(v)]


def test_line_blocks_count_the_fixtures_as_tiktoken(line_counts: tokens.LineCounts):
    """Every multi-line string of every fixture transcript (code, logs, diffs, tables)."""
    texts: set[str] = set()
    for p in sorted(FIXTURES.rglob("*.jsonl")):
        for line in p.read_bytes().splitlines():
            try:
                texts.update(s for s in _strings(json.loads(line)) if "\n" in s)
            except ValueError:  # the fixtures of damaged files
                continue
    assert len(texts) > 200
    assert sum(len(tokens._LINE_CUT.split(t)) for t in texts) > 3 * len(texts)
    for text in texts:
        assert line_counts(text) == len(line_counts.enc.encode_ordinary(text)), text[:200]
    joined = "\n".join(sorted(texts))
    assert line_counts(joined) == len(line_counts.enc.encode_ordinary(joined))


def test_a_text_sharing_lines_with_one_counted_is_encoded_only_where_it_differs(
    monkeypatch: pytest.MonkeyPatch,
):
    encoded: list[str] = []
    real = tokens._encoded_len
    monkeypatch.setattr(tokens, "_encoded_len", lambda enc, t: encoded.append(t) or real(enc, t))
    counter = tokens.TokenCounter("cl100k_base")
    body = "".join(f"line {i}: value = {i * i}\n" for i in range(200))
    first = "Read src/app.py\n" + body
    again = "Read src/app.py again\n" + body.replace("line 7:", "line seven:")
    ref = _tiktoken_reference("cl100k_base")
    assert counter.count(first) == len(ref.encode_ordinary(first))
    assert len(encoded) == 201  # one block per line
    encoded.clear()
    assert counter.count(again) == len(ref.encode_ordinary(again))
    assert encoded == ["Read src/app.py again\n", "line seven: value = 49\n"]


def test_past_the_cap_blocks_are_counted_but_not_kept(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(tokens, "LINE_CACHE_MAX_CHARS", 30)
    lines = tokens.LineCounts(_tiktoken_reference("cl100k_base"), "cl100k_base")
    text = "alpha beta\ngamma delta\nepsilon zeta eta\ntheta\n"
    assert lines(text) == len(lines.enc.encode_ordinary(text))
    assert list(lines.blocks) == ["alpha beta\n", "gamma delta\n", "epsilon zeta eta\n"]
    assert lines(text) == len(lines.enc.encode_ordinary(text))


def test_other_encodings_and_long_texts_are_counted_whole():
    tokens.ensure_offline_encodings()
    p50k = tokens.LineCounts(_tiktoken_reference("p50k_base"), "p50k_base")
    text = "\n\n1\ntwo\nthree\n"  # p50k_base: "\n\n" ends a text as 1 piece, before "1" as 2
    assert p50k(text) == len(p50k.enc.encode_ordinary(text)) == 8 and p50k.blocks == {}
    cl = tokens.LineCounts(_tiktoken_reference("cl100k_base"), "cl100k_base")
    long_text = "one two\nthree four\n" * (tokens.CHUNK_CHARS // 19 + 1)
    assert cl(long_text) == len(cl.enc.encode_ordinary(long_text)) and cl.blocks == {}


# -- the counting child (_CountProcess): compact --layers on a large file -------------------

CHILD_TEXTS = [
    *(f"{t} #{i} " * (i % 40 + 1) for i in range(300) for t in TEXTS[i % 4 : i % 4 + 1]),
    "a lone surrogate \ud800 in JSON\n" * 20,  # counted as "?", here and in the child
    "emoji 🙂 and <|endoftext|>\n" * 30,
]


def _reference_counts(texts: list[str]) -> list[int]:
    """tiktoken's counts; a lone surrogate counts as ``?`` (``_encoded_len``)."""
    ref = _tiktoken_reference("cl100k_base")
    return [len(ref.encode_ordinary(t.encode("utf-8", "replace").decode())) for t in texts]


@pytest.fixture
def child_counter(monkeypatch: pytest.MonkeyPatch):
    """A cl100k_base counter whose queue counts in a child process (two cores wanted, small
    batches), and the texts counted for it on this process's threads (``_count_batch``)."""
    monkeypatch.setattr(tokens, "BATCH_CHARS", 4096)
    monkeypatch.setattr(tokens, "count_threads", lambda: 2)
    here: list[str] = []
    real = tokens._count_batch
    counter = tokens.TokenCounter("cl100k_base")
    counter.load()

    def spy(cache, measure, batch, future):
        if cache is counter._cache:  # not another test's leftovers
            here.extend(batch)
        real(cache, measure, batch, future)

    monkeypatch.setattr(tokens, "_count_batch", spy)
    return counter, here


def _settled(counter: tokens.TokenCounter, texts: list[str]) -> None:
    """Wait (30 s at most) until ``texts`` are in the counter's cache."""
    import time

    deadline = time.monotonic() + 30
    while not set(texts) <= set(counter._cache):
        assert time.monotonic() < deadline, "the child never answered"
        time.sleep(0.01)


def test_a_counting_child_counts_as_tiktoken(child_counter):
    counter, here = child_counter
    prefetched = CHILD_TEXTS[::2]
    counter.prefetch(lambda: prefetched, child=True)
    _settled(counter, prefetched)
    process = counter._queue._process
    assert process is not None and process._proc.poll() is None
    assert here == []  # the prefetch was counted by the child alone
    assert [counter._cache[t] for t in prefetched] == _reference_counts(prefetched)
    # a caller's texts: the child counts from the first batch on, the caller from the
    # last back; each batch is settled once, every count is tiktoken's
    assert sum(map(len, CHILD_TEXTS[1::2])) > tokens.THREADED_MIN_CHARS
    assert counter.count_many(CHILD_TEXTS) == _reference_counts(CHILD_TEXTS)


def test_a_counting_child_that_dies_loses_no_count(child_counter):
    counter, here = child_counter
    counter.prefetch(lambda: CHILD_TEXTS[:10], child=True)
    _settled(counter, CHILD_TEXTS[:10])
    process = counter._queue._process
    process._proc.kill()
    process._proc.wait(30)
    rest = CHILD_TEXTS[10:]
    assert counter.count_many(rest) == _reference_counts(rest)
    assert set(rest) <= set(here)  # counted here: the child was gone
    more = ["one more text to count\n" * 50]
    counter.count_ahead(more)  # queued after the child died: counted, no hang
    assert counter.count_many(more) == _reference_counts(more)


def test_a_child_that_dies_while_counting_loses_no_count(child_counter, monkeypatch):
    """Killed while its batches are written, queued and counted: the unanswered ones are
    counted here, every count is tiktoken's, and nothing more is sent to it."""
    counter, here = child_counter
    answered: list[int] = []
    process_class = tokens._CountProcess
    real_receive = process_class._receive

    def receive(self):  # the child is killed once it has answered a first batch
        real_read = self._proc.stdout.read

        def read(n):
            data = real_read(n)
            if n > 8 and not answered:
                answered.append(n)
                self._proc.kill()
            return data

        self._proc.stdout.read = read
        real_receive(self)

    monkeypatch.setattr(process_class, "_receive", receive)
    counter.prefetch(lambda: CHILD_TEXTS[::2], child=True)
    _settled(counter, CHILD_TEXTS[::2])  # one batch answered, the rest counted here
    assert answered and here and set(here) < set(CHILD_TEXTS[::2])
    process = counter._queue._process
    assert process is not None and process._gone
    assert counter.count_many(CHILD_TEXTS) == _reference_counts(CHILD_TEXTS)
    assert counter._queue._process is None  # nothing more was sent to it
    assert set(CHILD_TEXTS[1::2]) <= set(here)


def test_a_child_that_cannot_start_leaves_the_counting_to_threads(child_counter, monkeypatch):
    counter, here = child_counter
    monkeypatch.setattr(tokens.sys, "executable", "/nonexistent/python")
    counter.prefetch(lambda: CHILD_TEXTS[::2], child=True)
    assert counter._queue._process is None
    assert counter.count_many(CHILD_TEXTS) == _reference_counts(CHILD_TEXTS)
    assert set(CHILD_TEXTS) <= set(here)  # all counted in this process


def test_a_closed_child_ends_without_its_queued_batches(child_counter):
    """Closing (the counter is collected) drops what the child had: nothing is counted
    here for a counter nobody uses, and the child is reaped."""
    counter, here = child_counter
    process = tokens._CountProcess()
    process.adopt(counter._cache)
    batches = [tokens._Batch(counter._measure(), [t]) for t in CHILD_TEXTS]
    assert all(process.send(b, tokens._PREFETCH) for b in batches)
    process.close()
    assert process._proc.wait(30) == -signal.SIGKILL  # killed, and reaped
    for b in batches:  # answered before the close, or cancelled: none counted here
        b.exception(30) if not b.cancelled() else None
    assert here == []


def _session_file(tmp_path: Path, model: str) -> Path:
    path = tmp_path / "s.jsonl"
    lines = [
        {"type": "session", "model": model},
        *({"type": "message", "role": "user", "content": t} for t in CHILD_TEXTS[:40]),
    ]
    path.write_bytes(b"".join(json.dumps(d).encode() + b"\n" for d in lines))
    return path


def test_warm_counting_hands_its_child_to_the_counter(child_counter, monkeypatch, tmp_path):
    counter, here = child_counter
    monkeypatch.setattr(tokens, "COUNT_PROCESS_MIN_BYTES", 0)
    path = _session_file(tmp_path, "claude-sonnet-4-5")
    assert tokens._sniffed_encoding(str(path)) == "cl100k_base"
    with tokens.warm_counting(str(path), None):
        warm = tokens._WARM.process
        assert warm is not None
        counter.prefetch(lambda: CHILD_TEXTS[:40], child=True)
        _settled(counter, CHILD_TEXTS[:40])
        assert counter._queue._process is warm
    assert warm._proc.poll() is None  # taken over: it lives on with the counter
    assert here == [] and counter.count_many(CHILD_TEXTS) == _reference_counts(CHILD_TEXTS)


def test_a_child_warmed_with_another_encoding_counts_each_batch_with_its_own(
    child_counter, monkeypatch, tmp_path
):
    counter, here = child_counter
    monkeypatch.setattr(tokens, "COUNT_PROCESS_MIN_BYTES", 0)
    path = _session_file(tmp_path, "gpt-4o")
    assert tokens._sniffed_encoding(str(path)) == "o200k_base"  # the warm-up's guess
    with tokens.warm_counting(str(path), None):
        counter.prefetch(lambda: CHILD_TEXTS, child=True)
        _settled(counter, CHILD_TEXTS)
    assert here == [] and counter.count_many(CHILD_TEXTS) == _reference_counts(CHILD_TEXTS)


def test_warm_counting_ends_a_child_nobody_took(monkeypatch, tmp_path):
    monkeypatch.setattr(tokens, "count_threads", lambda: 2)
    monkeypatch.setattr(tokens, "COUNT_PROCESS_MIN_BYTES", 0)
    path = _session_file(tmp_path, "gpt-4o")
    with tokens.warm_counting(str(path), None):
        warm = tokens._WARM.process
        assert warm is not None
    assert warm._proc.wait(30) == -signal.SIGKILL  # killed at the block's end
    assert tokens._WARM.process is None
    with tokens.warm_counting(str(path), "estimate"):  # no child for estimates,
        assert tokens._WARM.process is None
    with tokens.warm_counting("-", None):  # for stdin,
        assert tokens._WARM.process is None
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with tokens.warm_counting(str(fifo), None):  # for a pipe (the child would drain it),
        assert tokens._WARM.process is None
    monkeypatch.setattr(tokens, "count_threads", lambda: 1)
    with tokens.warm_counting(str(path), None):  # on one core,
        assert tokens._WARM.process is None
    monkeypatch.setattr(tokens, "count_threads", lambda: 2)
    monkeypatch.setattr(tokens, "COUNT_PROCESS_MIN_BYTES", path.stat().st_size + 1)
    with tokens.warm_counting(str(path), None):  # or for a small file
        assert tokens._WARM.process is None


def test_prompt_sizes_count_ahead_queues_the_messages_not_sized_yet(child_counter):
    """``compact --layers`` queues each layer's new messages as soon as the layer has
    planned (``PromptSizes.count_ahead``): their payloads are counted before anyone asks,
    those already sized are not queued again, and the totals are the sizes as counted."""
    from compactctl.model import Message

    counter, here = child_counter
    counter.prefetch(lambda: [], child=True)
    view = [Message({"type": "message", "role": "user", "content": t}) for t in CHILD_TEXTS[:60]]
    sizes = tokens.PromptSizes(counter)
    sizes.totals(view[:30])
    sent: list[list[str]] = []
    real = counter.count_ahead
    counter.count_ahead = lambda texts: (sent.append(list(texts)), real(sent[-1]))  # type: ignore[method-assign]
    sizes.count_ahead(view)
    assert sent == [[tokens.message_payload(m.data) for m in view[30:]]]
    _settled(counter, sent[0])
    assert here == []  # counted by the child, before totals asked for them
    want = tokens.prompt_sum(_reference_counts([tokens.message_payload(m.data) for m in view]))
    assert sizes.totals(view)[0] == want
