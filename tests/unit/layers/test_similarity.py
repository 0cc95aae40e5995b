"""Tests of compactctl.layers.similarity: shingles, Jaccard and find_duplicates (Layer 2 core)."""

from __future__ import annotations

import doctest
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench import gen_dups
from compactctl.layers import similarity
from compactctl.layers.similarity import (
    DuplicatePair,
    find_duplicates,
    jaccard,
    normalize,
    shingles,
)
from tests.helpers import run_python


def words(*ids: int | str) -> str:
    """A text of distinct words: words(0, 1, "x") == "w0 w1 x"."""
    return " ".join(f"w{i}" if isinstance(i, int) else i for i in ids)


BASE = list(range(20))  # 20 distinct words: 18 word 3-grams


# --- normalize ----------------------------------------------------------------------------


def test_normalize_strips_ansi_lowercases_and_collapses_whitespace() -> None:
    raw = "\x1b[1;31mERROR\x1b[0m:\t File \r\n  NOT found \x1b]0;title\x07\n"
    assert normalize(raw) == "error: file not found"
    assert normalize(normalize(raw)) == normalize(raw)
    assert normalize("   \n\t ") == ""
    assert normalize("中文\u3000文本") == "中文 文本"  # ideographic space is whitespace


# --- shingles and jaccard, counted by hand ------------------------------------------------


def test_five_word_sentences_differing_in_one_word() -> None:
    # 5 words -> 3 word 3-grams each: {the quick brown, quick brown fox, brown fox jumps}
    # vs {the quick brown, quick brown cat, brown cat jumps}: 1 shared, 5 in the union.
    a = shingles("the quick brown fox jumps")
    b = shingles("the quick brown cat jumps")
    assert len(a) == 3 and len(b) == 3
    assert len(a & b) == 1
    assert jaccard(a, b) == pytest.approx(1 / 5)


def test_six_word_sentences_differing_in_last_word_sit_exactly_at_0_6() -> None:
    # 4 shingles each, the first 3 shared: 3 / (4 + 4 - 3) = 0.6.
    a, b = shingles("a b c d e f"), shingles("a b c d e g")
    assert (len(a), len(b), len(a & b)) == (4, 4, 3)
    assert jaccard(a, b) == 0.6


def test_repeated_grams_count_once_and_k_is_a_parameter() -> None:
    assert len(shingles("a b c a b c")) == 3  # abc, bca, cab, abc
    assert len(shingles("a b a", k=1)) == 2
    assert len(shingles("a b c d", k=2)) == 3


def test_short_texts_have_one_shingle_of_the_whole_text() -> None:
    assert len(shingles("hello world")) == 1
    assert shingles("hello world") != shingles("hello")
    assert jaccard(shingles("build passed"), shingles("build failed")) == 0.0
    assert shingles("") == frozenset() == shingles(" \n ")


def test_shingles_normalize_first() -> None:
    assert shingles("\x1b[32mOK\x1b[0m  Done now") == shingles("ok done now")


def test_cjk_runs_use_character_grams() -> None:
    # 5 characters -> 3 character 3-grams: 压缩上, 缩上下, 上下文 vs 压缩上, 缩上下, 上下午.
    a, b = shingles("压缩上下文"), shingles("压缩上下午")
    assert len(a) == 3 and len(a & b) == 2
    assert jaccard(a, b) == 0.5
    # Mixed text: 压 缩 with 中 文 are 5 words, so 3 grams; spaces around CJK do not matter.
    assert shingles("压缩with中文") == shingles("压缩 with 中文")
    assert len(shingles("压缩with中文")) == 3


def test_hashes_are_fixed_64_bit_values() -> None:
    # Pinned: shingles may be stored, so the definition must not drift (ALGORITHM_VERSION).
    assert shingles("hello world") == frozenset({4545497771707268503})
    assert sorted(shingles("The quick brown fox")) == [5924961362820521296, 6533187469219050120]
    assert all(0 <= h < 2**64 for h in shingles("a b c d e f g h"))


def test_hashes_do_not_depend_on_the_process_hash_seed() -> None:
    code = "from compactctl.layers.similarity import shingles; print(sorted(shingles('x y z w')))"
    outs = {run_python(code, env={"PYTHONHASHSEED": seed}) for seed in ("1", "2")}
    assert outs == {f"{sorted(shingles('x y z w'))}\n"}


def test_jaccard_edge_cases() -> None:
    assert jaccard({1, 2, 3}, {2, 3, 4}) == 0.5
    assert jaccard(set(), set()) == 1.0
    assert jaccard({1}, set()) == 0.0
    assert jaccard(frozenset({7}), {7}) == 1.0


# A pure-Python reference of the documented definition, to check the numpy implementation.
_M64 = (1 << 64) - 1
_REF_TOKEN = re.compile(f"[{similarity._CJK}]|[^\\s{similarity._CJK}]+")


def _ref_fmix(h: int) -> int:
    h ^= h >> 33
    h = (h * 0xFF51AFD7ED558CCD) & _M64
    h ^= h >> 33
    h = (h * 0xC4CEB9FE1A85EC53) & _M64
    return h ^ (h >> 33)


def _ref_word(word: str) -> int:
    h = 0xCBF29CE484222325
    for byte in word.encode("utf-8", "surrogatepass"):
        h = ((h ^ byte) * 0x100000001B3) & _M64
    return _ref_fmix(h)


def _ref_gram(hashes: list[int]) -> int:
    h = len(hashes)
    for t in hashes:
        h = (h * 0x9E3779B97F4A7C15 + t) & _M64
    return _ref_fmix(h)


def _ref_shingles(text: str, k: int = 3) -> frozenset[int]:
    hs = [_ref_word(w) for w in _REF_TOKEN.findall(normalize(text))]
    if not hs:
        return frozenset()
    if len(hs) < k:
        return frozenset({_ref_gram(hs)})
    return frozenset(_ref_gram(hs[i : i + k]) for i in range(len(hs) - k + 1))


_ALPHABET = list("abc  \n\t.-É中文字アー，한") + ["\x1b[31m", "\x1b[0m", "\ud83d", "\U00020001"]


_TEXTS = st.lists(st.sampled_from(_ALPHABET), max_size=40).map("".join)


@settings(max_examples=100, deadline=None, database=None)
@given(st.lists(_TEXTS, min_size=1, max_size=30), st.integers(1, 4))
def test_shingles_match_the_reference_definition(texts: list[str], k: int) -> None:
    assert shingles(texts[0], k) == _ref_shingles(texts[0], k)
    # Many texts at once: enough words for the vectorized FNV-1a steps, not only the tail.
    grams, offsets = similarity._shingle_arrays([normalize(t) for t in texts], k)
    for i, text in enumerate(texts):
        assert frozenset(grams[offsets[i] : offsets[i + 1]].tolist()) == _ref_shingles(text, k)


@settings(max_examples=100, deadline=None, database=None)
@given(_TEXTS)
def test_normalize_is_idempotent(text: str) -> None:
    once = normalize(text)
    assert normalize(once) == once
    assert "\x1b" not in once and "  " not in once and once == once.strip()


def test_shingles_match_reference_on_long_words_and_many_texts() -> None:
    texts = [
        "x" * 5000 + " y z",
        "a " * 300,
        " ".join("w" * n for n in range(1, 80)),  # 79 lengths: vectorized, then Python tail
        "日本語のテキスト、カタカナ。 ok",
        "q\ud800r s t",
        "",
    ]
    for text in texts:
        assert shingles(text) == _ref_shingles(text)
    grams, offsets = similarity._shingle_arrays([normalize(t) for t in texts])
    for i, text in enumerate(texts):
        assert frozenset(grams[offsets[i] : offsets[i + 1]].tolist()) == _ref_shingles(text)
    empty, offsets = similarity._shingle_arrays(["", "", ""])
    assert empty.size == 0 and offsets.tolist() == [0, 0, 0, 0]


def test_minhash_signatures_equal_datasketch() -> None:
    from datasketch import MinHash  # type: ignore[import-untyped, unused-ignore]

    for num_perm, seed in ((128, similarity.MINHASH_SEED), (64, 7), (2, 0)):
        a, b = similarity._permutations(num_perm, seed)
        ref_a, ref_b = MinHash(num_perm=num_perm, seed=seed, scheme="affine32").permutations
        assert (a.tolist(), b.tolist()) == (ref_a.tolist(), ref_b.tolist())
    texts = [normalize(t) for t in ("a b c d e", "one", "x y z " * 40, "中文文本压缩")]
    grams, offsets = similarity._shingle_arrays(texts)
    signatures = similarity._minhash_matrix(grams, offsets, 64, similarity.MINHASH_SEED)
    for i in range(len(texts)):
        m = MinHash(num_perm=64, seed=similarity.MINHASH_SEED, hashfunc=lambda v: v)
        m.update_batch([int(g) & 0xFFFFFFFF for g in grams[offsets[i] : offsets[i + 1]]])
        assert m.hashvalues.tolist() == signatures[i].tolist()


def test_lsh_banding_is_the_documented_one() -> None:
    # 32 bands x 4 rows: P(candidate) = 1 - (1 - J^4)^32 = 0.988 at J = 0.6.
    assert similarity._lsh_params(0.5, 128) == (32, 4)
    p_at_threshold = 1 - (1 - 0.6**4) ** 32
    assert p_at_threshold == pytest.approx(0.988, abs=5e-4)


def test_band_partners_are_exactly_the_lsh_candidates() -> None:
    from datasketch import LeanMinHash, MinHashLSH

    items, _ = gen_dups.generate(300, seed=5, max_chars=600)
    texts = list(dict.fromkeys(normalize(t) for _, t in items))
    grams, offsets = similarity._shingle_arrays(texts)
    sig = similarity._minhash_matrix(grams, offsets, 128, similarity.MINHASH_SEED)
    lsh = MinHashLSH(num_perm=128, params=(32, 4))
    sketches = [LeanMinHash(seed=1, hashvalues=row, scheme="affine32") for row in sig]
    for i, sketch in enumerate(sketches):
        lsh.insert(i, sketch)
    found = {i: set(lsh.query(s)) - {i} for i, s in enumerate(sketches)}
    sharing, older, newer, groups = similarity._band_groups(sig, 32, 4)
    assert sharing == sorted(i for i, js in found.items() if js)
    assert older == [any(j < i for j in found[i]) for i in sharing]
    assert newer == [any(j > i for j in found[i]) for i in sharing]
    assert 0 < len(sharing) < len(texts)
    assert not all(older) and not all(newer)
    # two texts share a group exactly when MinHashLSH proposes one for the other
    shared = {i: set(g) for i, g in zip(sharing, groups, strict=True)}
    assert all(len(g) == len(set(g)) for g in groups)
    for i in sharing:
        assert {j for j in sharing if j != i and shared[i] & shared[j]} == found[i]


@pytest.mark.parametrize("fold", ["real", "colliding"])
def test_equal_runs_are_the_groups_of_equal_rows(
    fold: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import numpy as np

    rows = np.random.default_rng(3).integers(0, 3, size=(300, 4)).astype(np.uint32)
    if fold == "colliding":  # every row folds to its last value: different rows fold alike
        monkeypatch.setattr(similarity, "_POLY", 0)
    order, starts = similarity._equal_runs(rows)
    assert sorted(order.tolist()) == list(range(len(rows)))
    cuts = [*np.flatnonzero(starts).tolist(), len(rows)]
    runs = [order[a:b].tolist() for a, b in zip(cuts, cuts[1:], strict=False)]
    want: dict[tuple[int, ...], list[int]] = {}
    for i, row in enumerate(rows.tolist()):
        want.setdefault(tuple(row), []).append(i)
    assert sorted(map(sorted, runs)) == sorted(want.values())
    assert len(runs) < len(rows)  # some rows are equal


def test_band_index_returns_what_minhashlsh_returns() -> None:
    """The LSH path's index (_BandIndex) proposes exactly datasketch MinHashLSH's candidates,
    queried and filled in the same order (newest first, as _near_lsh does)."""
    from datasketch import LeanMinHash, MinHashLSH

    items, _ = gen_dups.generate(300, seed=7, max_chars=600)
    texts = list(dict.fromkeys(normalize(t) for _, t in items))
    grams, offsets = similarity._shingle_arrays(texts)
    sig = similarity._minhash_matrix(grams, offsets, 128, similarity.MINHASH_SEED)
    lsh = MinHashLSH(num_perm=128, params=(32, 4))
    sharing, _, _, groups = similarity._band_groups(sig, 32, 4)
    group_of = dict(zip(sharing, groups, strict=True))
    index = similarity._BandIndex()
    proposed = 0
    for i in range(len(texts) - 1, -1, -1):
        sketch = LeanMinHash(seed=1, hashvalues=sig[i], scheme="affine32")
        keys = group_of.get(i, [])  # a text that shares no band is in no group
        assert index.query(keys) == sorted(lsh.query(sketch))
        proposed += len(index.query(keys))
        if i % 3:  # not every text is indexed (the survivors only)
            lsh.insert(i, sketch, check_duplication=False)
            index.insert(i, keys)
    assert proposed > 20


def test_doctests() -> None:
    assert doctest.testmod(similarity).failed == 0


def test_import_is_cheap() -> None:
    code = (
        "import sys, compactctl.layers.similarity as s; s.normalize('x'); "
        "print(sorted(m for m in ('numpy', 'datasketch', 'scipy') if m in sys.modules))"
    )
    assert run_python(code) == "[]\n"


# --- find_duplicates on hand-made cases ---------------------------------------------------


def test_exact_duplicates_point_to_the_newest_copy() -> None:
    items = [
        ("m1", "Build OK: 3 tests passed"),
        ("m2", "something else entirely here"),
        ("m3", "\x1b[32mbuild ok:\x1b[0m 3 tests   passed\n"),
        ("m4", "BUILD OK: 3 TESTS PASSED"),
    ]
    assert find_duplicates(items) == [
        DuplicatePair("m1", "m4", 1.0, "exact"),
        DuplicatePair("m3", "m4", 1.0, "exact"),
    ]


def test_near_duplicate_at_the_threshold_is_reported_and_newer_kept() -> None:
    items = [("old", "a b c d e f"), ("new", "a b c d e g")]
    assert find_duplicates(items) == [DuplicatePair("old", "new", 0.6, "near")]
    assert find_duplicates(items, threshold=0.61, lsh_threshold=0.5) == []


def test_chain_resolves_to_the_survivor() -> None:
    a = words(*BASE)
    b = words(*BASE[:-1], "x")  # last word changed: J(a, b) = 17/19
    c = words("y", *BASE[1:-1], "x")  # and first: J(b, c) = 17/19, J(a, c) = 16/20
    pairs = find_duplicates([("a", a), ("b", b), ("c", c)])
    assert pairs == [
        DuplicatePair("a", "c", 16 / 20, "near"),
        DuplicatePair("b", "c", 17 / 19, "near"),
    ]


def test_exact_copies_follow_their_group_to_the_survivor() -> None:
    e = words(*BASE)
    n = words(*BASE[:-1], "x")  # J = 17/19
    pairs = find_duplicates([("e1", e), ("e2", e.upper()), ("n", n)])
    assert pairs == [
        DuplicatePair("e1", "n", 17 / 19, "near"),
        DuplicatePair("e2", "n", 17 / 19, "near"),
    ]


def test_no_pointer_below_the_threshold_through_a_chain() -> None:
    a = words(*BASE)
    b = words(*BASE[:-3], "x1", "x2", "x3")  # J(a, b) = 15/21 = 0.714
    c = words("y1", "y2", "y3", *BASE[3:-3], "x1", "x2", "x3")  # J(b, c) = 0.714
    assert jaccard(shingles(a), shingles(c)) == pytest.approx(12 / 24)
    # b -> c; a's only match b is dropped and c is too far (0.5): a is kept, not pointed at c.
    assert find_duplicates([("a", a), ("b", b), ("c", c)]) == [
        DuplicatePair("b", "c", 15 / 21, "near")
    ]


def test_the_most_similar_survivor_wins_and_ties_go_to_the_newest() -> None:
    a = words(*BASE)
    b = words(*BASE[:-4], "x1", "x2", "x3", "x4")  # J(a, b) = 14/22; J(b, c) = 13/23 < 0.6
    c = words("y", *BASE[1:])  # J(a, c) = 17/19
    assert find_duplicates([("a", a), ("c", c), ("b", b)]) == [
        DuplicatePair("a", "c", 17 / 19, "near")
    ]
    b3 = words(*BASE[:-3], "x1", "x2", "x3")  # J(a, b3) = 15/21
    c3 = words("y1", "y2", "y3", *BASE[3:])  # J(a, c3) = 15/21, J(b3, c3) = 12/24
    for order in (("b3", "c3"), ("c3", "b3")):
        texts = {"b3": b3, "c3": c3}
        items = [("a", a)] + [(k, texts[k]) for k in order]
        assert find_duplicates(items) == [DuplicatePair("a", order[1], 15 / 21, "near")]


def test_short_and_empty_items_are_ignored() -> None:
    items = [("a", "ok"), ("b", "  OK  "), ("c", ""), ("d", "\n"), ("e", "ok")]
    assert find_duplicates(items, min_chars=3) == []
    assert find_duplicates(items) == [
        DuplicatePair("a", "e", 1.0, "exact"),
        DuplicatePair("b", "e", 1.0, "exact"),
    ]
    long = words(*BASE)
    assert find_duplicates([("x", long), ("y", long)], min_chars=len(long)) == [
        DuplicatePair("x", "y", 1.0, "exact")
    ]
    assert find_duplicates([("x", long), ("y", long)], min_chars=len(long) + 1) == []


def test_bad_input_raises_value_error() -> None:
    with pytest.raises(ValueError, match="duplicate key"):
        find_duplicates([("k", "a"), ("k", "b")])
    for kwargs in (
        {"threshold": 0.0},
        {"threshold": 1.5},
        {"lsh_threshold": 0.7},
        {"num_perm": 1},
        {"min_chars": -1},
    ):
        with pytest.raises(ValueError):
            find_duplicates([("k", "a")], **kwargs)
    with pytest.raises(ValueError):
        shingles("a", k=0)


# --- find_duplicates on generated sets ----------------------------------------------------


Generated = tuple[list[tuple[str, str]], set[tuple[str, str]], dict[str, frozenset[int]]]


@pytest.fixture(scope="module")
def generated() -> Generated:
    """1,500 generated items, the exact ground truth at 0.6, and every item's shingles."""
    items, _ = gen_dups.generate(1500, seed=7)
    return items, gen_dups.exact_pairs(items, 0.6), {k: shingles(t) for k, t in items}


def test_generator_is_deterministic_and_realistic() -> None:
    items, intended = gen_dups.generate(200, seed=3)
    assert (items, intended) == gen_dups.generate(200, seed=3)
    assert len(items) == 200 and len({k for k, _ in items}) == 200
    fresh = {k for k, _ in items} - {new for _, new in intended}
    assert all(200 <= len(dict(items)[k]) <= 3000 for k in fresh)
    assert 20 <= len(intended) <= 60  # dup_fraction 0.2
    assert all(old < new for old, new in intended)


def test_lsh_path_recall_and_precision_against_exact_jaccard(generated: Generated) -> None:
    items, truth, sets = generated
    # The generated set straddles the threshold: many true pairs within 0.05 of 0.6.
    sims = [jaccard(sets[a], sets[b]) for a, b in truth]
    assert sum(0.6 <= s < 0.65 for s in sims) >= 10
    pairs = find_duplicates(items)  # 1,500 distinct texts >= lsh_min_items: the LSH path
    dropped = {p.older: p for p in pairs}
    assert len(dropped) == len(pairs)

    # Precision 1.0: every reported pair is an exact-Jaccard near-duplicate, newer kept.
    position = {k: i for i, (k, _) in enumerate(items)}
    for p in pairs:
        assert jaccard(sets[p.older], sets[p.newer]) == pytest.approx(p.similarity)
        assert p.similarity >= 0.6 and position[p.older] < position[p.newer]
        assert p.newer not in dropped

    # Recall: older items with a newer item at J >= 0.6, reported as a duplicate of something.
    partners: dict[str, set[str]] = {}
    for old, new in truth:
        partners.setdefault(old, set()).add(new)
    missed = set(partners) - set(dropped)
    recall = 1 - len(missed) / len(partners)
    # A miss is "forced" when every match of the item was itself dropped (a chain whose
    # survivor is below the threshold from it): reporting it would break precision.
    forced = {m for m in missed if partners[m] <= set(dropped)}
    assert len(partners) == 204 and len(missed) == 7 and forced == missed
    assert recall == pytest.approx(197 / 204)  # 0.966; every miss is a forced chain case
    assert 1 - len(missed - forced) / len(partners) >= 0.98  # LSH itself lost nothing


def test_bruteforce_and_lsh_paths_agree() -> None:
    items, _ = gen_dups.generate(400, seed=11, max_chars=1500)
    brute = find_duplicates(items, lsh_min_items=10**9)
    lsh = find_duplicates(items, lsh_min_items=0)
    assert len(brute) > 40
    assert lsh == brute


def test_same_input_same_output() -> None:
    items, _ = gen_dups.generate(500, seed=13, max_chars=1200)
    first = find_duplicates(items, lsh_min_items=0)
    assert first == find_duplicates(items, lsh_min_items=0)
    assert first == find_duplicates(list(items), lsh_min_items=0)
