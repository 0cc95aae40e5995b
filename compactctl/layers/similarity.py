"""Near-duplicate detection, the core of Layer 2 (dedup). Pure: no I/O, no global state.

Texts are compared as *sets of shingles*: the word 3-grams of their normalized text, each
hashed to a 64-bit integer. Two texts are near-duplicates when the Jaccard similarity of their
shingle sets is at least a threshold (0.6 by default). Word 3-grams and 0.6 come from
MoonHub's compactor ("Shingle 哈希（词级别 3-gram）和 Jaccard 相似度", default threshold 0.6, the
older message of a duplicate pair is dropped and the newer one kept).

:func:`find_duplicates` finds, for a chronological list of texts, which older texts are
duplicates of which newer ones:

1. exact repeats, by their normalized text;
2. near-duplicates among the remaining distinct texts, either by comparing all pairs (few
   texts) or with MinHash (Broder 1997, "On the resemblance and containment of documents")
   and LSH banding (Leskovec, Rajaraman, Ullman, "Mining of Massive Datasets", ch. 3) as
   datasketch's ``MinHashLSH`` bands and indexes them (the index is kept here, keyed by the
   band values texts share: :class:`_BandIndex`). LSH only proposes candidates: every
   reported pair is checked with the exact Jaccard similarity, so every pair it reports is a
   true near-duplicate.

numpy and datasketch are imported inside the functions that need them, so importing this
module costs nothing measurable (CLI startup must stay fast); numpy only from
``lsh_min_items`` texts (or 128 Ki characters) up; datasketch only for an LSH banding that
is not in :data:`_KNOWN_LSH_PARAMS`, and without SciPy (see :func:`_datasketch`).
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal

from compactctl.layers.options import DedupOptions
from compactctl.text import CJK_UNSPACED as _CJK
from compactctl.text import SHINGLE_ANSI_RE as _ANSI_RE

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    U64 = NDArray[np.uint64]
    U32 = NDArray[np.uint32]
    I64 = NDArray[np.int64]

__all__ = [
    "ALGORITHM_VERSION",
    "LSH_WEIGHTS",
    "MINHASH_SEED",
    "SHINGLE_K",
    "DuplicatePair",
    "find_duplicates",
    "jaccard",
    "normalize",
    "shingles",
]

#: Version of the shingle definition (normalization, tokens, hash). Record it with any stored
#: decision; change it whenever a shingle of the same text could change.
ALGORITHM_VERSION = "shingle-v1"
#: Words per shingle (MoonHub's compactor: word 3-grams).
SHINGLE_K = 3
#: Seed of the MinHash permutations (datasketch ``MinHash(seed=...)``); fixed, so results are
#: the same on every run and machine.
MINHASH_SEED = 1
#: ``weights`` given to datasketch ``MinHashLSH``: (false positive, false negative). A false
#: positive costs one exact Jaccard check, a false negative loses a duplicate, so false
#: negatives weigh 9x more. With 128 permutations and ``lsh_threshold`` 0.5 this picks 32 bands
#: of 4 rows: a pair is proposed with probability 1 - (1 - J^4)^32, that is 0.988 at J = 0.60,
#: 0.998 at J = 0.65 and 0.23 at J = 0.30. (The default weights would pick 25 bands of 5 rows:
#: only 0.868 at J = 0.60.)
LSH_WEIGHTS = (0.1, 0.9)

_MASK64 = (1 << 64) - 1
# Odd 64-bit multiplier of the shingle polynomial (2^64 / golden ratio).
_POLY = 0x9E3779B97F4A7C15
# MurmurHash3 fmix64 constants.
_FMIX64_C1 = 0xFF51AFD7ED558CCD
_FMIX64_C2 = 0xC4CEB9FE1A85EC53
# datasketch "affine32" scheme: input hashes are pre-mixed with MurmurHash3 fmix32.
_FMIX32_C1 = 0x85EBCA6B
_FMIX32_C2 = 0xC2B2AE35
# Shingles per MinHash block: 2048 x 128 permutations x 4 bytes = 1 MiB scratch per thread.
# (8192 took 4 MiB, which stayed in the heap as RSS, for no speed gain: measured on the
# 11 MB bench session, 0.55 s either way.)
_BLOCK_ROWS = 1 << 11
# Shingles from which MinHash blocks run on two threads. Below, one thread is as fast (numpy
# calls are short) and the process keeps no second malloc arena (about 8 MB of RSS).
_THREADED_ROWS = 1 << 20
# Characters of text tokenized at once: bounds scratch memory (about 15 bytes per char,
# measured with tracemalloc: 14.9 MB for 1 Mi chars, 2 MB for 128 Ki; same speed).
_CHUNK_CHARS = 1 << 17
# FNV-1a 64-bit parameters.
_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
# Below this many words still running, FNV-1a finishes them in Python (numpy steps cost ~5 us).
_FEW_WORDS = 32
# Below this many characters of distinct text (and lsh_min_items texts), step 2 runs in pure
# Python, about 1 us per character: less than importing numpy (0.1-0.3 s, 20 MB of RSS).
_PURE_PYTHON_CHARS = 1 << 17

# Scripts written without spaces between words (compactctl.text.CJK_UNSPACED, frozen with
# ALGORITHM_VERSION): each character is one token.
_CJK_RE = re.compile(f"[{_CJK}]")
_SPACE_RE = re.compile(r"\s")

Kind = Literal["exact", "near"]


@dataclass(frozen=True, slots=True)
class DuplicatePair:
    """``older`` is a duplicate of ``newer``; the newer copy is kept.

    Attributes:
        older: key of the older item (the one a dedup layer may drop or replace by a pointer).
        newer: key of the newer item; it always survives (it is never itself an ``older``).
        similarity: exact Jaccard similarity of the two shingle sets, in [threshold, 1.0];
            1.0 for exact repeats.
        kind: ``"exact"`` when the normalized texts are equal, else ``"near"``.
    """

    older: str
    newer: str
    similarity: float
    kind: Kind


def normalize(text: str) -> str:
    """Return ``text`` as compared: ANSI escapes removed, lowercased, whitespace collapsed.

    ANSI escape sequences (terminal colors, cursor moves, titles) are removed first, then the
    text is lowercased (``str.lower``), then every run of Unicode whitespace (``str.split``:
    spaces, tabs, newlines, carriage returns, ideographic space U+3000, ...) becomes one space,
    and leading and trailing whitespace is removed. Idempotent. Never raises.

    >>> normalize("\\x1b[31mERROR\\x1b[0m:   File\\n\\tnot  found ")
    'error: file not found'
    """
    if "\x1b" in text or "\x9b" in text:
        text = _ANSI_RE.sub("", text)
    text = text.lower()
    if len(text) <= _CHUNK_CHARS:
        return " ".join(text.split())
    # The same, about _CHUNK_CHARS chars at a time, cut at whitespace (``\s`` is exactly
    # ``str.isspace``, the whitespace of ``str.split``): a list of all the words would take
    # about 60 bytes per word (40 MB for a 5 MB text).
    parts: list[str] = []
    at, n = 0, len(text)
    while at < n:
        space = _SPACE_RE.search(text, min(at + _CHUNK_CHARS, n))
        cut = space.start() if space is not None else n
        part = " ".join(text[at:cut].split())
        if part:
            parts.append(part)
        at = cut + 1
    return " ".join(parts)


def _spaced(normalized: str) -> str:
    """A normalized text with every CJK character set apart by spaces, so that splitting on
    spaces gives the words: whitespace-separated runs, and each CJK character on its own.
    """
    if normalized.isascii() or _CJK_RE.search(normalized) is None:
        return normalized
    return " ".join(_CJK_RE.sub(r" \g<0> ", normalized).split())


def _fmix64(h: int) -> int:
    """MurmurHash3 64-bit finalizer, a bijection on [0, 2^64)."""
    h ^= h >> 33
    h = (h * _FMIX64_C1) & _MASK64
    h ^= h >> 33
    h = (h * _FMIX64_C2) & _MASK64
    return h ^ (h >> 33)


def _gram_hash(token_hashes: Sequence[int]) -> int:
    """64-bit hash of one shingle from the hashes of its m words (m = k, or fewer for a short
    text): fmix64(m * P^m + t_0 * P^(m-1) + ... + t_(m-1)) mod 2^64, with P = ``_POLY``.
    Order-sensitive; the length term separates a short text from any k-gram.
    """
    h = len(token_hashes)
    for t in token_hashes:
        h = (h * _POLY + t) & _MASK64
    return _fmix64(h)


def shingles(text: str, k: int = SHINGLE_K) -> frozenset[int]:
    """Return the set of word k-gram shingles of ``text``, each hashed to a 64-bit integer.

    The text is first normalized (:func:`normalize`), then split into words on whitespace.
    CJK text has no spaces between words, so each character of a CJK run (Han ideographs,
    Hiragana, Katakana, CJK punctuation, full-width forms) counts as one word: there the
    shingles are character k-grams. Hangul is split on spaces like Latin text.

    A text of n >= k words has the distinct shingles among its n - k + 1 k-grams. A text with
    1 <= n < k words has exactly one shingle, the whole text; an empty (or whitespace-only)
    text has none.

    Hashes are stable across processes, machines and Python versions, so they may be stored
    (never the salted ``hash()``): a word hashes to fmix64(FNV-1a 64 of its UTF-8 bytes), a
    shingle of m words w_0..w_(m-1) to fmix64(m * P^m + sum_j hash(w_j) * P^(m-1-j) mod 2^64)
    with P = 0x9E3779B97F4A7C15; fmix64 is the MurmurHash3 finalizer. They are computed with
    numpy over whole texts, not word by word. They are not cryptographic: crafted texts can
    collide. The definition is versioned by :data:`ALGORITHM_VERSION`.

    Args:
        text: any string; lone surrogates are allowed.
        k: words per shingle, >= 1 (default 3, MoonHub's compactor).

    Returns:
        A frozenset of ints in [0, 2^64).

    Raises:
        ValueError: if ``k < 1``.

    >>> len(shingles("the quick brown fox jumps"))
    3
    >>> shingles("Hello  WORLD") == shingles("hello world")
    True
    >>> len(shingles("压缩上下文"))
    3
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    grams, _ = _shingle_arrays([normalize(text)], k)
    return frozenset(grams.tolist())


def jaccard(a: AbstractSet[int], b: AbstractSet[int]) -> float:
    """Return the Jaccard similarity |a & b| / |a | b| of two sets, in [0.0, 1.0].

    Two empty sets are identical: 1.0. One empty set and one non-empty: 0.0.

    >>> jaccard({1, 2, 3}, {2, 3, 4})
    0.5
    """
    if not a and not b:
        return 1.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


# (bands, rows) datasketch picks with LSH_WEIGHTS, by (lsh_threshold, num_perm): the defaults,
# so that a run with them never calls SciPy (a test checks each entry against datasketch).
_KNOWN_LSH_PARAMS = {(0.5, 128): (32, 4)}


@lru_cache(maxsize=32)
def _lsh_params(lsh_threshold: float, num_perm: int) -> tuple[int, int]:
    """(bands, rows) that datasketch picks for this threshold with :data:`LSH_WEIGHTS`.

    Cached: datasketch finds them by numerical integration with SciPy (tens of ms per call,
    plus about 0.4 s to import ``scipy.integrate``); the defaults come from a table.
    """
    known = _KNOWN_LSH_PARAMS.get((lsh_threshold, num_perm))
    if known is not None:
        return known
    MinHashLSH = _datasketch().MinHashLSH  # noqa: N806

    try:
        lsh = MinHashLSH(threshold=lsh_threshold, num_perm=num_perm, weights=LSH_WEIGHTS)
    except ValueError as err:
        raise ValueError(
            f"no LSH banding for lsh_threshold={lsh_threshold}, num_perm={num_perm}: {err}"
        ) from err
    return int(lsh.b), int(lsh.r)


def find_duplicates(
    items: Sequence[tuple[str, str]],
    *,
    threshold: float = DedupOptions.threshold,
    lsh_threshold: float = 0.5,
    lsh_min_items: int = DedupOptions.lsh_min_items,
    num_perm: int = 128,
    min_chars: int = 0,
) -> list[DuplicatePair]:
    """Find the older items that duplicate a newer one; the newer copy is kept.

    Items are ``(key, text)`` in chronological order, oldest first; keys must be unique.
    Items whose normalized text (:func:`normalize`) is shorter than ``min_chars`` characters,
    or empty, are ignored: never reported, never a target.

    Algorithm:

    1. Exact repeats: items with equal normalized text form a group; its newest item is the
       group's representative.
    2. Near-duplicates among representatives, newest first: a representative is dropped when
       some *surviving* newer representative has exact Jaccard similarity >= ``threshold``
       (on :func:`shingles`, word 3-grams); it then points to the most similar of them
       (ties: the newest). Otherwise it survives. The newest item always survives.
    3. Each older exact copy points to its group's representative (kind ``"exact"``,
       similarity 1.0) if that survives, else to the survivor the representative points to
       (kind ``"near"``, same similarity, since the texts are equal).

    Chains are resolved by construction: a target is always a survivor, never an item that is
    itself dropped, and every reported similarity is the exact Jaccard of the two items
    reported, >= ``threshold``. Where A ~ B and B ~ C but J(A, C) < threshold, B points to C
    and A is kept (pointing A to C would claim a similarity the texts do not have).

    Candidate pairs for step 2: below ``lsh_min_items`` representatives, every survivor is
    compared (skipping pairs whose set sizes alone bound Jaccard below the threshold:
    J <= min(|A|, |B|) / max(|A|, |B|)); in pure Python below 128 Ki characters of distinct
    text (numpy is then not even imported), else with numpy. From ``lsh_min_items`` up,
    MinHashes of ``num_perm`` permutations are built (datasketch ``affine32`` scheme, seed
    :data:`MINHASH_SEED`, computed in numpy) and the surviving representatives are indexed
    as in a datasketch ``MinHashLSH`` banded for ``lsh_threshold`` (see :data:`LSH_WEIGHTS`
    and :class:`_BandIndex`);
    every candidate it returns is verified with the exact Jaccard. Texts whose bands equal
    no other text's band (found with numpy; usually most texts) can neither be returned by
    nor get anything from a query, so they skip the index: same result, less time. LSH may
    miss a pair (about 1.2% of pairs at J = 0.60, 0.2% at 0.65), never reports a false one.
    Every path gives the same pairs and the same similarities.

    Cost: memory O(total chars) for the normalized distinct texts, held until they are
    shingled; then 8 bytes per word for shingle hashes (numpy paths), held until the
    MinHashes of ``4 * num_perm`` bytes per representative are built; then the sorted
    distinct shingles of the texts that share an LSH band, plus the LSH index. Scratch
    memory stays under about 5 MB, plus about 15 bytes per char of the longest text (a
    text is never split). Time is about linear in total words: 100,000 texts of
    200-2,000 chars (120 MB) take about 8 s of CPU, 20,000 about 1.5 s. The worst case is
    quadratic: thousands of texts all about half-similar (J ~0.3-0.6) to each other but not
    duplicates, so that every query returns most survivors.

    Args:
        items: ``(key, text)`` pairs, oldest first.
        threshold: minimum exact Jaccard similarity of a near-duplicate, in (0, 1].
        lsh_threshold: the similarity the LSH index is banded for, in (0, threshold]; lower
            than ``threshold`` so that pairs just above the threshold are not missed.
        lsh_min_items: number of distinct (representative) texts from which LSH is used.
        num_perm: MinHash permutations, >= 2.
        min_chars: minimum length in characters of the normalized text, >= 0.

    Returns:
        One :class:`DuplicatePair` per dropped item, ordered by the older item's position.
        Each older key appears once; no newer key is ever an older key.

    Raises:
        ValueError: on a repeated key, or a parameter out of range.

    >>> items = [("a", "same output"), ("b", "Same   output"), ("c", "other")]
    >>> find_duplicates(items)
    [DuplicatePair(older='a', newer='b', similarity=1.0, kind='exact')]
    """
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    if not 0.0 < lsh_threshold <= threshold:
        raise ValueError(f"lsh_threshold must be in (0, threshold], got {lsh_threshold}")
    if num_perm < 2:
        raise ValueError(f"num_perm must be >= 2, got {num_perm}")
    if min_chars < 0:
        raise ValueError(f"min_chars must be >= 0, got {min_chars}")

    # 1. Exact groups, numbered in order of first appearance; newest[g] = position of the
    # newest item of group g. Only the groups' texts are kept (one per distinct text).
    keys: list[str] = []
    seen: set[str] = set()
    considered: list[tuple[int, int]] = []  # (position, group)
    group_of: dict[str, int] = {}
    newest: list[int] = []
    # a text repeated verbatim is normalized once (the 32 MB bench session: 20 MB of
    # candidate text, 5.5 MB of it distinct)
    normalized: dict[str, str] = {}
    for pos, (key, text) in enumerate(items):
        if key in seen:
            raise ValueError(f"duplicate key {key!r}")
        seen.add(key)
        keys.append(key)
        norm = normalized.get(text)
        if norm is None:
            norm = normalized[text] = normalize(text)
        if norm and len(norm) >= min_chars:
            group = group_of.setdefault(norm, len(newest))
            if group == len(newest):
                newest.append(pos)
            else:
                newest[group] = pos
            considered.append((pos, group))
    # Representatives (each group's newest item), oldest first: rank r is group order[r].
    order = sorted(range(len(newest)), key=newest.__getitem__)
    reps = [newest[group] for group in order]
    rank_of = [0] * len(order)
    for rank, group in enumerate(order):
        rank_of[group] = rank
    del normalized
    texts = list(group_of)
    del group_of
    texts = [texts[group] for group in order]

    # 2. Near-duplicates among representatives: target[r] = (rank of survivor, similarity).
    # From here on the shingles stand for the texts, which are let go.
    target: dict[int, tuple[int, float]] = {}
    if len(reps) > 1:
        if len(reps) < lsh_min_items and sum(map(len, texts)) < _PURE_PYTHON_CHARS:
            target = _near_bruteforce_py(_py_shingle_sets(texts), threshold)
        else:
            sets = _ExactSets(*_shingle_arrays(texts, release=True))
            del texts
            if len(reps) < lsh_min_items:
                target = _near_bruteforce(sets, threshold)
            else:
                target = _near_lsh(sets, threshold, lsh_threshold, num_perm)
            del sets

    # 3. Report: representatives that were dropped, and older exact copies.
    pairs: list[DuplicatePair] = []
    for pos, group in considered:
        rank = rank_of[group]
        rep = reps[rank]
        hit = target.get(rank)
        if pos == rep:
            if hit is not None:
                pairs.append(DuplicatePair(keys[pos], keys[reps[hit[0]]], hit[1], "near"))
        elif hit is None:
            pairs.append(DuplicatePair(keys[pos], keys[rep], 1.0, "exact"))
        else:
            pairs.append(DuplicatePair(keys[pos], keys[reps[hit[0]]], hit[1], "near"))
    return pairs


# --- exact sets -----------------------------------------------------------------------------


def _shingle_arrays(
    texts: Sequence[str], k: int = SHINGLE_K, *, release: bool = False
) -> tuple[U64, I64]:
    """Shingle hashes of many *normalized* texts (see :func:`shingles`), vectorized.

    Returns ``(grams, offsets)``: the shingles of text i (with repeats, unsorted) are
    ``grams[offsets[i]:offsets[i + 1]]``. Every non-empty text has at least one. Texts are
    processed in chunks of about ``_CHUNK_CHARS`` characters to bound scratch memory; a
    longer text on its own, piece by piece (:func:`_long_text_grams`). With
    ``release`` (``texts`` must then be a list), each text is replaced by ``""`` once hashed,
    so that the texts (when the list holds their last reference) and the shingles do not
    take memory together.
    """
    import numpy as np

    parts: list[U64] = []
    counts: list[I64] = []
    start = 0
    while start < len(texts):
        if len(texts[start]) > _CHUNK_CHARS:
            grams = _long_text_grams(texts[start], k)
            if release:
                texts[start] = ""  # type: ignore[index]
            parts.append(grams)
            counts.append(np.array([len(grams)], dtype=np.int64))
            start += 1
            continue
        end, size = start, 0
        while end < len(texts) and size < _CHUNK_CHARS and len(texts[end]) <= _CHUNK_CHARS:
            size += len(texts[end]) + 1
            end += 1
        words, n_words = _word_hashes(texts[start:end])
        if release:
            texts[start:end] = [""] * (end - start)  # type: ignore[index]
        grams, n_grams = _grams(words, n_words, k)
        del words
        parts.append(grams)
        counts.append(n_grams)
        start = end
    if not parts:
        return np.zeros(0, dtype=np.uint64), np.zeros(1, dtype=np.int64)
    offsets = np.concatenate(([0], np.cumsum(np.concatenate(counts)))).astype(np.int64)
    # Copied part by part, each let go once copied: not all parts and all grams at once.
    grams = np.empty(int(offsets[-1]), dtype=np.uint64)
    at = 0
    parts.reverse()
    while parts:
        part = parts.pop()
        grams[at : at + len(part)] = part
        at += len(part)
    return grams, offsets


def _long_text_grams(text: str, k: int) -> U64:
    """The shingles of one long *normalized* text, the same array :func:`_grams` gives.

    Its words are hashed ``_CHUNK_CHARS`` characters at a time, in pieces cut at spaces (so
    each piece holds whole words; a word longer than that makes its piece longer), and its
    k-grams are computed from the word hashes in slices, each with the ``k - 1`` words
    before the next. Memory: the scratch of one piece, plus 8 bytes per word for the word
    hashes and 8 for the shingles (measured: a 5.4 MB text costs about 15 MB, not the
    75 MB of hashing it whole, about 15 bytes per char).
    """
    import numpy as np

    pieces: list[U64] = []
    at, n = 0, len(text)
    while at < n:
        cut = text.rfind(" ", at, at + _CHUNK_CHARS) if at + _CHUNK_CHARS < n else n
        if cut <= at:  # no space in the window: cut after the long word
            cut = text.find(" ", at + _CHUNK_CHARS)
            cut = n if cut < 0 else cut
        words, _ = _word_hashes([text[at:cut]])
        pieces.append(words)
        at = cut + 1  # the text is normalized: one space between words
    tok = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.uint64)
    del pieces
    if len(tok) < k:
        return _grams(tok, np.array([len(tok)], dtype=np.int64), k)[0]
    n_pos = len(tok) - k + 1
    grams = np.empty(n_pos, dtype=np.uint64)
    step = max(1, _CHUNK_CHARS // 4)  # k-grams per slice: about 40 bytes of scratch each
    for first in range(0, n_pos, step):
        last = min(first + step, n_pos)
        window = tok[first : last + k - 1]
        grams[first:last] = _grams(window, np.array([len(window)], dtype=np.int64), k)[0]
    return grams


def _word_hashes(texts: Sequence[str]) -> tuple[U64, I64]:
    """Hashes of the words of normalized texts, in order, and the number of words per text.

    All texts are joined by newlines (a normalized text has none) into one UTF-8 buffer;
    words are the runs of bytes other than space and newline (UTF-8 multi-byte sequences
    never contain those bytes); FNV-1a runs over all words at once, one byte position per
    step, longest words first so that the words still running are a prefix.
    """
    import numpy as np

    data = "\n".join([_spaced(t) for t in texts]).encode("utf-8", "surrogatepass")
    buf = np.frombuffer(data, dtype=np.uint8)
    if not buf.size:
        return np.zeros(0, dtype=np.uint64), np.zeros(len(texts), dtype=np.int64)
    in_word = ((buf != 0x20) & (buf != 0x0A)).astype(np.int8)
    edges = np.diff(in_word, prepend=np.int8(0), append=np.int8(0))
    starts = np.flatnonzero(edges == 1)
    lengths = np.flatnonzero(edges == -1) - starts
    text_of = np.searchsorted(np.flatnonzero(buf == 0x0A), starts)
    n_words = np.bincount(text_of, minlength=len(texts)).astype(np.int64)
    if not starts.size:
        return np.zeros(0, dtype=np.uint64), n_words

    # Stable, so the same order either way; 16-bit keys get numpy's radix sort (5x faster).
    key = lengths.astype(np.uint16) if int(lengths.max()) < 1 << 16 else lengths
    order = np.argsort(key, kind="stable")[::-1]
    first = starts[order]
    by_len = lengths[order]
    # running[t] = number of words longer than t bytes (a prefix of `order`), for t up to
    # the length of the (_FEW_WORDS + 1)-th longest word, where the loop below stops: not
    # up to the longest (a base64 blob of a million chars would take a 24 MB scratch).
    stop = int(by_len[_FEW_WORDS]) + 1 if len(by_len) > _FEW_WORDS else 1
    running = np.searchsorted(-by_len, -np.arange(stop), side="left").tolist()
    h = np.full(len(order), _FNV_OFFSET, dtype=np.uint64)
    prime = np.uint64(_FNV_PRIME)
    for t, m in enumerate(running):
        if m <= _FEW_WORDS:
            for w in range(m):
                start = int(first[w])
                h[w] = _fnv1a(data[start + t : start + int(by_len[w])], int(h[w]))
            break
        head = h[:m]
        head ^= buf[first[:m] + t]
        head *= prime
    words = np.empty_like(h)
    words[order] = h
    _fmix64_inplace(words)
    return words, n_words


def _fnv1a(data: bytes, h: int = _FNV_OFFSET) -> int:
    """FNV-1a 64 of ``data``, continued from state ``h``."""
    for byte in data:
        h = ((h ^ byte) * _FNV_PRIME) & _MASK64
    return h


def _grams(tok: U64, n_tok: I64, k: int) -> tuple[U64, I64]:
    """k-gram hashes from word hashes (``n_tok[i]`` words per text, concatenated).

    Returns the gram hashes, concatenated in text order, and the number of grams per text.
    """
    import numpy as np

    t_start = (np.cumsum(n_tok) - n_tok).astype(np.int64)
    n_gram = np.where(n_tok >= k, n_tok - k + 1, np.minimum(n_tok, 1)).astype(np.int64)
    g_start = (np.cumsum(n_gram) - n_gram).astype(np.int64)
    grams = np.empty(int(n_gram.sum()), dtype=np.uint64)
    long = n_tok >= k
    if long.any():
        n_pos = len(tok) - k + 1
        # acc[p] = k * P^k + sum_j tok[p + j] * P^(k-1-j) (mod 2^64), then fmix64.
        acc = np.full(n_pos, (k * pow(_POLY, k, 1 << 64)) & _MASK64, dtype=np.uint64)
        for j in range(k):
            acc += tok[j : j + n_pos] * np.uint64(pow(_POLY, k - 1 - j, 1 << 64))
        _fmix64_inplace(acc)
        grams[_ranges(g_start[long], n_gram[long])] = acc[_ranges(t_start[long], n_gram[long])]
    for i in np.flatnonzero(~long & (n_tok > 0)).tolist():
        start = int(t_start[i])
        grams[g_start[i]] = _gram_hash(tok[start : start + int(n_tok[i])].tolist())
    return grams, n_gram


def _ranges(starts: I64, counts: I64) -> I64:
    """Concatenation of ``arange(s, s + c)`` for each (s, c), vectorized."""
    import numpy as np

    total = int(counts.sum())
    before = np.cumsum(counts) - counts
    return np.repeat(starts - before, counts) + np.arange(total, dtype=np.int64)


def _fmix64_inplace(h: U64) -> None:
    """MurmurHash3 fmix64 on a uint64 array, in place (wrapping arithmetic)."""
    import numpy as np

    h ^= h >> np.uint64(33)
    h *= np.uint64(_FMIX64_C1)
    h ^= h >> np.uint64(33)
    h *= np.uint64(_FMIX64_C2)
    h ^= h >> np.uint64(33)


class _ExactSets:
    """The shingles of the texts compared in step 2 (the only reference to them, so that
    they can be released early), and each text's sorted distinct shingle hashes.

    ``grams`` and ``offsets`` are as :func:`_shingle_arrays` returns them, until
    :meth:`keep_only`. :meth:`get` computes a text's set on first use and keeps it until
    :meth:`forget` (the LSH path forgets dropped texts: they are never compared again).
    """

    def __init__(self, grams: U64, offsets: I64) -> None:
        self.grams: U64 | None = grams
        self.offsets = offsets
        self._memo: dict[int, U64] = {}

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def get(self, i: int) -> U64:
        s = self._memo.get(i)
        if s is None:
            if self.grams is None:
                raise KeyError(f"text {i} was not kept")
            s = _sorted_distinct(self.grams[self.offsets[i] : self.offsets[i + 1]])
            self._memo[i] = s
        return s

    def many(self, texts: Sequence[int]) -> list[U64]:
        """``[self.get(i) for i in texts]``, faster when all are computed already."""
        memo = self._memo
        try:
            return [memo[i] for i in texts]
        except KeyError:
            return [self.get(i) for i in texts]

    def keep_only(self, texts: Sequence[int]) -> None:
        """Compute the sets of ``texts`` now and release all shingles (about 8 bytes per
        word); afterwards only those sets can be got."""
        for i in texts:
            self.get(i)
        self.grams = None

    def forget(self, i: int) -> None:
        self._memo.pop(i, None)


def _sorted_distinct(values: U64) -> U64:
    """``np.unique(values)`` (a new array), several times faster on short arrays."""
    import numpy as np

    out = np.sort(values)
    if len(out) > 1:
        keep = np.empty(len(out), dtype=bool)
        keep[0] = True
        np.not_equal(out[1:], out[:-1], out=keep[1:])
        out = out[keep]
    return out


def _jaccard_sorted(a: U64, b: U64) -> float:
    """Exact Jaccard of two sorted arrays of distinct values."""
    import numpy as np

    if len(a) > len(b):
        a, b = b, a
    idx = np.searchsorted(b, a)
    np.minimum(idx, len(b) - 1, out=idx)
    inter = int(np.count_nonzero(b[idx] == a))
    return inter / (len(a) + len(b) - inter)


def _best_match(
    i: int, candidates: Sequence[int], sets: _ExactSets, threshold: float
) -> tuple[int, float] | None:
    """Most similar candidate with exact Jaccard >= threshold (ties: the newest), or None.

    All candidates are checked with a few numpy calls (their sets concatenated and looked up
    in ``i``'s), not one call each: a query in a real session can return hundreds of short
    texts. Similarities are the same floats as ``|A & B| / |A | B|`` in Python (integers
    below 2^53 divide exactly as doubles).
    """
    import numpy as np

    if not candidates:
        return None
    a = sets.get(i)
    size_a = len(a)
    if len(candidates) == 1:
        j = candidates[0]
        b = sets.get(j)
        if min(size_a, len(b)) / max(size_a, len(b)) < threshold:
            return None
        sim = _jaccard_sorted(a, b)
        return (j, sim) if sim >= threshold else None
    blocks = sets.many(candidates)
    sizes = np.fromiter(map(len, blocks), dtype=np.int64, count=len(blocks))
    # J <= min(|A|, |B|) / max(|A|, |B|): skip pairs whose sizes cannot reach the threshold.
    fits = np.minimum(sizes, size_a) / np.maximum(sizes, size_a) >= threshold
    if not fits.all():
        keep = np.flatnonzero(fits).tolist()
        if not keep:
            return None
        candidates = [candidates[t] for t in keep]
        blocks = [blocks[t] for t in keep]
        sizes = sizes[keep]
    flat = np.concatenate(blocks)
    idx = np.searchsorted(a, flat)
    np.minimum(idx, size_a - 1, out=idx)
    # shared[t] = elements among the first t of flat that are in a (all sets are distinct).
    shared = np.concatenate(([0], np.cumsum(a[idx] == flat)))
    ends = np.cumsum(sizes)
    inter = shared[ends] - shared[ends - sizes]
    sims = inter / (size_a + sizes - inter)
    best = sims.max()
    if best < threshold:
        return None
    ties = np.flatnonzero(sims == best).tolist()
    return max(candidates[t] for t in ties), float(best)


def _near_bruteforce(sets: _ExactSets, threshold: float) -> dict[int, tuple[int, float]]:
    """Step 2 by comparing each text with every newer survivor. O(n * survivors)."""
    target: dict[int, tuple[int, float]] = {}
    survivors: list[int] = []
    for i in range(len(sets) - 1, -1, -1):
        hit = _best_match(i, survivors, sets, threshold)
        if hit is None:
            survivors.append(i)
        else:
            target[i] = hit
    return target


# --- the same in pure Python, for a few short texts ----------------------------------------


def _py_shingle_sets(texts: Sequence[str], k: int = SHINGLE_K) -> list[frozenset[int]]:
    """The shingle sets of non-empty *normalized* texts, without numpy: the same values as
    :func:`_shingle_arrays` (the definition in :func:`shingles`), each word hashed once."""
    powers = [pow(_POLY, k - 1 - j, 1 << 64) for j in range(k)]
    base = k * pow(_POLY, k, 1 << 64)
    word_hash: dict[str, int] = {}
    sets: list[frozenset[int]] = []
    for text in texts:
        hashes: list[int] = []
        for word in _spaced(text).split(" "):
            h = word_hash.get(word)
            if h is None:
                h = word_hash[word] = _fmix64(_fnv1a(word.encode("utf-8", "surrogatepass")))
            hashes.append(h)
        if len(hashes) < k:
            sets.append(frozenset((_gram_hash(hashes),)))
            continue
        acc = [base] * (len(hashes) - k + 1)
        for j, power in enumerate(powers):
            acc = [x + h * power for x, h in zip(acc, hashes[j:], strict=False)]
        sets.append(frozenset([_fmix64(x & _MASK64) for x in acc]))
    return sets


def _near_bruteforce_py(
    sets: Sequence[frozenset[int]], threshold: float
) -> dict[int, tuple[int, float]]:
    """:func:`_near_bruteforce` on Python sets: same comparisons, same floats, same result."""
    target: dict[int, tuple[int, float]] = {}
    survivors: list[int] = []
    for i in range(len(sets) - 1, -1, -1):
        a = sets[i]
        size_a = len(a)
        best: tuple[float, int] | None = None
        for j in survivors:
            b = sets[j]
            size_b = len(b)
            if min(size_a, size_b) / max(size_a, size_b) < threshold:
                continue
            inter = len(a & b)
            sim = inter / (size_a + size_b - inter)
            if sim >= threshold and (best is None or (sim, j) > best):
                best = (sim, j)
        if best is None:
            survivors.append(i)
        else:
            target[i] = (best[1], best[0])
    return target


# --- MinHash and LSH ------------------------------------------------------------------------

_IMPORT_LOCK = threading.Lock()


def _datasketch() -> Any:
    """The ``datasketch`` package, imported (once) without importing SciPy when possible.

    datasketch's ``__init__`` imports all of its modules, and ``datasketch.lsh`` runs
    ``from scipy.integrate import quad`` at import time (about 0.4 s and 50 MB of RSS), though
    ``quad`` is only called to choose LSH bands from a threshold, which :func:`_lsh_params`
    takes from a table for the defaults. So datasketch is imported while ``sys.modules`` holds
    a placeholder ``scipy.integrate`` whose ``quad`` imports the real one on its first call;
    the placeholder is removed right after. If ``scipy.integrate`` is already imported, or the
    placeholder does not satisfy the import (another datasketch release), datasketch is
    imported normally. Same objects, same results either way.
    """
    module = sys.modules.get("datasketch")
    if module is not None and hasattr(module, "MinHashLSH"):
        return module
    with _IMPORT_LOCK:
        if "datasketch" in sys.modules or "scipy.integrate" in sys.modules:
            import datasketch  # type: ignore[import-untyped, unused-ignore]

            return datasketch
        placeholder = ModuleType("scipy.integrate")
        placeholder.quad = _quad  # type: ignore[attr-defined]
        sys.modules["scipy.integrate"] = placeholder
        try:
            import datasketch
        except ImportError:
            for name in [m for m in sys.modules if m.partition(".")[0] == "datasketch"]:
                del sys.modules[name]
            del sys.modules["scipy.integrate"]
            import datasketch
        finally:
            if sys.modules.get("scipy.integrate") is placeholder:
                del sys.modules["scipy.integrate"]
        return datasketch


def _quad(*args: Any, **kwargs: Any) -> Any:
    """``scipy.integrate.quad``, imported on first call (see :func:`_datasketch`)."""
    from scipy.integrate import quad  # type: ignore[import-untyped, unused-ignore]

    return quad(*args, **kwargs)


def _permutations(num_perm: int, seed: int) -> tuple[U32, U32]:
    """``(a, b)``, the ``num_perm`` affine permutations ``h -> a * h + b mod 2^32`` of
    datasketch ``MinHash(num_perm, seed, scheme="affine32")`` (its ``permutations``): drawn
    from ``numpy.random.RandomState(seed)``, ``a`` odd (``2 * randint(0, 2^31) + 1``), then
    ``b = randint(0, 2^32)``, as datasketch 2.0 draws them (a test checks them against it).
    Drawn here: importing datasketch for them took 0.07 s of CPU (the 32 MB bench session).
    """
    import numpy as np

    gen = np.random.RandomState(seed)
    a = gen.randint(0, 1 << 31, num_perm, dtype=np.uint32) * np.uint32(2) + np.uint32(1)
    b = gen.randint(0, 1 << 32, num_perm, dtype=np.uint32)
    return a, b


def _minhash_matrix(grams: U64, offsets: I64, num_perm: int, seed: int) -> U32:
    """MinHash signatures of all texts, shape (texts, num_perm), dtype uint32.

    Bit-for-bit what datasketch ``MinHash(num_perm, seed, scheme="affine32",
    hashfunc=identity).update_batch(low 32 bits of each shingle)`` gives, computed in blocks
    of shingles over all texts at once (numpy releases the GIL, so from ``_THREADED_ROWS``
    shingles two threads use two cores). The result is the transpose of a C-order
    (num_perm, texts) array, not a copy: each permutation's values are contiguous. Scratch
    memory: about 1 MB per block in flight.
    """
    import numpy as np

    a, b = _permutations(num_perm, seed)
    a_col = a[:, None]
    b_col = b[:, None]
    n = len(offsets) - 1
    total = int(offsets[-1])
    # Permutations x texts: the per-text minimum is then a reduction over contiguous memory.
    out = np.full((num_perm, n), np.iinfo(np.uint32).max, dtype=np.uint32)

    def block(start: int) -> tuple[int, int, U32]:
        end = min(start + _BLOCK_ROWS, total)
        first = int(np.searchsorted(offsets, start, side="right")) - 1
        stop = int(np.searchsorted(offsets, end, side="left"))
        seg = np.maximum(offsets[first:stop], start) - start
        h = grams[start:end].astype(np.uint32)  # the low 32 bits, premixed as datasketch does
        h ^= h >> np.uint32(16)
        h *= np.uint32(_FMIX32_C1)
        h ^= h >> np.uint32(13)
        h *= np.uint32(_FMIX32_C2)
        h ^= h >> np.uint32(16)
        phv = a_col * h[None, :]
        phv += b_col
        return first, stop, np.minimum.reduceat(phv, seg, axis=1)

    starts = range(0, total, _BLOCK_ROWS)
    if total < _THREADED_ROWS:
        for first, stop, mins in map(block, starts):
            np.minimum(out[:, first:stop], mins, out=out[:, first:stop])
    else:
        with ThreadPoolExecutor(max_workers=2) as pool:
            for first, stop, mins in pool.map(block, starts):
                np.minimum(out[:, first:stop], mins, out=out[:, first:stop])
    return out.T


def _band_groups(
    signatures: U32, bands: int, rows: int
) -> tuple[list[int], list[bool], list[bool], list[list[int]]]:
    """The texts whose signature equals another text's in at least one LSH band, and the
    bands they share.

    Returns ``(texts, older, newer, groups)``: ``texts`` in increasing order; ``older[k]``
    is true when some text before ``texts[k]`` shares a band with it, ``newer[k]`` when some
    text after it does; ``groups[k]`` names each band ``texts[k]`` shares, as the id of the
    group of texts with the same values in that band (ids are distinct across bands).
    ``MinHashLSH.query`` returns exactly the indexed keys that share a band with the query
    (a band is keyed by its ``rows`` values), so its candidates are the texts indexed under
    one of the query's groups (:class:`_BandIndex`); a text with no newer partner gets
    nothing from a query of the newer survivors, and one with no older partner is returned
    by no later query. A group is a run of equal rows of the band (:func:`_equal_runs`).
    """
    import numpy as np

    n = len(signatures)
    if n < 2:
        return [], [], [], []
    older = np.zeros(n, dtype=bool)
    newer = np.zeros(n, dtype=bool)
    members: list[I64] = []  # per band: the texts that share it, and their group ids
    ids: list[I64] = []
    next_id = 0
    for band in range(bands):
        order, starts = _equal_runs(signatures[:, band * rows : (band + 1) * rows])
        if starts.all():
            continue
        first = np.flatnonzero(starts)
        run = np.cumsum(starts) - 1
        size = np.diff(first, append=n)[run]
        # Runs of equal rows: the oldest (lo) and newest (hi) text of each text's run.
        lo = np.minimum.reduceat(order, first)[run]
        hi = np.maximum.reduceat(order, first)[run]
        older[order[order > lo]] = True
        newer[order[order < hi]] = True
        shared = size > 1
        members.append(order[shared])
        ids.append(run[shared] + next_id)
        next_id += len(first)
    if not members:
        return [], [], [], []
    texts = np.flatnonzero(older | newer)
    text_of = np.concatenate(members)
    group_of = np.concatenate(ids)
    by_text = np.argsort(text_of, kind="stable")
    counts = np.bincount(text_of, minlength=n)[texts]
    cuts = np.cumsum(counts).tolist()
    flat = group_of[by_text].tolist()
    groups = [flat[a:b] for a, b in zip([0, *cuts[:-1]], cuts, strict=True)]
    return texts.tolist(), older[texts].tolist(), newer[texts].tolist(), groups


def _equal_runs(cols: U32) -> tuple[I64, NDArray[np.bool_]]:
    """``(order, starts)``: an order of the rows of ``cols`` in which equal rows are
    adjacent, and where each run of equal rows starts (``starts[0]`` is true).

    The rows are sorted by one 64-bit fold of their values (``argsort``, several times
    faster than sorting by the values themselves), then checked: if two different rows
    fold alike (so a run may hold both, or be split), they are sorted by the values
    (``lexsort``) instead.
    """
    import numpy as np

    key = cols[:, 0].astype(np.uint64)
    for r in range(1, cols.shape[1]):
        key *= np.uint64(_POLY)
        key += cols[:, r]
    order = np.argsort(key)
    ordered = key[order]
    starts = np.empty(len(order), dtype=bool)
    starts[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=starts[1:])
    if not starts.all():
        rows = cols[order]
        if not (rows == rows[np.flatnonzero(starts)][np.cumsum(starts) - 1]).all():
            order = np.lexsort(cols.T[::-1])  # by the first value, then the next, ...
            rows = cols[order]
            np.any(rows[1:] != rows[:-1], axis=1, out=starts[1:])
    return order, starts


def _near_lsh(
    sets: _ExactSets, threshold: float, lsh_threshold: float, num_perm: int
) -> dict[int, tuple[int, float]]:
    """Step 2 with MinHash LSH: only survivors are indexed, every candidate is verified.

    Texts that share no band with any other text are LSH singletons: they survive without a
    query and are not indexed (no query could return them). Likewise a text that shares
    bands only with older texts skips its query, and one that shares bands only with newer
    texts is not indexed; the others are indexed and queried under the bands they share
    only (see :func:`_band_groups`). Once the signatures are known, only the shingle sets
    of texts sharing a band are kept. The index is :class:`_BandIndex` (datasketch
    ``MinHashLSH``'s candidates).
    """
    assert sets.grams is not None
    signatures = _minhash_matrix(sets.grams, sets.offsets, num_perm, MINHASH_SEED)
    bands, rows = _lsh_params(lsh_threshold, num_perm)
    sharing, older, newer, groups = _band_groups(signatures, bands, rows)
    del signatures
    sets.keep_only(sharing)
    index = _BandIndex()
    target: dict[int, tuple[int, float]] = {}
    for k in range(len(sharing) - 1, -1, -1):
        i = sharing[k]
        candidates = index.query(groups[k]) if newer[k] else []
        hit = _best_match(i, candidates, sets, threshold)
        if hit is None:
            if older[k]:
                index.insert(i, groups[k])
        else:
            target[i] = hit
            sets.forget(i)
    return target


class _BandIndex:
    """The LSH index of datasketch ``MinHashLSH(params=(bands, rows))``, by band group.

    A text is indexed under the groups of the bands it shares with other texts
    (:func:`_band_groups`: a group is one band's values, which ``MinHashLSH`` keys the band
    by), and :meth:`query` returns every inserted text in one of the given groups, as
    ``MinHashLSH.query`` returns every inserted text with equal values in some band (a test
    checks both on the same signatures). Same candidates, without its per-call overhead nor
    a key per band: its query and insert took 0.3 s of the 1.0 s of :func:`find_duplicates`
    under the profiler on the 32 MB bench session.
    """

    def __init__(self) -> None:
        self.texts: dict[int, list[int]] = {}

    def query(self, groups: list[int]) -> list[int]:
        """The inserted texts in one of ``groups``, sorted."""
        found: set[int] = set()
        for group in groups:
            bucket = self.texts.get(group)
            if bucket is not None:
                found.update(bucket)
        return sorted(found)

    def insert(self, text: int, groups: list[int]) -> None:
        """Index ``text`` under its ``groups``."""
        for group in groups:
            bucket = self.texts.get(group)
            if bucket is None:
                self.texts[group] = [text]
            else:
                bucket.append(text)
