"""The fast paths of compactctl.layers.similarity give the results of the plain ones.

Covers: datasketch imported without SciPy (and SciPy still working afterwards), the table of
LSH bandings, the pure-Python path for a few short texts, the batched exact-Jaccard check,
serial and threaded MinHash blocks, shingle chunking, and dedup below the LSH banding.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench import gen_dups
from compactctl.layers import similarity
from compactctl.layers.dedup import DedupOptions, plan_dedup
from compactctl.layers.similarity import DuplicatePair, find_duplicates, normalize
from compactctl.model import event_from_dict
from tests.helpers import run_python

# --- imports --------------------------------------------------------------------------------


_LSH_ITEMS = """
items = [(str(i), " ".join(f"w{i}x{j}" for j in range(40))) for i in range(20)]
items.append(("dup", items[-1][1] + " tail"))
"""
"""Items for ``find_duplicates(items, lsh_min_items=0)``: the LSH path, one duplicate."""


def test_datasketch_is_imported_without_scipy_and_scipy_still_works() -> None:
    code = (
        _LSH_ITEMS
        + """
import sys
from compactctl.layers.similarity import LSH_WEIGHTS, find_duplicates
print(len(find_duplicates(items, lsh_min_items=0)))  # the default banding: from the table
print(sorted(m for m in sys.modules if m.startswith("scipy.integrate")))
# a banding not in the table: datasketch integrates, with real SciPy
print(len(find_duplicates(items, lsh_min_items=0, threshold=0.5, lsh_threshold=0.4)))
import datasketch, scipy.integrate
lsh = datasketch.MinHashLSH(threshold=0.4, num_perm=128, weights=LSH_WEIGHTS)
print(lsh.b, lsh.r)
print(scipy.integrate.quad(lambda x: x, 0.0, 2.0)[0], hasattr(scipy.integrate, "dblquad"))
print(datasketch.MinHashLSH(threshold=0.5, num_perm=128, weights=LSH_WEIGHTS).b)
"""
    )
    assert run_python(code).splitlines() == ["1", "[]", "1", "42 3", "2.0 True", "32"]


def test_datasketch_import_after_scipy_integrate_uses_it() -> None:
    code = (
        _LSH_ITEMS
        + """
import sys, scipy.integrate
from compactctl.layers.similarity import find_duplicates
# a banding not in the table: the one path that imports datasketch
print(len(find_duplicates(items, lsh_min_items=0, threshold=0.5, lsh_threshold=0.4)))
import datasketch.lsh
print(datasketch.lsh.integrate is scipy.integrate.quad, "datasketch" in sys.modules)
"""
    )
    assert run_python(code).split() == ["1", "True", "True"]


def test_small_inputs_import_neither_numpy_nor_datasketch() -> None:
    code = """
import sys
from compactctl.layers.similarity import find_duplicates
text = "the quick brown fox jumps over the lazy dog " * 10
pairs = find_duplicates([("a", text), ("b", text.upper()), ("c", text + " and more")])
print(len(pairs), sorted(m for m in ("numpy", "datasketch", "scipy") if m in sys.modules))
"""
    assert run_python(code).strip() == "2 []"


def test_the_lsh_path_imports_neither_datasketch_nor_scipy_integrate() -> None:
    code = (
        _LSH_ITEMS
        + """
import sys
from compactctl.layers.similarity import find_duplicates
print(len(find_duplicates(items, lsh_min_items=0)), "datasketch" in sys.modules,
      "scipy.integrate" in sys.modules)
"""
    )
    assert run_python(code).split() == ["1", "False", "False"]


def test_known_lsh_params_are_what_datasketch_picks() -> None:
    from datasketch import MinHashLSH  # type: ignore[import-untyped, unused-ignore]

    assert similarity._KNOWN_LSH_PARAMS  # the default banding at least
    for (lsh_threshold, num_perm), params in similarity._KNOWN_LSH_PARAMS.items():
        lsh = MinHashLSH(threshold=lsh_threshold, num_perm=num_perm, weights=similarity.LSH_WEIGHTS)
        assert (lsh.b, lsh.r) == params


# --- pure Python and numpy give the same sets and results -----------------------------------


_ALPHABET = list("abc  \n\t.-É中文字アー，한") + ["\x1b[31m", "\ud83d", "\U00020001", "xyzzy "]
_TEXTS = st.lists(st.sampled_from(_ALPHABET), min_size=1, max_size=60).map("".join)


@settings(max_examples=100, deadline=None, database=None)
@given(st.lists(_TEXTS, min_size=1, max_size=20), st.integers(1, 4))
def test_pure_python_shingle_sets_equal_the_numpy_ones(texts: list[str], k: int) -> None:
    norms = [n for n in map(normalize, texts) if n]
    grams, offsets = similarity._shingle_arrays(norms, k)
    expected = [frozenset(grams[offsets[i] : offsets[i + 1]].tolist()) for i in range(len(norms))]
    assert similarity._py_shingle_sets(norms, k) == expected


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_pure_python_numpy_and_lsh_paths_agree(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    items, _ = gen_dups.generate(250, seed=seed, max_chars=500)
    monkeypatch.setattr(similarity, "_PURE_PYTHON_CHARS", 1 << 40)
    pure = find_duplicates(items, lsh_min_items=10**9)
    monkeypatch.setattr(similarity, "_PURE_PYTHON_CHARS", 0)
    numpy_brute = find_duplicates(items, lsh_min_items=10**9)
    lsh = find_duplicates(items, lsh_min_items=0)
    assert len(pure) > 10
    assert any(p.kind == "near" and p.similarity < 0.7 for p in pure)
    assert pure == numpy_brute == lsh


def test_default_pure_python_limit_switches_path_but_not_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    items, _ = gen_dups.generate(120, seed=9, max_chars=800)
    chars = sum(len(normalize(t)) for _, t in items)
    monkeypatch.setattr(similarity, "_PURE_PYTHON_CHARS", chars + 1)
    below = find_duplicates(items)
    monkeypatch.setattr(similarity, "_PURE_PYTHON_CHARS", chars // 2)
    assert find_duplicates(items) == below and below


# --- the batched exact check ----------------------------------------------------------------


def _reference_best(
    i: int, candidates: list[int], sets: list[frozenset[int]], threshold: float
) -> tuple[int, float] | None:
    best: tuple[float, int] | None = None
    for j in candidates:
        a, b = sets[i], sets[j]
        if min(len(a), len(b)) / max(len(a), len(b)) < threshold:
            continue
        inter = len(a & b)
        sim = inter / (len(a) + len(b) - inter)
        if sim >= threshold and (best is None or (sim, j) > best):
            best = (sim, j)
    return None if best is None else (best[1], best[0])


def test_batched_best_match_equals_one_pair_at_a_time() -> None:
    import numpy as np

    rng = random.Random(5)
    # Variants of a few prototypes (some elements swapped): similarities all over [0, 1].
    prototypes = [rng.sample(range(10_000), size) for size in (3, 5, 10, 40, 41, 120)]
    sets: list[frozenset[int]] = []
    for _ in range(300):
        proto = rng.choice(prototypes)
        swap = rng.randint(0, len(proto) // 2)
        kept = rng.sample(proto, len(proto) - swap)
        sets.append(frozenset(kept + rng.sample(range(10_000, 20_000), swap)))
    sets += [sets[7], sets[7], sets[11]]  # exact ties: the newest must win
    grams = np.array([g for s in sets for g in sorted(s)], dtype=np.uint64)
    offsets = np.cumsum([0] + [len(s) for s in sets]).astype(np.int64)
    exact = similarity._ExactSets(grams, offsets)
    checked = found = 0
    for threshold in (0.3, 0.6, 1.0):
        for i in range(len(sets)):
            n = rng.choice([0, 1, 2, 5, 50, 300])
            candidates = sorted(rng.sample([j for j in range(len(sets)) if j != i], n))
            if i == 7:
                candidates = sorted({*candidates, len(sets) - 3, len(sets) - 2})
            got = similarity._best_match(i, candidates, exact, threshold)
            want = _reference_best(i, candidates, sets, threshold)
            assert got == want
            assert got is None or type(got[1]) is float
            checked += 1
            found += got is not None
    assert checked == 3 * len(sets) and found > 50
    assert similarity._best_match(7, [len(sets) - 3, len(sets) - 2], exact, 1.0) == (
        len(sets) - 2,
        1.0,
    )


def test_exact_sets_keep_only_releases_the_shingles() -> None:
    import numpy as np

    exact = similarity._ExactSets(
        np.array([5, 3, 5, 9, 1], dtype=np.uint64), np.array([0, 3, 5], dtype=np.int64)
    )
    exact.keep_only([0])
    assert exact.grams is None and exact.get(0).tolist() == [3, 5]
    assert [s.tolist() for s in exact.many([0, 0])] == [[3, 5], [3, 5]]
    with pytest.raises(KeyError):
        exact.get(1)


# --- MinHash blocks and shingle chunks ------------------------------------------------------


def test_minhash_is_the_same_serial_threaded_and_in_small_blocks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from datasketch import MinHash

    items, _ = gen_dups.generate(60, seed=4, max_chars=900)
    texts = [normalize(t) for _, t in items] + ["one", "two words"]
    grams, offsets = similarity._shingle_arrays(texts)
    runs = []
    for block_rows, threaded_rows in ((1 << 13, 1 << 40), (7, 0), (100, 0), (1 << 13, 0)):
        monkeypatch.setattr(similarity, "_BLOCK_ROWS", block_rows)
        monkeypatch.setattr(similarity, "_THREADED_ROWS", threaded_rows)
        runs.append(similarity._minhash_matrix(grams, offsets, 32, similarity.MINHASH_SEED))
    assert all((r == runs[0]).all() for r in runs)
    assert runs[0].shape == (len(texts), 32)
    for i in (0, len(texts) - 1):
        m = MinHash(num_perm=32, seed=similarity.MINHASH_SEED, hashfunc=lambda v: v)
        m.update_batch([int(g) & 0xFFFFFFFF for g in grams[offsets[i] : offsets[i + 1]]])
        assert m.hashvalues.tolist() == runs[0][i].tolist()


def test_shingle_chunks_and_very_long_words_do_not_change_hashes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    texts = [
        normalize(t)
        for t in (
            "x" * 70_000 + " y z",  # a word longer than 65,535 bytes: the int64 sort
            "a b c d e f g",
            "中文文本压缩 with words",
            " ".join(f"w{i}" for i in range(500)),
        )
    ]
    grams, offsets = similarity._shingle_arrays(texts)
    expected = similarity._py_shingle_sets(texts)
    assert [
        frozenset(grams[offsets[i] : offsets[i + 1]].tolist()) for i in range(len(texts))
    ] == expected
    monkeypatch.setattr(similarity, "_CHUNK_CHARS", 10)  # one text per chunk
    small_grams, small_offsets = similarity._shingle_arrays(texts)
    assert small_grams.tolist() == grams.tolist()
    assert small_offsets.tolist() == offsets.tolist()


# --- dedup below the default LSH banding ----------------------------------------------------


def test_dedup_threshold_below_the_lsh_banding_runs() -> None:
    words = [f"word{i:03d}" for i in range(40)]  # 319 chars: above min_chars
    older = " ".join(words)
    # 38 shingles each, 20 of them shared: J = 20 / 56
    newer = " ".join(words[:22] + [f"x{i}" for i in range(18)])
    assert find_duplicates([("o", older), ("n", newer)], threshold=0.3, lsh_threshold=0.3) == [
        DuplicatePair("o", "n", 20 / 56, "near")
    ]
    log = [
        event_from_dict({"type": "message", "uuid": u, "role": "assistant", "content": t})
        for u, t in (("o", older), ("n", newer))
    ]
    for lsh_min_items in (300, 0):
        opts = DedupOptions(threshold=0.3, lsh_min_items=lsh_min_items)
        event, report = plan_dedup(log, opts, timestamp="t")
        assert event is not None and event.data["duplicateOf"] == {"o": "n"}
        assert report["near"] == 1
