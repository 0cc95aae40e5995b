"""Near-duplicate detection, the core of Layer 2 (dedup). Pure: no I/O, no global state.

Texts are compared as *sets of shingles*: the word 3-grams of their normalized text, each
hashed to a 64-bit integer. Two texts are near-duplicates when the Jaccard similarity of their
shingle sets is at least a threshold (0.6 by default). Word 3-grams and 0.6 come from the design
seed (seed 001: "Shingle 哈希（词级别 3-gram）和 Jaccard 相似度", default threshold 0.6, the
older message of a duplicate pair is dropped and the newer one kept).

:func:`find_duplicates` finds, for a chronological list of texts, which older texts are
duplicates of which newer ones:

1. exact repeats, by their normalized text;
2. near-duplicates among the remaining distinct texts, either by comparing all pairs (few
   texts) or with MinHash (Broder 1997, "On the resemblance and containment of documents")
   and LSH banding (Leskovec, Rajaraman, Ullman, "Mining of Massive Datasets", ch. 3) through
   datasketch's ``MinHashLSH``. LSH only proposes candidates: every reported pair is checked
   with the exact Jaccard similarity, so every pair it reports is a true near-duplicate.

numpy and datasketch are imported inside the functions that need them, so importing this
module costs nothing measurable (CLI startup must stay fast).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Literal

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
#: Words per shingle (seed 001: word 3-grams).
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
# Shingles per MinHash block: 16384 x 128 permutations x 4 bytes = 8 MiB scratch per thread.
_BLOCK_ROWS = 1 << 14
# Characters of text tokenized at once: bounds scratch memory (about 40 bytes per char).
_CHUNK_CHARS = 1 << 22
# FNV-1a 64-bit parameters.
_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
# Below this many words still running, FNV-1a finishes them in Python (numpy steps cost ~5 us).
_FEW_WORDS = 32

# ANSI escapes: CSI (colors, cursor moves), OSC (titles, hyperlinks) ended by BEL or ST,
# nF escapes (charset selection, ESC ( B), other two-byte Fe escapes, 8-bit CSI, stray ESC.
_ANSI_RE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"
    r"|\x1b[ -/]+[0-~]"
    r"|\x1b[@-Z\\-_]"
    r"|\x9b[0-?]*[ -/]*[@-~]"
    r"|\x1b"
)

# Scripts written without spaces between words: each character is one token. CJK radicals,
# CJK symbols and punctuation, Hiragana, Katakana, Bopomofo, CJK ideographs (BMP and
# supplementary planes), compatibility ideographs and forms, full- and half-width forms.
# Hangul is not listed: Korean separates words with spaces.
_CJK = (
    "\u2e80-\u2fdf\u3001-\u303f\u3040-\u30ff\u3100-\u312f\u31a0-\u31bf\u31f0-\u31ff"
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef"
    "\U00020000-\U0003134f"
)
_CJK_RE = re.compile(f"[{_CJK}]")

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
    return " ".join(text.lower().split())


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
        k: words per shingle, >= 1 (default 3, seed 001).

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


@lru_cache(maxsize=32)
def _lsh_params(lsh_threshold: float, num_perm: int) -> tuple[int, int]:
    """(bands, rows) that datasketch picks for this threshold with :data:`LSH_WEIGHTS`.

    Cached: datasketch finds them by numerical integration (tens of ms per call).
    """
    from datasketch import MinHashLSH  # type: ignore[import-untyped, unused-ignore]

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
    threshold: float = 0.6,
    lsh_threshold: float = 0.5,
    lsh_min_items: int = 300,
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
    J <= min(|A|, |B|) / max(|A|, |B|)). From ``lsh_min_items`` up, MinHashes of ``num_perm``
    permutations are built (datasketch ``affine32`` scheme, seed :data:`MINHASH_SEED`,
    computed in numpy) and the surviving representatives are indexed in a datasketch
    ``MinHashLSH`` banded for ``lsh_threshold`` (see :data:`LSH_WEIGHTS`); every candidate
    it returns is verified with the exact Jaccard. Texts whose bands equal no other text's
    band (found with numpy; usually most texts) can neither be returned by nor get anything
    from a query, so they skip the index: same result, less time. LSH may miss a pair (about
    1.2% of pairs at J = 0.60, 0.2% at 0.65), never reports a false one.

    Cost: memory O(total chars) for the normalized texts, 8 bytes per word for shingle
    hashes, ``4 * num_perm`` bytes per representative for MinHashes, plus the LSH index.
    Time is about linear in total words: 100,000 texts of 200-2,000 chars (120 MB) take about
    10 s of CPU, 20,000 about 2 s. The worst case is quadratic: thousands of texts all
    about half-similar (J ~0.3-0.6) to each other but not duplicates, so that every query
    returns most survivors.

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

    # 1. Exact groups. newest[text] = position of the newest item with that normalized text.
    keys: list[str] = []
    seen: set[str] = set()
    considered: list[tuple[int, str]] = []
    newest: dict[str, int] = {}
    for pos, (key, text) in enumerate(items):
        if key in seen:
            raise ValueError(f"duplicate key {key!r}")
        seen.add(key)
        keys.append(key)
        norm = normalize(text)
        if norm and len(norm) >= min_chars:
            considered.append((pos, norm))
            newest[norm] = pos
    rep_texts = {pos: norm for norm, pos in newest.items()}
    reps = sorted(rep_texts)  # positions of representatives, oldest first
    texts = [rep_texts[pos] for pos in reps]
    del rep_texts

    # 2. Near-duplicates among representatives: target[r] = (rank of survivor, similarity).
    target: dict[int, tuple[int, float]] = {}
    if len(reps) > 1:
        if len(reps) < lsh_min_items:
            target = _near_bruteforce(texts, threshold)
        else:
            target = _near_lsh(texts, threshold, lsh_threshold, num_perm)
    rank_of = {pos: rank for rank, pos in enumerate(reps)}

    # 3. Report: representatives that were dropped, and older exact copies.
    pairs: list[DuplicatePair] = []
    for pos, norm in considered:
        rep = newest[norm]
        rank = rank_of[rep]
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


def _shingle_arrays(texts: Sequence[str], k: int = SHINGLE_K) -> tuple[U64, I64]:
    """Shingle hashes of many *normalized* texts (see :func:`shingles`), vectorized.

    Returns ``(grams, offsets)``: the shingles of text i (with repeats, unsorted) are
    ``grams[offsets[i]:offsets[i + 1]]``. Every non-empty text has at least one. Texts are
    processed in chunks of about ``_CHUNK_CHARS`` characters to bound scratch memory.
    """
    import numpy as np

    parts: list[U64] = []
    counts: list[I64] = []
    chunk: list[str] = []
    size = 0
    for text in [*texts, None]:
        if text is not None:
            chunk.append(text)
            size += len(text) + 1
            if size < _CHUNK_CHARS:
                continue
        if chunk:
            words, n_words = _word_hashes(chunk)
            grams, n_grams = _grams(words, n_words, k)
            parts.append(grams)
            counts.append(n_grams)
        chunk, size = [], 0
    if not parts:
        return np.zeros(0, dtype=np.uint64), np.zeros(1, dtype=np.int64)
    offsets = np.concatenate(([0], np.cumsum(np.concatenate(counts)))).astype(np.int64)
    return np.concatenate(parts), offsets


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

    order = np.argsort(lengths, kind="stable")[::-1]
    first = starts[order]
    by_len = lengths[order]
    # running[t] = number of words longer than t bytes (a prefix of `order`).
    running = np.searchsorted(-by_len, -np.arange(int(by_len[0])), side="left").tolist()
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
    """Sorted distinct shingle hashes per text, computed on first use and kept until
    :meth:`forget` (the LSH path forgets dropped texts: they are never compared again).
    """

    def __init__(self, grams: U64, offsets: I64) -> None:
        self._grams = grams
        self._offsets = offsets
        self._memo: dict[int, U64] = {}

    def get(self, i: int) -> U64:
        import numpy as np

        s = self._memo.get(i)
        if s is None:
            s = np.unique(self._grams[self._offsets[i] : self._offsets[i + 1]])
            self._memo[i] = s
        return s

    def forget(self, i: int) -> None:
        self._memo.pop(i, None)


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
    """Most similar candidate with exact Jaccard >= threshold (ties: the newest), or None."""
    a = sets.get(i)
    size_a = len(a)
    best: tuple[float, int] | None = None
    for j in candidates:
        b = sets.get(j)
        size_b = len(b)
        # J <= min(|A|, |B|) / max(|A|, |B|): skip pairs whose sizes cannot reach the threshold.
        if size_b < size_a:
            if size_b / size_a < threshold:
                continue
        elif size_a < size_b and size_a / size_b < threshold:
            continue
        sim = _jaccard_sorted(a, b)
        if sim >= threshold and (best is None or (sim, j) > best):
            best = (sim, j)
    return None if best is None else (best[1], best[0])


def _near_bruteforce(texts: Sequence[str], threshold: float) -> dict[int, tuple[int, float]]:
    """Step 2 by comparing each text with every newer survivor. O(n * survivors)."""
    grams, offsets = _shingle_arrays(texts)
    sets = _ExactSets(grams, offsets)
    target: dict[int, tuple[int, float]] = {}
    survivors: list[int] = []
    for i in range(len(texts) - 1, -1, -1):
        hit = _best_match(i, survivors, sets, threshold)
        if hit is None:
            survivors.append(i)
        else:
            target[i] = hit
    return target


# --- MinHash and LSH ------------------------------------------------------------------------


def _minhash_matrix(grams: U64, offsets: I64, num_perm: int, seed: int) -> U32:
    """MinHash signatures of all texts, shape (texts, num_perm), dtype uint32, C order.

    Bit-for-bit what datasketch ``MinHash(num_perm, seed, scheme="affine32",
    hashfunc=identity).update_batch(low 32 bits of each shingle)`` gives, computed in blocks
    of shingles over all texts at once (numpy releases the GIL, so two threads use two cores).
    """
    import numpy as np
    from datasketch import MinHash  # type: ignore[import-untyped, unused-ignore]

    a, b = MinHash(num_perm=num_perm, seed=seed, scheme="affine32").permutations
    a = np.asarray(a, dtype=np.uint32)
    b = np.asarray(b, dtype=np.uint32)
    h = (grams & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    h ^= h >> np.uint32(16)
    h *= np.uint32(_FMIX32_C1)
    h ^= h >> np.uint32(13)
    h *= np.uint32(_FMIX32_C2)
    h ^= h >> np.uint32(16)
    n = len(offsets) - 1
    total = int(offsets[-1])
    # Permutations x texts: the per-text minimum is then a reduction over contiguous memory.
    out = np.full((num_perm, n), np.iinfo(np.uint32).max, dtype=np.uint32)
    a_col = a[:, None]
    b_col = b[:, None]

    def block(start: int) -> tuple[int, int, U32]:
        end = min(start + _BLOCK_ROWS, total)
        first = int(np.searchsorted(offsets, start, side="right")) - 1
        stop = int(np.searchsorted(offsets, end, side="left"))
        seg = np.maximum(offsets[first:stop], start) - start
        phv = a_col * h[None, start:end]
        phv += b_col
        return first, stop, np.minimum.reduceat(phv, seg, axis=1)

    with ThreadPoolExecutor(max_workers=2) as pool:
        for first, stop, mins in pool.map(block, range(0, total, _BLOCK_ROWS)):
            np.minimum(out[:, first:stop], mins, out=out[:, first:stop])
    return np.ascontiguousarray(out.T)
    return out


def _sharing_a_band(signatures: U32, bands: int, rows: int) -> list[int]:
    """Indices of the texts whose signature equals another text's in at least one LSH band.

    Only these can be LSH candidates of anything: ``MinHashLSH.query`` returns exactly the
    keys that share a band with the query. A superset is harmless (a band is first folded to
    64 bits, so a rare fold collision only sends one more text to the index).
    """
    import numpy as np

    shared = np.zeros(len(signatures), dtype=bool)
    for band in range(bands):
        cols = signatures[:, band * rows : (band + 1) * rows].astype(np.uint64)
        key = cols[:, 0].copy()
        for r in range(1, rows):
            key *= np.uint64(_POLY)
            key += cols[:, r]
        _, inverse, count = np.unique(key, return_inverse=True, return_counts=True)
        shared |= count[inverse] > 1
    return np.flatnonzero(shared).tolist()


def _near_lsh(
    texts: Sequence[str], threshold: float, lsh_threshold: float, num_perm: int
) -> dict[int, tuple[int, float]]:
    """Step 2 with MinHash LSH: only survivors are indexed, every candidate is verified.

    Texts that share no band with any other text are LSH singletons: they survive without a
    query and are not indexed (no query could return them).
    """
    from datasketch import LeanMinHash, MinHashLSH  # type: ignore[import-untyped, unused-ignore]

    grams, offsets = _shingle_arrays(texts)
    signatures = _minhash_matrix(grams, offsets, num_perm, MINHASH_SEED)
    sets = _ExactSets(grams, offsets)
    bands, rows = _lsh_params(lsh_threshold, num_perm)
    lsh = MinHashLSH(num_perm=num_perm, params=(bands, rows))
    target: dict[int, tuple[int, float]] = {}
    for i in reversed(_sharing_a_band(signatures, bands, rows)):
        sketch = LeanMinHash(seed=MINHASH_SEED, hashvalues=signatures[i], scheme="affine32")
        candidates: list[int] = sorted(lsh.query(sketch))
        hit = _best_match(i, candidates, sets, threshold) if candidates else None
        if hit is None:
            lsh.insert(i, sketch, check_duplication=False)
        else:
            target[i] = hit
            sets.forget(i)
    return target
