"""Token counts (tiktoken, offline), fast estimates, and context windows.

- Exact counts use tiktoken's ``encode_ordinary`` (plain ``encode`` raises on text that
  contains special tokens such as ``<|endoftext|>``, which transcripts of agents that read
  tokenizer code do contain). Repeated content is counted once: counts are cached by text,
  and a text's line blocks by themselves (:class:`LineCounts`), so a message that shares
  lines with one counted before (a file read again, a tool result a layer rewrote) is
  encoded only where it differs. A long text is encoded in pieces of about
  :data:`CHUNK_CHARS` cut where the encodings' pre-tokenizer always splits
  (:func:`cut_points`), so the count is the same and memory stays bounded; past
  :data:`EXACT_MAX_CHARS` the rest of a text is extrapolated.
- tiktoken downloads its encodings on first use; offline, :func:`ensure_offline_encodings`
  points ``TIKTOKEN_CACHE_DIR`` at the copies litellm ships, found with
  ``importlib.util.find_spec`` so litellm itself is never imported. A value the user set wins.
- The estimate is ``ceil(non-CJK chars / 4) + CJK chars`` (OpenAI's "about 4 characters per
  token" rule of thumb for English; CJK ideographs are about one token each in cl100k_base
  and o200k_base). It is always labelled an estimate where shown.
- Images and documents count by the providers' published rules, not by their base64 text
  (:mod:`compactctl.media`; :func:`message_tokens`).
- A model's context window as litellm's bundled
  ``model_prices_and_context_window_backup.json`` gives it, read as a plain file
  (:func:`context_window_for`). A *session's* window is decided in one place,
  :func:`compactctl.session.context_window` (``--context-window``, the session event, this
  table, the Claude rules, a default), which uses it.
- The prompt size of a message list (:func:`prompt_tokens`, :func:`prompt_total`,
  :func:`prompt_sum`) follows the OpenAI cookbook's counting scheme ("How to count tokens
  with tiktoken"): each message's payload, plus :data:`MESSAGE_OVERHEAD` per message, plus
  :data:`REPLY_PRIMING` once. Every layer and report sizes prompts through these three.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import heapq
import importlib.util
import itertools
import os
import re
import stat
import sys
import threading
import unicodedata
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from compactctl.media import MediaRule, media_tokens
from compactctl.text import CJK_LETTERS, string_leaves

if TYPE_CHECKING:
    from concurrent.futures import Future

    from compactctl.model import Message

__all__ = [
    "BATCH_CHARS",
    "CHUNK_CHARS",
    "EXACT_MAX_CHARS",
    "LINE_CACHE_MAX_CHARS",
    "LINE_CUT_ENCODINGS",
    "MESSAGE_OVERHEAD",
    "REPLY_PRIMING",
    "THREADED_MIN_CHARS",
    "LineCounts",
    "PromptSizes",
    "TokenCounter",
    "context_window_for",
    "count_threads",
    "cut_points",
    "is_cut",
    "encoding_for_model",
    "ensure_offline_encodings",
    "estimate_tokens",
    "load_encoding",
    "message_payload",
    "message_tokens",
    "messages_tokens",
    "prompt_sum",
    "prompt_tokens",
    "prompt_total",
]

MESSAGE_OVERHEAD = 3
"""Tokens added per message for role and separators (OpenAI cookbook, "How to count tokens
with tiktoken": ``tokens_per_message = 3`` for gpt-3.5-turbo-0613 and later)."""

REPLY_PRIMING = 3
"""Tokens every reply is primed with, counted once per prompt (OpenAI cookbook, "How to count
tokens with tiktoken": ``<|start|>assistant<|message|>``)."""

CHUNK_CHARS = 1 << 20
"""Characters (1 Mi) encoded per tiktoken call when counting a long text.

tiktoken returns the tokens of a text as a Python list (with an ``int`` object per token
past 256): 100 MB of text in one call peaked at 1.5-5.2 GB (issue 14). In pieces of this
size one call holds about 250k tokens (a few MB), whatever the text's length."""

EXACT_MAX_CHARS = 8 << 20
"""Characters (8 Mi) of one text counted exactly; past them the rest is extrapolated.

tiktoken encodes about 5 MB/s of prose or logs per core here, so counting 100 MB exactly
takes about 20 s, 40 times the ``--estimate`` run; capped, exact counts stay within 10 times
of it. Eight Mi characters are already 2M tokens or more (4 characters a token in English,
about 1 in CJK), more than any model's context window, so a text this long overflows any
window whatever the rest counts: the rest is counted as its :func:`estimate_tokens`, scaled
by the exact/estimate ratio of the exact part, and a :class:`~compactctl.errors.CompactWarning`
says so (once)."""

LINE_CUT_ENCODINGS = frozenset({"cl100k_base", "o200k_base"})
"""Encodings whose pre-tokenizer always ends a piece before an ASCII letter or digit that
follows a newline (rule 2 of :func:`cut_points`): their counts are cached per line block
(:class:`LineCounts`). Not p50k_base: its regex has no ``\\s*[\\r\\n]+``, so a run of
newlines at the end of a block is one piece, and before a letter it is two (``"\\n\\n1"``
is 3 tokens, ``"\\n\\n"`` and ``"1"`` are 2)."""

LINE_CACHE_MAX_CHARS = 1 << 26
"""Characters (64 Mi) of line blocks a :class:`LineCounts` keeps counts for: past them it
still uses the counts it has, and keeps no new ones (the blocks are copies of the texts'
slices; this bounds them at about 64 MB of ASCII)."""

EXTRAPOLATED_NOTE = (
    f"a text longer than {EXACT_MAX_CHARS:,} characters: its first {EXACT_MAX_CHARS:,} are "
    "counted exactly, the rest is extrapolated from them (such a text alone exceeds any "
    "model's context window)"
)
"""The warning of a count past :data:`EXACT_MAX_CHARS`."""

_O200K_PREFIXES = ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o")
_CJK = re.compile(f"[{CJK_LETTERS}]")


def ensure_offline_encodings() -> str | None:
    """Point tiktoken at litellm's bundled encodings unless ``TIKTOKEN_CACHE_DIR`` is set.

    Returns:
        The cache folder in effect, or ``None`` when none is set and litellm is not installed.
    """
    current = os.environ.get("TIKTOKEN_CACHE_DIR")
    if current:
        return current
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils" / "tokenizers"
    if folder.is_dir():
        os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)
        return str(folder)
    return None


_ENCODINGS: dict[str, Any] = {}
_CACHE_MAGIC = b"compactctl-tiktoken-1\n"


def load_encoding(name: str) -> Any:
    """The tiktoken ``Encoding`` named ``name``, loaded once per process, fast after the first.

    ``tiktoken.get_encoding`` parses its base64 rank file on every process start (measured
    here: cl100k_base 0.16 s, o200k_base 0.3 s on a quiet core, about twice that under
    load), which dominates a command on a small session. The first load goes through
    tiktoken (which checks the file's SHA-256); its constructor arguments are then kept in
    ``<user cache dir>/compactctl/`` as a ``marshal`` file with a SHA-256 of its own, and
    later processes build the Encoding from it in about half the time. A missing, stale or
    damaged cache file is ignored (and rewritten); a cache folder that cannot be written is
    no error.

    Memory (peak RSS, measured with CPython 3.11 and tiktoken 0.14): the ranks are read as
    a Python ``dict[bytes, int]`` (cl100k_base about 13 MB, o200k_base about 26 MB), which
    tiktoken's Rust ``CoreBPE`` copies into its own tables (about 26 MB and 46 MB) that
    live as long as the process. The Encoding then keeps the dict only to pickle itself,
    so the Encoding built here is registered in ``tiktoken.registry.ENCODINGS`` (it then
    pickles by name, as tiktoken's own do) and its dict is dropped; both exist together
    only while the Encoding is built. An Encoding that tiktoken already loaded in this
    process (``tiktoken.get_encoding``) is reused, not loaded twice.

    Raises:
        ValueError, KeyError, OSError: from tiktoken, for an unknown or unavailable encoding.
    """
    enc = _ENCODINGS.get(name)
    if enc is not None:
        return enc
    import tiktoken
    import tiktoken.registry

    enc = tiktoken.registry.ENCODINGS.get(name)
    if enc is not None:
        _ENCODINGS[name] = enc
        return enc
    path = _encoding_cache_path(name, tiktoken.__version__)
    kwargs = _read_encoding_cache(path) if path is not None else None
    if kwargs is None:
        try:
            from tiktoken_ext.openai_public import ENCODING_CONSTRUCTORS
        except ImportError:  # pragma: no cover - tiktoken always ships it
            ENCODING_CONSTRUCTORS = {}
        constructor = ENCODING_CONSTRUCTORS.get(name)
        if constructor is None:  # not one of OpenAI's: tiktoken's own lookup, uncached
            enc = _ENCODINGS[name] = tiktoken.get_encoding(name)
            return enc
        kwargs = constructor()
        if path is not None:
            _write_encoding_cache(path, kwargs)
    enc = tiktoken.Encoding(**kwargs)
    del kwargs  # with the ranks dict below, the last Python references to the ranks
    # setdefault is atomic: a thread that registered its own first wins, and this one goes
    enc = tiktoken.registry.ENCODINGS.setdefault(name, enc)
    if hasattr(enc, "_mergeable_ranks") and enc.name == name:
        del enc._mergeable_ranks  # registered: __getstate__ pickles it by name instead
    _ENCODINGS[name] = enc
    return enc


def _encoding_cache_path(name: str, version: str) -> Path | None:
    try:
        import platformdirs

        folder = Path(platformdirs.user_cache_dir("compactctl"))
    except Exception:  # no home folder, odd platform: run without the cache
        return None
    py = f"{sys.version_info[0]}{sys.version_info[1]}"
    return folder / f"tiktoken-{name}-{version}-py{py}.marshal"


def _read_encoding_cache(path: Path) -> dict[str, Any] | None:
    import marshal

    try:
        blob = path.read_bytes()
    except OSError:
        return None
    head = len(_CACHE_MAGIC)
    # a view, not a copy of the payload (1.6 MB for cl100k_base, 3.4 MB for o200k_base)
    digest, payload = blob[head : head + 32], memoryview(blob)[head + 32 :]
    if not blob.startswith(_CACHE_MAGIC) or hashlib.sha256(payload).digest() != digest:
        return None
    try:
        kwargs = marshal.loads(payload)
    except (EOFError, ValueError, TypeError):
        return None
    return kwargs if isinstance(kwargs, dict) and "mergeable_ranks" in kwargs else None


def _write_encoding_cache(path: Path, kwargs: dict[str, Any]) -> None:
    import marshal
    import tempfile

    payload = marshal.dumps(kwargs)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(_CACHE_MAGIC + hashlib.sha256(payload).digest() + payload)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass  # a read-only or full cache folder only costs the next process the slow load


def encoding_for_model(model: str | None) -> str:
    """The tiktoken encoding to count a model's tokens with.

    ``o200k_base`` for gpt-4o, gpt-4.1, gpt-4.5, gpt-5 and the o-series (tiktoken's own
    model table); ``cl100k_base`` otherwise, including non-OpenAI models, for which it is a
    close, documented approximation. A provider prefix (``openai/gpt-4o``) is ignored.

    >>> encoding_for_model("openai/gpt-4o-mini"), encoding_for_model("claude-sonnet-4-5")
    ('o200k_base', 'cl100k_base')
    """
    if not model:
        return "cl100k_base"
    name = model.rsplit("/", 1)[-1].lower()
    return "o200k_base" if name.startswith(_O200K_PREFIXES) else "cl100k_base"


def estimate_tokens(text: str) -> int:
    """A fast token estimate in tokens: ``ceil(non-CJK chars / 4) + CJK chars``.

    >>> estimate_tokens("abcdefgh"), estimate_tokens("你好，世界")
    (2, 5)
    """
    if not text:
        return 0
    if text.isascii():
        return (len(text) + 3) // 4
    cjk = len(_CJK.findall(text))
    rest = len(text) - cjk
    return cjk + (rest + 3) // 4


class TokenCounter:
    """Counts tokens of texts with one tiktoken encoding; each distinct text is encoded once.

    Args:
        encoding: a tiktoken encoding name (``cl100k_base``, ``o200k_base``, ``p50k_base``),
            or ``"estimate"`` for :func:`estimate_tokens` (no tiktoken at all).

    Raises:
        UsageError: (on first count) the encoding is not one tiktoken knows (exit code 2; the
            message lists them).
        ValueError: (on first count) its file is unavailable offline; the message says to set
            ``TIKTOKEN_CACHE_DIR`` or use ``--estimate``.
    """

    def __init__(self, encoding: str = "cl100k_base") -> None:
        self.encoding_name = encoding
        self.is_estimate = encoding == "estimate"
        # keyed by the text itself: str hashes are computed once per object and cached by
        # Python, where a digest cost an extra UTF-8 copy and a blake2b pass per text. The
        # texts are the session's own strings (alive while it is processed), so the cache
        # adds a reference, not a copy, except for joined tool-call payloads.
        self._cache: dict[str, int] = {}
        self._enc: Any = None
        self._lines: LineCounts | None = None  # the encoding, with its line blocks' counts
        self._enc_lock = threading.Lock()  # _enc and _lines are loaded once, by one thread
        self._prefetch: threading.Thread | None = None
        self._queue: _CountQueue | None = None  # the counting threads (_count_queue)
        # the image-token rule of the session's provider (compactctl.media): set by whoever
        # knows the model (Session, inspect); None counts images by the "anthropic" rule
        self.media_rule: MediaRule | None = None

    def _measure(self) -> LineCounts:
        if self._lines is not None:
            return self._lines
        with self._enc_lock:  # a prefetch thread may be loading it: wait, not load twice
            return self._load_encoder()

    def _load_encoder(self) -> LineCounts:
        if self._lines is None:
            ensure_offline_encodings()
            import tiktoken

            if self.encoding_name not in tiktoken.list_encoding_names():
                from compactctl.errors import UsageError

                known = ", ".join(sorted(tiktoken.list_encoding_names()))
                raise UsageError(
                    f"unknown tiktoken encoding {self.encoding_name!r}: --encoding takes one "
                    f"of {known} (cl100k_base, o200k_base and p50k_base work offline), or "
                    "estimate (--estimate)"
                )
            try:
                self._enc = load_encoding(self.encoding_name)
            except Exception as exc:  # tiktoken raises ValueError or network errors
                raise ValueError(
                    f"tiktoken encoding {self.encoding_name!r} is not available offline "
                    f"({exc}); set TIKTOKEN_CACHE_DIR to a folder holding it, or pass "
                    "--estimate for a chars-based estimate"
                ) from exc
            self._lines = LineCounts(self._enc, self.encoding_name)
        return self._lines

    def load(self) -> None:
        """Load the encoding now instead of on the first count; nothing for ``"estimate"``.

        Building an encoding briefly holds a Python copy of its ranks next to tiktoken's own
        tables (:func:`load_encoding`: about 26 MB for o200k_base on top of 46 MB that
        stay): loaded before a command builds its large structures, that transient adds to
        a lower peak RSS.

        Raises:
            UsageError, ValueError: the encoding is unknown, or unavailable offline (as
                :meth:`count`).
        """
        if not self.is_estimate:
            self._measure()

    def prefetch(self, texts: Callable[[], Iterable[str]], *, child: bool = False) -> None:
        """Count ``texts()`` in the background while the caller goes on (nothing for
        ``"estimate"``, or while a prefetch is still being queued).

        A background thread builds the texts and queues the uncached ones, in batches of
        about :data:`BATCH_CHARS`, for :func:`count_threads` counting threads. A later
        :meth:`count_many` does not wait for the whole prefetch: the texts it needs that are
        not counted yet go to the same threads ahead of the prefetch's queued batches, and
        it waits for those only (so a layer that needs a few counts is not held up by the
        whole session's). Each distinct text is still encoded once, but for one being
        encoded at that very moment, and the counts are the same. ``compact --layers``
        starts one over the session's payloads before the rules run
        (:func:`compactctl.layers.onepass.plan_onepass`): tiktoken releases the GIL while
        it encodes, so the counting overlaps the layers' Python work. Texts longer than
        :data:`CHUNK_CHARS` are left to the caller's own count. An error in the background
        (an encoding unavailable offline) is dropped there: the caller's own count raises
        it.

        With ``child``, and two cores for this process (:func:`count_threads`), the queued
        texts are counted by a child process instead (:class:`_CountProcess`: the one
        :func:`warm_counting` started, else one started now): threads of this process only
        get the GIL back between two texts, and a caller busy with regexes holds it for
        milliseconds at a time, so they count little while the layers run (on the 32 MB
        bench session 0.2-0.3M of 9.6M characters by the time the rules needed theirs). A
        caller waiting in :meth:`count_many` then counts its own queued texts on its thread
        meanwhile. The counts are the same: the child counts with the same
        :class:`LineCounts`. It pays off only for many texts (the child takes 0.2-0.4 s to
        start: ``compact --layers`` asks for it from :data:`COUNT_PROCESS_MIN_BYTES`).

        Args:
            texts: returns the texts (called on the background thread, so building them
                overlaps too; it must only read objects nobody changes meanwhile).
            child: count them in a child process (see above).
        """
        if self.is_estimate or (self._prefetch is not None and self._prefetch.is_alive()):
            return
        queue = self._count_queue()
        if child and count_threads() >= 2:
            queue.start_process()

        def run() -> None:
            try:
                measure = self._measure()
                cache = self._cache
                todo = [
                    t
                    for t in dict.fromkeys(texts())
                    if t and len(t) <= CHUNK_CHARS and t not in cache
                ]
            except Exception:  # the caller's own count raises it (see above)
                return
            self._count_queue().submit(measure, todo, _PREFETCH)

        thread = threading.Thread(target=run, name="compactctl-prefetch", daemon=True)
        self._prefetch = thread
        thread.start()

    def count_ahead(self, texts: Iterable[str]) -> None:
        """Queue the uncached ``texts`` for the :meth:`prefetch` threads, ahead of what the
        prefetch queued, without waiting (nothing without a prefetch, for ``"estimate"``,
        or before the encoding is loaded): a layer that will need their counts calls it as
        it finds them, so that they are counted while it goes on; its :meth:`count_many`
        then waits for what is left. Texts longer than :data:`CHUNK_CHARS` are left to it."""
        queue, measure = self._queue, self._lines
        if queue is None or measure is None:
            return
        cache = self._cache
        todo = [t for t in dict.fromkeys(texts) if t and len(t) <= CHUNK_CHARS and t not in cache]
        if todo:
            queue.submit(measure, todo, _NEEDED)

    def count(self, text: str) -> int:
        """Tokens in ``text`` (``encode_ordinary``: special tokens count as plain text)."""
        if not text:
            return 0
        if self.is_estimate:
            return estimate_tokens(text)
        n = self._cache.get(text)
        if n is None:
            n = self._cache[text] = self._measure()(text)
        return n

    def count_many(self, texts: Iterable[str]) -> list[int]:
        """Token counts for many texts; each uncached distinct text is encoded once.

        tiktoken's Rust encoder releases the GIL while it encodes, so when the texts to
        encode hold at least :data:`THREADED_MIN_CHARS` characters they are encoded in
        batches on :func:`count_threads` threads (those of :class:`_CountQueue`, as
        tiktoken's own ``encode_ordinary_batch`` does, in fewer, larger tasks); measured
        on the payloads of the 32 MB bench session (11,354 messages, 23.0M characters):
        6.3-6.6 s wall on two threads, 7.4-9.7 s on one (load average 5-6 on 2 cores).
        After a :meth:`prefetch`, they go ahead of what it has queued. The counts are those
        of one thread: each text is counted by :class:`LineCounts` either way. A text longer than
        :data:`CHUNK_CHARS` is counted on the calling thread (piece by piece; see there).
        """
        texts = list(texts)
        if self.is_estimate:
            return [estimate_tokens(t) for t in texts]
        cache = self._cache
        todo = [t for t in dict.fromkeys(texts) if t and t not in cache]
        if todo:
            measure = self._measure()
            short = [t for t in todo if len(t) <= CHUNK_CHARS]
            for t in todo:
                if len(t) > CHUNK_CHARS:
                    cache[t] = measure(t)
            if _threaded(short):
                queue = self._count_queue()
                queue.wait(queue.submit(measure, short, _NEEDED))
            else:
                cache.update((t, measure(t)) for t in short)
        return [cache[t] if t else 0 for t in texts]

    def _count_queue(self) -> _CountQueue:
        """The counting threads' queue, made on first use (by the caller's thread)."""
        if self._queue is None:
            self._queue = _CountQueue(self._cache)
        return self._queue


_NEEDED, _PREFETCH = 0, 1
"""Priorities of the :class:`_CountQueue`: texts a caller waits for, then a prefetch's."""


class _CountQueue:
    """The counting threads of a :class:`TokenCounter`: batches of texts in order of
    priority (then of submission), counted into the counter's cache by
    :func:`count_threads` daemon threads, started when there is work and ended when the
    queue is empty (none is left behind). When no thread can be started (a process limit),
    whoever submits counts, until its own batches are done. After :meth:`start_process`,
    the batches go to a child process instead (:class:`_CountProcess`), and a caller
    waiting for its batches counts them too, from the last one back."""

    def __init__(self, cache: dict[str, int]) -> None:
        self._cache = cache
        self._lock = threading.Lock()
        self._heap: list[tuple[int, int, LineCounts, list[str], Future[None]]] = []
        self._seq = itertools.count()
        self._workers = 0
        self._process: _CountProcess | None = None

    def start_process(self) -> None:
        """Count from now on in a child process (:class:`_CountProcess`): the one
        :func:`warm_counting` started on this thread, else a new one; if none can be
        started (no interpreter or no thread to be had: ``OSError``), or off POSIX, on
        threads as before."""
        with self._lock:
            if self._process is not None or os.name != "posix":  # the child selects on a pipe
                return
            process, _WARM.process = _WARM.process, None
            if process is None:
                try:
                    process = _CountProcess()
                except OSError:  # no interpreter to start: count on threads
                    return
            process.adopt(self._cache)
            self._process = process
            # the child ends when its stdin closes: when this queue is collected
            weakref.finalize(self, process.close)

    def submit(self, measure: LineCounts, texts: list[str], priority: int) -> list[Future[None]]:
        """Queue ``texts`` in batches of about :data:`BATCH_CHARS`; one future per batch."""
        process = self._process
        if process is not None:
            batches = [_Batch(measure, batch) for batch in _batches(texts)]
            if not all([process.send(b, priority) for b in batches]):
                self._process = None  # the child is gone: counted here, as without it
            return [*batches]
        from concurrent.futures import Future

        futures: list[Future[None]] = []
        with self._lock:
            for batch in _batches(texts):
                future: Future[None] = Future()
                heapq.heappush(self._heap, (priority, next(self._seq), measure, batch, future))
                futures.append(future)
            while self._workers < min(count_threads(), len(self._heap)):
                self._workers += 1
                thread = threading.Thread(target=self._work, name="compactctl-count", daemon=True)
                try:
                    thread.start()
                except RuntimeError:  # no thread to be had (a process limit)
                    self._workers -= 1
                    break
            alone = self._workers == 0
            if alone:  # nobody would count them: the caller does, now
                self._workers += 1
        if alone:
            self._work(until=futures)
        return futures

    def wait(self, futures: list[Future[None]]) -> None:
        """Wait for ``futures``; raise the first error a batch met. Batches a child
        process counts (:class:`_Batch`) are counted here too meanwhile, from the last one
        back, while the child goes from the first one on (the caller's core is idle
        otherwise); a batch is settled by whoever finishes it first, with the same counts."""
        for future in reversed(futures):
            if isinstance(future, _Batch) and not future.done():
                _count_batch(self._cache, future.measure, future.texts, future)
        for future in futures:
            future.result()

    def _work(self, until: list[Future[None]] | None = None) -> None:
        """Count queued batches, the most urgent first, until the queue is empty (or, for
        a caller counting alone, until the batches of ``until`` are done)."""
        while True:
            with self._lock:
                if not self._heap or (until and all(f.done() for f in until)):
                    self._workers -= 1
                    return
                _, _, measure, batch, future = heapq.heappop(self._heap)
            _count_batch(self._cache, measure, batch, future)


def _count_batch(
    cache: dict[str, int], measure: LineCounts, batch: list[str], future: Future[None]
) -> None:
    """Count the uncached texts of ``batch`` into ``cache``, then settle ``future`` (with
    the error met, if any: the caller waiting for it raises it), unless it was meanwhile.
    A ``KeyboardInterrupt`` or ``SystemExit`` is raised here as well."""
    from concurrent.futures import InvalidStateError

    try:
        for t in batch:
            if t not in cache:  # counted meanwhile (a prefetch's and a caller's)
                cache[t] = measure(t)
    except BaseException as exc:
        with contextlib.suppress(InvalidStateError):
            future.set_exception(exc)
        if not isinstance(exc, Exception):  # Ctrl-C, exit: raised here too, now
            raise
    else:
        with contextlib.suppress(InvalidStateError):
            future.set_result(None)


def _batch_class() -> type:
    from concurrent.futures import Future

    class _Batch(Future):  # type: ignore[type-arg]
        """A batch of texts to count, and the future of its counts."""

        def __init__(self, measure: LineCounts, texts: list[str]) -> None:
            super().__init__()
            self.measure = measure
            self.texts = texts

    return _Batch


if TYPE_CHECKING:

    class _Batch(Future[None]):
        measure: LineCounts
        texts: list[str]

        def __init__(self, measure: LineCounts, texts: list[str]) -> None: ...

else:
    _Batch = _batch_class()


class _CountProcess:
    """A child Python process that counts batches of texts for a :class:`_CountQueue`,
    with a GIL of its own (:meth:`TokenCounter.prefetch` says why).

    The child (:func:`_count_child`) loads the encoding and counts each text with
    :class:`LineCounts`, as this process would. Batches are written to it as they are
    submitted (by a writer thread, through a pipe of :data:`PIPE_BYTES`) and queued there
    by priority, so the child always has work and picks the most urgent: no thread of
    this process needs the GIL for it to go on. A reader thread files the answers into the
    cache. If the child fails or ends (a crash, a short answer), the batches not answered
    are counted here, and :meth:`send` says it is gone: a count is never lost or guessed.

    Wire format (native byte order, unsigned 32-bit): a batch is its id, its priority,
    ``n``, the total UTF-8 bytes, the length of its encoding's name, ``n`` byte lengths,
    the name, then the texts' UTF-8 (lone surrogates passed through, so the child decodes
    the very same string); the answer is the id, ``n``, then ``n`` counts (a text of
    :data:`CHUNK_CHARS` or fewer characters has fewer than 2**32 tokens). Each batch
    names its encoding, so a child warmed with another one still counts it right.

    Args:
        warm: a transcript whose texts the child counts ahead, until the first batch
            comes (:func:`warm_counting`), or ``None``.
        encoding: the encoding to count them with (``None``: that of the first model the
            file names, :func:`_sniffed_encoding`).

    Raises:
        OSError: the child cannot be started.
    """

    def __init__(self, warm: str | None = None, encoding: str | None = None) -> None:
        import queue
        import subprocess

        root = str(Path(__file__).resolve().parent.parent)  # where compactctl is imported from
        code = (
            "import sys; sys.path.insert(0, sys.argv[1]); import compactctl.tokens as t; "
            "t._count_child(*sys.argv[2:])"
        )
        warming = [warm, encoding or ""] if warm else []
        self._proc = subprocess.Popen(
            [sys.executable, "-c", code, root, *warming],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert self._proc.stdin is not None
        with contextlib.suppress(OSError, AttributeError, ImportError):  # Linux: a larger pipe
            import fcntl

            fcntl.fcntl(self._proc.stdin.fileno(), fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        self._cache: dict[str, int] = {}
        self._sent: dict[int, _Batch] = {}  # by id: written, not answered yet
        self._ids = itertools.count()
        self._frames: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._gone = False  # the child ended or failed: nothing more is sent
        self._closed = False  # closed by its owner: what it had is of no use
        try:
            for target in (self._receive, self._write):
                threading.Thread(target=target, name="compactctl-count-pipe", daemon=True).start()
        except RuntimeError as exc:  # no thread to be had (a process limit)
            self.close()  # kills it
            self._proc.wait()
            raise OSError(f"no thread for the counting child: {exc}") from exc

    def adopt(self, cache: dict[str, int]) -> None:
        """File the answers into ``cache`` (the counter's), before any batch is sent."""
        self._cache = cache

    def send(self, batch: _Batch, priority: int) -> bool:
        """Queue ``batch`` for the child (its uncached texts; ``priority`` as
        :class:`_CountQueue`'s); ``False`` if the child is gone (then it is counted here,
        now)."""
        from array import array

        cache = self._cache
        texts = batch.texts = [t for t in batch.texts if t not in cache]
        if not texts:  # all counted since it was queued
            _count_batch(cache, batch.measure, texts, batch)
            return True
        data = [t.encode("utf-8", "surrogatepass") for t in texts]
        sizes = array("I", map(len, data))
        name = batch.measure.name.encode()
        with self._lock:
            gone = self._gone
            if not gone:
                key = next(self._ids)
                self._sent[key] = batch
                head = array("I", (key, priority, len(data), sum(sizes), len(name)))
                self._frames.put(b"".join([head.tobytes(), sizes.tobytes(), name, *data]))
        if gone:
            _count_batch(cache, batch.measure, texts, batch)
        return not gone

    def _write(self) -> None:
        """Write the queued batches to the child, in order; after :meth:`close` (which
        kills it) or once it is gone, close its input and reap it."""
        assert self._proc.stdin is not None
        write = self._proc.stdin.write
        try:
            while (frame := self._frames.get()) is not None:
                if self._closed:
                    continue  # of no use now: the child is ended without them
                write(frame)
                self._proc.stdin.flush()
        except (OSError, ValueError):  # the child is gone: the reader counts what was sent
            pass
        with contextlib.suppress(OSError):
            self._proc.stdin.close()
        self._proc.wait()  # reaped: no zombie in a long-lived process

    def _receive(self) -> None:
        """File the child's answers; when it ends or answers wrongly, count here what it
        had not answered."""
        from array import array
        from concurrent.futures import InvalidStateError

        assert self._proc.stdout is not None
        read = self._proc.stdout.read
        batch: _Batch | None = None
        while len(head := read(8)) == 8:
            key, n = array("I", head)
            body = read(4 * n)
            with self._lock:
                batch = self._sent.pop(key, None)
            if batch is None or len(body) < 4 * n or len(batch.texts) != n:
                self._proc.kill()  # a child that answers wrongly is not trusted again
                break
            self._cache.update(zip(batch.texts, array("I", body), strict=True))
            with contextlib.suppress(InvalidStateError):  # counted meanwhile by the caller
                batch.set_result(None)
            batch = None
        with self._lock:
            self._gone = True
            left = list(self._sent.values())
            self._sent.clear()
        if batch is not None and not batch.done():
            left.append(batch)
        for batch in left:
            if self._closed:  # nobody waits for them (see close)
                batch.cancel()
            else:
                _count_batch(self._cache, batch.measure, batch.texts, batch)
        self.close()

    def close(self) -> None:
        """End the child now (it is killed: what it counts is of no use any more): batches
        not written are dropped, those it has are not answered. Its owner closes it when no
        caller can wait for them: the counter is collected (at the latest when the program
        exits), or :func:`warm_counting` ends with nobody having taken it over."""
        self._closed = True
        self._frames.put(None)  # the writer closes its input and reaps it
        with contextlib.suppress(OSError):
            self._proc.kill()


PIPE_BYTES = 1 << 20
"""Bytes (1 MiB, Linux's default maximum for a user) of the pipe to a counting child: the
child takes in every batch written while it counts, in few reads."""


def _count_child(warm: str | None = None, encoding: str = "") -> None:
    """The loop of a :class:`_CountProcess` child: read the batches from stdin as they
    come, count the most urgent first and answer on stdout (wire format there); when
    stdin ends, end (batches still queued are not answered: see
    :meth:`_CountProcess.close`). First, while no batch has come, count the texts of the transcript
    ``warm`` (:func:`_warm_texts`) with ``encoding`` (empty: :func:`_sniffed_encoding`),
    so that the batches find their texts and line blocks counted."""
    import select
    import signal
    from array import array

    # Ctrl-C reaches the whole process group: the parent decides, and ends this child by
    # killing it or closing its input; a parent killed outright closes its input and its
    # answers' pipe, so the child ends with the batch it counts (at most BATCH_CHARS)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    ensure_offline_encodings()
    counters: dict[str, TokenCounter] = {}  # by encoding: each text, each line block once

    def counter(name: str) -> Callable[[str], int]:
        if name not in counters:
            counters[name] = TokenCounter(name)
        return counters[name].count

    fd = sys.stdin.fileno()
    pending = bytearray()
    heap: list[tuple[int, int, int, int, bytes]] = []  # (priority, id, n, name, the rest)

    def take(block: bool) -> bool:
        """Queue the batches that came (waiting for one if ``block``); False at the end."""
        while select.select([fd], [], [], None if block and not heap else 0)[0]:
            chunk = os.read(fd, PIPE_BYTES)
            if not chunk:
                return False
            pending.extend(chunk)
            while len(pending) >= 20:
                key, priority, n, size, name = array("I", pending[:20])
                end = 20 + 4 * n + name + size
                if len(pending) < end:
                    break
                heapq.heappush(heap, (priority, key, n, name, bytes(pending[20:end])))
                del pending[:end]
        return True

    if warm:
        with contextlib.suppress(OSError, ValueError):
            measure = counter(encoding or _sniffed_encoding(warm))
            chars = 0
            for text in _warm_texts(warm):
                if len(text) <= CHUNK_CHARS:
                    measure(text)
                    chars += len(text)
                if chars >= WARM_POLL_CHARS:  # a batch waiting: the warm-up ends
                    chars = 0
                    if select.select([fd], [], [], 0)[0]:
                        break
    out = sys.stdout.buffer
    while take(block=True):
        if not heap:
            continue
        _, key, n, name, frame = heapq.heappop(heap)
        sizes = array("I", frame[: 4 * n])
        measure = counter(frame[4 * n : 4 * n + name].decode())
        data = memoryview(frame)[4 * n + name :]
        counts = array("I", [key, n])
        start = 0
        for length in sizes:
            counts.append(measure(str(data[start : start + length], "utf-8", "surrogatepass")))
            start += length
        out.write(counts.tobytes())
        out.flush()


WARM_POLL_CHARS = 1 << 16
"""Characters (64 Ki) a warming child counts between two looks for a batch (a few ms)."""


def _warm_texts(path: str) -> Iterable[str]:
    """The strings of a JSON-lines transcript, line by line, those of 16 characters or
    more holding a space or a newline: the texts its messages are made of (a tool result,
    an answer, a file read), mostly as the session's payloads hold them, and not the ids,
    timestamps and paths of each record (on the 32 MB bench session 104,226 such strings
    of 3.1M characters, each a tiktoken call, against 12,980 texts of 22.7M). What they
    count only fills caches: a payload made otherwise is counted when it comes."""
    with open(path, "rb") as fh:
        for line in fh:
            try:
                data = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            for s in string_leaves(data):
                if len(s) >= 16 and (" " in s or "\n" in s):
                    yield s


def _sniffed_encoding(path: str) -> str:
    """The encoding of the first model (``"model": "..."``) named in the first 256 KiB of
    ``path`` (:func:`encoding_for_model`; none named: its default). A guess for the
    warm-up only: the batches name their own encoding."""
    with open(path, "rb") as fh:
        found = _MODEL_FIELD.search(fh.read(1 << 18))
    return encoding_for_model(found.group(1).decode("utf-8", "replace") if found else None)


class _Warm(threading.local):
    process: _CountProcess | None = None


_WARM = _Warm()
"""The counting child :func:`warm_counting` started on this thread, till a counter adopts it."""


COUNT_PROCESS_MIN_BYTES = 8 << 20
"""File size (8 MiB) from which ``compact --layers`` counts in a child process
(:func:`warm_counting`, :meth:`TokenCounter.prefetch` with ``child``): below, starting it
(0.2-0.4 s) costs about what it saves."""


@contextlib.contextmanager
def warm_counting(path: str, encoding: str | None) -> Iterator[None]:
    """Start a counting child (:class:`_CountProcess`) for the transcript ``path`` now;
    it reads the file's texts and counts them while the caller parses it, and a
    :meth:`TokenCounter.prefetch` with ``child`` inside the block (on this thread) takes
    it over; it is closed at the end of the block if none did.

    Only for a regular file of :data:`COUNT_PROCESS_MIN_BYTES` or more, exact counts
    (``encoding`` is not ``"estimate"``), two cores (:func:`count_threads`) and POSIX. The
    child reads the file a second time (from the page cache, in its own process): this
    process still reads and parses it once.

    Args:
        path: the transcript, or ``-`` (nothing is started).
        encoding: the ``--encoding`` override, or ``None`` (the child guesses it from the
            file: :func:`_sniffed_encoding`).
    """
    process = None
    if encoding != "estimate" and path != "-" and count_threads() >= 2 and os.name == "posix":
        with contextlib.suppress(OSError):
            st = os.stat(path)  # a regular file only: never a pipe the child would drain
            if stat.S_ISREG(st.st_mode) and st.st_size >= COUNT_PROCESS_MIN_BYTES:
                process = _CountProcess(warm=path, encoding=encoding)
    _WARM.process = process
    try:
        yield
    finally:
        if _WARM.process is not None:  # not taken over
            _WARM.process.close()
        _WARM.process = None


_MODEL_FIELD = re.compile(rb'"model"\s*:\s*"([^"\\]{1,200})"')


THREADED_MIN_CHARS = 1 << 16
"""Characters (64 Ki) to encode from which :meth:`TokenCounter.count_many` uses threads:
below it, starting them costs more than they save."""

BATCH_CHARS = 1 << 18
"""Characters (256 Ki, about) encoded by one task of :meth:`TokenCounter.count_many`'s
threads: few enough tasks that their overhead is small, enough that the threads stay busy
to the end."""


_POOL_WORKERS = 1
"""Processes sharing the cores (:func:`share_cores`): 1 outside a ``--jobs`` pool."""


def share_cores(workers: int) -> None:
    """Note that this process is one of ``workers`` pool processes sharing the cores (the
    ``--jobs`` pool's initializer), so that :func:`count_threads` leaves them theirs."""
    global _POOL_WORKERS
    _POOL_WORKERS = max(1, workers)


def count_threads() -> int:
    """Threads :meth:`TokenCounter.count_many` encodes on: 2 when this process has two cores
    of its own (the cores it may run on, divided among the :func:`share_cores` pool), else 1.

    More threads than cores only trade places: after each text a thread must take the GIL
    back to build its token list, and waits behind the other when no core is idle (measured
    on 2 cores: exact ``inspect`` 1.02-1.89x tiktoken alone on two threads in a loaded
    machine, 0.96-1.48x on one)."""
    return max(1, min(2, _cores() // _POOL_WORKERS))


@functools.lru_cache(maxsize=1)
def _cores() -> int:
    """The cores this process may run on (its affinity)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else (os.cpu_count() or 1)


def _threaded(texts: list[str]) -> bool:
    """Whether ``texts`` are worth counting on threads (:data:`THREADED_MIN_CHARS`)."""
    return count_threads() >= 2 and len(texts) >= 2 and sum(map(len, texts)) >= THREADED_MIN_CHARS


def _batches(texts: list[str]) -> list[list[str]]:
    """``texts`` in order, cut into batches of about :data:`BATCH_CHARS` characters."""
    batches: list[list[str]] = [[]]
    size = 0
    for t in texts:
        if size >= BATCH_CHARS:
            batches.append([])
            size = 0
        batches[-1].append(t)
        size += len(t)
    return batches if texts else []


def cut_points(text: str, size: int = CHUNK_CHARS) -> list[int]:
    """Offsets where ``text`` is cut into pieces of at most ``size`` characters (about),
    each at a place where the pre-tokenizer of cl100k_base and o200k_base always ends a
    piece, so the tokens of the pieces are the tokens of the whole text.

    The regex of both encodings (tiktoken's ``tiktoken_ext/openai_public.py``) puts a space
    inside a piece only at its start or in a run of whitespace; a letter only in a run of
    letters (and marks), with at most one non-letter, non-digit, non-newline before it; a
    digit only in a run of up to 3 digits; it looks ahead (``\\s+(?!\\S)``), never
    behind. So a piece always ends, and the matching after it depends only on the text
    after it, just before (:func:`is_cut`)

    1. a space U+0020 after a character that is not whitespace;
    2. an ASCII letter or digit after a ``\\n``;
    3. an ASCII digit after a character that is neither a digit (``isnumeric``) nor
       whitespace (a run of whitespace before it ends differently where the text ends);
    4. an ASCII letter after an ASCII digit;
    5. a punctuation or symbol character (not ``'``, which o200k_base's letter pieces take
       in ``'s``, ``'ll``, ...) after a letter or digit (``isalnum``).

    The last cut found in the second half of a window of ``size`` is taken (spaces first,
    then newlines, then the others in its last 64 Ki characters); a window with none (one
    run of letters, such as CJK without punctuation, 0.5 Mi characters or more) is cut at
    ``size``, which can change the count by a token or two at that cut. Tested against
    whole-text counts in tests/system/test_huge_text.py.

    >>> text = "abc def\\nghi jkl"
    >>> cut_points(text, 6), cut_points(text, 100)
    ([3, 8, 11], [])
    """
    cuts: list[int] = []
    start, n = 0, len(text)
    while n - start > size:
        cut = _last_cut(text, start + size // 2, start + size)
        cuts.append(cut)
        start = cut
    return cuts


def is_cut(text: str, k: int) -> bool:
    """Whether offset ``k`` of ``text`` is a cut of :func:`cut_points` (rules 1-5 there).

    >>> [k for k in range(1, 8) if is_cut("ab,12 cd", k)]
    [2, 3, 5]
    """
    c, prev = text[k], text[k - 1]
    if c == " ":
        return not prev.isspace()
    if prev == "\n":
        return c.isascii() and c.isalnum()
    if c in _DIGITS:
        return not (prev.isnumeric() or prev.isspace())
    if c.isascii() and c.isalpha():
        return prev in _DIGITS
    if c == "'" or c.isalnum() or c.isspace():
        return False
    return unicodedata.category(c)[0] in "PS" and prev.isalnum()


_DIGITS = frozenset("0123456789")
_CANDIDATE = re.compile("[0-9A-Za-z]|[^\\w\\s']")
"""Characters where a cut of rules 3-5 may begin (checked by :func:`is_cut`)."""


def _last_cut(text: str, lo: int, hi: int) -> int:
    """The last cut of :func:`cut_points` in ``[lo, hi]``, else ``hi``."""
    k = text.rfind(" ", lo, hi + 1)
    while k >= lo:
        if not text[k - 1].isspace():
            return k
        k = text.rfind(" ", lo, k)
    k = text.rfind("\n", lo, hi)
    while k >= lo:
        if is_cut(text, k + 1):
            return k + 1
        k = text.rfind("\n", lo, k)
    floor = max(lo, hi - (1 << 16))
    end = hi + 1
    while end > floor:
        begin = max(floor, end - 4096)
        for m in reversed(list(_CANDIDATE.finditer(text, begin, end))):
            if m.start() >= max(lo, 1) and is_cut(text, m.start()):
                return m.start()
        end = begin
    return hi


class LineCounts:
    """Tokens of texts by one tiktoken encoding, with the counts of their line blocks kept,
    so that text shared with one counted before is not encoded again.

    A text of an encoding of :data:`LINE_CUT_ENCODINGS` is cut before each ASCII letter or
    digit that follows a newline (rule 2 of :func:`cut_points`: the pre-tokenizer always
    ends a piece there, so the blocks' counts sum to the text's count); each block's count
    is kept by the block's text (up to :data:`LINE_CACHE_MAX_CHARS` characters of blocks).
    On the 32 MB Claude Code bench session, ``compact --layers all`` encoded 16.8M
    characters whole and has 9.5M characters of distinct blocks: a file read twice, or a
    tool result the rules rewrote in a few lines, costs only its new blocks. Other
    encodings, and texts longer than :data:`CHUNK_CHARS`, are counted whole
    (:func:`_encoded_len`). Thread-safe: two threads may count a new block both, with the
    same result.

    Args:
        enc: the tiktoken ``Encoding``.
        name: its name (decides whether texts are cut; kept as :attr:`name`).

    >>> from compactctl.tokens import load_encoding, ensure_offline_encodings
    >>> _ = ensure_offline_encodings()
    >>> lines = LineCounts(load_encoding("cl100k_base"), "cl100k_base")
    >>> text = "def f():\\n    return 1\\nprint(f())\\n"
    >>> lines(text) == len(lines.enc.encode_ordinary(text)), sorted(lines.blocks)
    (True, ['def f():\\n    return 1\\n', 'print(f())\\n'])
    """

    def __init__(self, enc: Any, name: str) -> None:
        self.enc = enc
        self.name = name
        self._split = _LINE_CUT.split if name in LINE_CUT_ENCODINGS else None
        self.blocks: dict[str, int] = {}
        self._chars = 0

    def __call__(self, text: str) -> int:
        """Tokens in ``text`` (``encode_ordinary``)."""
        split = self._split
        if split is None or len(text) > CHUNK_CHARS:
            return _encoded_len(self.enc, text)
        pieces = split(text)
        if len(pieces) == 1:
            return _encoded_len(self.enc, text)
        blocks, total = self.blocks, 0
        for piece in pieces:
            n = blocks.get(piece)
            if n is None:
                n = _encoded_len(self.enc, piece)
                if self._chars < LINE_CACHE_MAX_CHARS:
                    blocks[piece] = n
                    self._chars += len(piece)
            total += n
        return total


_LINE_CUT = re.compile(r"(?<=\n)(?=[0-9A-Za-z])")
"""Where :class:`LineCounts` cuts a text: rule 2 of :func:`cut_points`."""


def _encoded_len(enc: Any, text: str) -> int:
    """Tokens of ``text`` by ``enc.encode_ordinary``, leaving no UTF-8 copy of it behind.

    A text longer than :data:`CHUNK_CHARS` is counted piece by piece
    (:func:`cut_points`; the same count, memory bounded by a piece), its first
    :data:`EXACT_MAX_CHARS` exactly and the rest extrapolated (see there).

    tiktoken reads a ``str`` through CPython's UTF-8 cache of the string, which then lives
    as long as the string does (here the session's own texts: measured +20.5 MB of RSS
    after counting 10.7M chars of mixed CJK and Latin text, 19.8 MB as UTF-8). So
    non-ASCII text goes in as UTF-8 ``bytes`` (tiktoken's ``_encode_bytes``, which is
    ``encode_ordinary`` for valid UTF-8), freed right after; an ASCII string's data is
    its own UTF-8 and is passed as is. Lone surrogates (legal in JSON escapes, not
    encodable) count as ``?``.
    """
    if len(text) > CHUNK_CHARS:
        return _long_len(enc, text)
    if text.isascii():
        return len(enc.encode_ordinary(text))
    data = text.encode("utf-8", "replace")
    encode_bytes = getattr(enc, "_encode_bytes", None)
    if encode_bytes is None:  # pragma: no cover - a tiktoken without it
        return len(enc.encode_ordinary(data.decode("utf-8")))
    return len(encode_bytes(data))


def _long_len(enc: Any, text: str) -> int:
    """:func:`_encoded_len` of a text longer than :data:`CHUNK_CHARS`, piece by piece."""
    exact = text
    if len(text) > EXACT_MAX_CHARS:
        cut = _last_cut(text, EXACT_MAX_CHARS // 2, EXACT_MAX_CHARS)
        exact = text[:cut]
    total, start = 0, 0
    for cut in [*cut_points(exact), len(exact)]:
        total += _encoded_len(enc, exact[start:cut])
        start = cut
    if len(exact) == len(text):
        return total
    import warnings

    from compactctl.errors import CompactWarning

    warnings.warn(CompactWarning(EXTRAPOLATED_NOTE), stacklevel=4)
    rest = text[len(exact) :]
    ratio = total / max(1, estimate_tokens(exact))
    return total + round(estimate_tokens(rest) * ratio)


def message_payload(data: Mapping[str, Any]) -> str:
    """The text of a message that counts toward the prompt: content text plus tool calls.

    Text parts of ``content`` and, for assistant messages, each tool call's name and JSON
    arguments. Images, documents and opaque parts (thinking signatures, encrypted reasoning)
    are not text and are not in it: :func:`message_tokens` adds images and documents by the
    providers' rules (:mod:`compactctl.media`).
    """
    content = data.get("content")
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        text = "\n".join(
            p["text"]
            for p in content
            if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
        )
    else:
        text = ""
    calls = data.get("toolCalls")
    if isinstance(calls, list) and calls:
        parts = [text]
        for c in calls:
            if isinstance(c, dict):
                args = c.get("arguments")
                parts.append(str(c.get("name", "")))
                parts.append(args if isinstance(args, str) else _dumps(args))
        text = "\n".join(parts)
    return text


def prompt_total(payload_tokens: int, messages: int) -> int:
    """The prompt size of ``messages`` messages whose payloads sum to ``payload_tokens``.

    Args:
        payload_tokens: tokens of the messages' :func:`message_payload` texts, summed.
        messages: how many messages (a count).

    Returns:
        Tokens: ``payload_tokens + MESSAGE_OVERHEAD * messages + REPLY_PRIMING``, and 0 for
        no message (OpenAI cookbook, "How to count tokens with tiktoken").

    >>> prompt_total(0, 0), prompt_total(10, 2)
    (0, 19)
    """
    if not messages:
        return 0
    return payload_tokens + MESSAGE_OVERHEAD * messages + REPLY_PRIMING


def prompt_sum(counts: Sequence[int]) -> int:
    """The prompt size of messages given the token count of each one's payload.

    Args:
        counts: tokens of each message's :func:`message_payload`, one per message.

    Returns:
        Tokens, as :func:`prompt_total` of their sum and their number.

    >>> prompt_sum([4, 6])
    19
    """
    return prompt_total(sum(counts), len(counts))


def prompt_tokens(messages: Iterable[Message], counter: TokenCounter) -> int:
    """The prompt size of a message list, in tokens (the OpenAI cookbook's counting scheme).

    Args:
        messages: the messages sent, in order (``Message`` objects; only ``.data`` is read).
        counter: counts each payload (exact tiktoken counts, or the chars-based estimate).

    Returns:
        The sum over messages of :func:`message_tokens` (the payload's tokens plus images
        and documents) plus :data:`MESSAGE_OVERHEAD`, plus :data:`REPLY_PRIMING` once; 0 for
        an empty list.

    Raises:
        ValueError: ``counter``'s encoding is unavailable.
    """
    return prompt_sum(messages_tokens([m.data for m in messages], counter))


class PromptSizes:
    """The prompt size of views that share most of their messages, each message sized once.

    Layers size the context before and after their events (``compact`` before, between and
    after its steps; ``compact --layers`` before and after each layer); the views differ
    only in the messages a step changed (replay returns the unchanged messages themselves,
    :func:`compactctl.replay.replay`), so the payload of every other message is built,
    measured and counted once. The counter also caches by text, but hashing every payload
    again costs a pass over the whole session. One instance is shared by a session and the
    sessions extended from it (:meth:`compactctl.session.Session.extended`).

    Memory: a reference to each message sized and two ints (the message is held, so its
    ``id`` is never reused while it is a key).

    Args:
        counter: counts each new message (:func:`messages_tokens`).
    """

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self._known: dict[int, tuple[Message, int, int]] = {}  # id -> (message, chars, tokens)

    def totals(self, view: Sequence[Message]) -> tuple[int, int]:
        """``(tokens, chars)`` of ``view``: tokens as :func:`prompt_tokens` counts them,
        chars of the messages' :func:`message_payload` texts.

        Raises:
            ValueError: the counter's encoding is unavailable.
        """
        known = self._known
        fresh = [m for m in view if id(m) not in known]
        if fresh:
            counter = self.counter
            payloads = [message_payload(m.data) for m in fresh]
            counts = counter.count_many(payloads)  # messages_tokens, each payload built once
            for m, text, n in zip(fresh, payloads, counts, strict=True):
                known[id(m)] = (m, len(text), n + _media(m.data, counter))
        sizes = [known[id(m)] for m in view]
        return prompt_sum([n for _, _, n in sizes]), sum(c for _, c, _ in sizes)

    def count_ahead(self, view: Sequence[Message]) -> None:
        """Queue the payloads of the messages of ``view`` not sized yet for counting
        (:meth:`TokenCounter.count_ahead`), without waiting: a later :meth:`totals` of
        ``view`` then finds them counted, or counting."""
        known = self._known
        self.counter.count_ahead([message_payload(m.data) for m in view if id(m) not in known])

    @property
    def sized(self) -> int:
        """How many distinct messages were sized so far (each exactly once)."""
        return len(self._known)


def _dumps(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return str(value)


@functools.lru_cache(maxsize=1)
def _model_table() -> dict[str, Any]:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return {}
    path = (
        Path(next(iter(spec.submodule_search_locations)))
        / "model_prices_and_context_window_backup.json"
    )
    try:
        table = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    return table if isinstance(table, dict) else {}


def context_window_for(model: str | None) -> int | None:
    """The model's max input tokens from litellm's bundled model table (no litellm import).

    Looks up the model as given, then without its provider prefix. Returns ``None`` when the
    model is unknown.

    >>> context_window_for("gpt-4o")
    128000
    """
    if not model:
        return None
    table = _model_table()
    for key in (model, model.rsplit("/", 1)[-1]):
        entry = table.get(key)
        if isinstance(entry, dict):
            n = entry.get("max_input_tokens") or entry.get("max_tokens")
            if isinstance(n, int) and n > 0:
                return n
    return None


def message_tokens(data: Mapping[str, Any], counter: TokenCounter) -> int:
    """A message's tokens in the prompt: its text (:func:`message_payload`, counted by
    ``counter``) plus its images and documents (:func:`compactctl.media.media_tokens`, by
    ``counter.media_rule``), without the per-message overhead.

    >>> message_tokens({"role": "user", "content": [{"type": "text", "text": "abcdefgh"},
    ...     {"type": "image", "url": "https://example.com/a.png"}]}, TokenCounter("estimate"))
    1601
    """
    return counter.count(message_payload(data)) + _media(data, counter)


def messages_tokens(datas: Iterable[Mapping[str, Any]], counter: TokenCounter) -> list[int]:
    """:func:`message_tokens` of many messages (their texts counted in one
    :meth:`TokenCounter.count_many`)."""
    datas = list(datas)
    counts = counter.count_many([message_payload(d) for d in datas])
    return [n + _media(d, counter) for d, n in zip(datas, counts, strict=True)]


def _media(data: Mapping[str, Any], counter: TokenCounter) -> int:
    content = data.get("content")
    if not isinstance(content, list):
        return 0
    return media_tokens(content, counter.media_rule or "anthropic", counter.count)
