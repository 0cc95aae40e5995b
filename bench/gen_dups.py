"""Synthetic tool outputs with known duplicates, for tests and benchmarks of Layer 2 (dedup).

:func:`generate` writes texts that look like what coding agents get back from tools (log
lines, source code, file listings, test runs, prose), 200-3000 characters each, in
chronological order. A share of them are copies of an earlier item: exact copies (some
byte-identical, some differing only in case, whitespace or ANSI colors, which normalization
removes) and near copies (random word substitutions, deletions and insertions at rates chosen
so that many true Jaccard values fall just above and just below 0.6, plus outputs that grew by
appended lines). :func:`exact_pairs` is the ground truth: what exact pairwise Jaccard says, not
what the generator intended.

Benchmark (prints time, memory, recall against the generator's pairs, precision)::

    .venv/bin/python -m bench.gen_dups --n 100000 --max-chars 2000
"""

from __future__ import annotations

import argparse
import itertools
import random
import re
import resource
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence

from compactctl.layers.similarity import find_duplicates, jaccard, shingles

_SYLLABLES = [
    "ka",
    "ri",
    "to",
    "ne",
    "mo",
    "sa",
    "lu",
    "pe",
    "vi",
    "da",
    "go",
    "zu",
    "ba",
    "fe",
    "hi",
    "jo",
    "ku",
    "ma",
    "ni",
    "po",
    "ra",
    "se",
    "ti",
    "vu",
    "wa",
    "ye",
    "zo",
    "an",
    "el",
    "in",
    "or",
    "un",
    "ex",
    "al",
    "st",
    "tr",
    "pl",
    "gr",
    "ch",
    "sh",
    "th",
    "qu",
]


def _vocabulary(size: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 4))))
    vocab = sorted(words)
    rng.shuffle(vocab)
    return vocab


_VOCAB = _vocabulary(4000, seed=20240501)
# Zipf-like weights: a few words are common, most are rare, as in real text.
_CUM_WEIGHTS = list(itertools.accumulate(1.0 / (rank + 10) for rank in range(len(_VOCAB))))
_STOP = [
    "the",
    "a",
    "of",
    "to",
    "in",
    "and",
    "is",
    "for",
    "on",
    "with",
    "that",
    "this",
    "it",
    "as",
    "be",
    "by",
    "at",
    "from",
    "was",
    "not",
]
_LEVELS = ("DEBUG", "INFO", "INFO", "INFO", "WARN", "ERROR")
_USERS = ("dev", "runner", "root", "agent")
_MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
_EXTS = (".py", ".ts", ".go", ".rs", ".md", ".json", ".yaml", ".txt", ".lock")


class _Writer:
    """Fresh texts of one kind at a time, from one seeded random generator."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def words(self, n: int) -> list[str]:
        return self.rng.choices(_VOCAB, cum_weights=_CUM_WEIGHTS, k=n)

    def ident(self) -> str:
        return "_".join(self.words(self.rng.randint(1, 3)))

    def path(self) -> str:
        parts = self.words(self.rng.randint(1, 3))
        return "/".join(parts) + self.rng.choice(_EXTS)

    def sentence(self) -> str:
        rng = self.rng
        out = []
        for _ in range(rng.randint(6, 18)):
            out.append(rng.choice(_STOP) if rng.random() < 0.35 else self.words(1)[0])
        return " ".join(out).capitalize() + rng.choice(".....?!")

    def log_line(self) -> str:
        r = self.rng
        stamp = (
            f"2024-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}T{r.randint(0, 23):02d}:"
            f"{r.randint(0, 59):02d}:{r.randint(0, 59):02d}.{r.randint(0, 999):03d}Z"
        )
        msg = r.choice(
            (
                f"processed {self.ident()} in {r.randint(1, 900)}ms",
                f"request id={r.getrandbits(40):x} path=/{self.path()} "
                f"status={r.choice((200, 404, 500))}",
                f"cache miss for key {self.ident()}:{r.randint(0, 99999)}",
                f"{' '.join(self.words(r.randint(3, 8)))}",
                f"retrying {self.ident()} attempt {r.randint(1, 5)} of 5",
            )
        )
        return f"{stamp} {r.choice(_LEVELS):5} [{self.ident()}] {msg}"

    def code_lines(self) -> list[str]:
        r = self.rng
        name, args = self.ident(), ", ".join(self.words(r.randint(1, 3)))
        lines = [f"def {name}({args}):", f'    """{self.sentence()}"""']
        for _ in range(r.randint(2, 8)):
            var = self.ident()
            lines.append(
                r.choice(
                    (
                        f"    {var} = {self.ident()}({args})",
                        f"    if {var} is None:\n        return {r.randint(0, 99)}",
                        f"    for {var} in {self.ident()}:\n        {self.ident()}.append({var})",
                        f"    # {self.sentence()}",
                    )
                )
            )
        lines.append(f"    return {self.ident()}\n")
        return lines

    def listing_line(self) -> str:
        r = self.rng
        mode = r.choice(("-rw-r--r--", "-rwxr-xr-x", "drwxr-xr-x"))
        return (
            f"{mode} 1 {r.choice(_USERS)} staff {r.randint(0, 99999):>7} "
            f"{r.choice(_MONTHS)} {r.randint(1, 28):>2} {r.randint(0, 23):02d}:"
            f"{r.randint(0, 59):02d} {self.path()}"
        )

    def test_line(self) -> str:
        r = self.rng
        status = r.choice(("PASSED", "PASSED", "PASSED", "FAILED", "SKIPPED"))
        test = f"tests/test_{self.ident()}.py::test_{self.ident()}"
        return f"{test} {status} [{r.randint(0, 100):3}%]"

    def text(self, min_chars: int, max_chars: int) -> str:
        """One fresh text of one kind, min_chars..max_chars long."""
        r = self.rng
        target = r.randint(min_chars, max_chars)
        kind: Callable[[], list[str]] = r.choice(
            (
                lambda: [self.log_line()],
                self.code_lines,
                lambda: [self.listing_line()],
                lambda: [self.test_line()],
                lambda: [" ".join(self.sentence() for _ in range(r.randint(2, 5))), ""],
            )
        )
        lines: list[str] = []
        size = 0
        while size < target:
            for line in kind():
                lines.append(line)
                size += len(line) + 1
        return _clip("\n".join(lines), max_chars)


def _clip(text: str, max_chars: int) -> str:
    """Cut at the last space at or before max_chars (or hard at max_chars)."""
    if len(text) <= max_chars:
        return text
    cut = text.rfind(" ", 0, max_chars)
    return text[: cut if cut > 0 else max_chars]


def _exact_copy(text: str, rng: random.Random) -> str:
    """The same text, or a variant that normalizes to it (case, whitespace, ANSI colors)."""
    style = rng.randrange(4)
    if style == 0:
        return text
    if style == 1:
        return "\n".join(line + " " * rng.randint(0, 3) for line in text.split("\n")) + "\n\n"
    if style == 2:
        words = text.split(" ")
        i = rng.randrange(len(words))
        words[i] = f"\x1b[1;31m{words[i]}\x1b[0m"
        return " ".join(words)
    return text.upper() if rng.random() < 0.5 else text.replace("\n", "\r\n")


def _near_copy(text: str, rng: random.Random, writer: _Writer, max_chars: int) -> str:
    """A near copy: word edits at a random rate, or the same output grown by new lines."""
    if rng.random() < 0.15:
        extra = writer.text(20, max(20, int(len(text) * rng.uniform(0.1, 0.9))))
        return _clip(text + "\n" + extra, max(max_chars, len(text)))
    # Rates picked so that J (word 3-grams) spreads over ~0.35-0.95, densest near 0.6:
    # a share p of edited words touches about 3p of the 3-grams.
    rate = rng.choice((rng.uniform(0.01, 0.06), rng.uniform(0.06, 0.13), rng.uniform(0.13, 0.25)))
    parts = re.split(r"(\s+)", text)
    out: list[str] = []
    for part in parts:
        if not part or part.isspace() or rng.random() >= rate:
            out.append(part)
            continue
        op = rng.random()
        if op < 0.6:
            out.append(writer.words(1)[0] if rng.random() < 0.7 else str(rng.randint(0, 9999)))
        elif op < 0.8:
            out.append("")
        else:
            out.append(f"{part} {writer.words(1)[0]}")
    return "".join(out)


def generate(
    n: int,
    *,
    seed: int,
    dup_fraction: float = 0.2,
    exact_share: float = 0.3,
    min_chars: int = 200,
    max_chars: int = 3000,
) -> tuple[list[tuple[str, str]], set[tuple[str, str]]]:
    """Generate ``n`` tool-output-like texts, oldest first, some of them copies of older ones.

    Args:
        n: number of items.
        seed: seed of everything random; the same arguments give the same output.
        dup_fraction: share of items that copy an earlier item (chosen uniformly, so a copy
            may copy a copy: chains happen).
        exact_share: share of those copies that are exact (after normalization).
        min_chars, max_chars: length range of fresh texts, in characters (grown near copies
            may reach ``max_chars`` plus the source length).

    Returns:
        ``(items, intended)``: ``items`` are ``(key, text)`` with keys ``m000000``,
        ``m000001``, ...; ``intended`` are the ``(source key, copy key)`` pairs the generator
        made (older first). Heavily edited near copies may fall below any threshold: use
        :func:`exact_pairs` for ground truth.
    """
    rng = random.Random(seed)
    writer = _Writer(rng)
    items: list[tuple[str, str]] = []
    intended: set[tuple[str, str]] = set()
    for i in range(n):
        key = f"m{i:06d}"
        if items and rng.random() < dup_fraction:
            src_key, src_text = items[rng.randrange(len(items))]
            if rng.random() < exact_share:
                text = _exact_copy(src_text, rng)
            else:
                text = _near_copy(src_text, rng, writer, max_chars)
            intended.add((src_key, key))
        else:
            text = writer.text(min_chars, max_chars)
        items.append((key, text))
    return items, intended


def exact_pairs(items: Sequence[tuple[str, str]], threshold: float) -> set[tuple[str, str]]:
    """Ground truth: every ``(older key, newer key)`` with exact Jaccard >= ``threshold``.

    Shingles come from :func:`compactctl.layers.similarity.shingles`; the Jaccard similarity of
    every pair that shares at least one shingle is computed exactly, by counting shared
    shingles through an inverted index (pairs sharing none have Jaccard 0). No sketch, no
    sampling. Texts with no shingles are left out. Quadratic in the worst case: for a few
    thousand items.
    """
    sets = [shingles(text) for _, text in items]
    index: dict[int, list[int]] = defaultdict(list)
    found: set[tuple[str, str]] = set()
    for i, a in enumerate(sets):
        shared: Counter[int] = Counter()
        for s in a:
            shared.update(index[s])
        for j, inter in shared.items():
            if inter / (len(a) + len(sets[j]) - inter) >= threshold:
                found.add((items[j][0], items[i][0]))
        for s in a:
            index[s].append(i)
    return found


def _main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-chars", type=int, default=3000)
    parser.add_argument("--threshold", type=float, default=0.6)
    args = parser.parse_args(argv)

    t0 = time.perf_counter()
    items, intended = generate(args.n, seed=args.seed, max_chars=args.max_chars)
    t1 = time.perf_counter()
    cpu = time.process_time()
    pairs = find_duplicates(items, threshold=args.threshold)
    t2 = time.perf_counter()
    cpu = time.process_time() - cpu
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    text = dict(items)
    memo: dict[str, frozenset[int]] = {}

    def sh(key: str) -> frozenset[int]:
        if key not in memo:
            memo[key] = shingles(text[key])
        return memo[key]

    reported = {p.older for p in pairs}
    wrong = [p for p in pairs if jaccard(sh(p.older), sh(p.newer)) < args.threshold]
    should = {old for old, new in intended if jaccard(sh(old), sh(new)) >= args.threshold}
    recall = len(should & reported) / len(should) if should else 1.0
    chars = sum(len(t) for t in text.values())
    print(
        f"n={args.n} chars={chars} generate={t1 - t0:.1f}s "
        f"find_duplicates={t2 - t1:.1f}s (cpu {cpu:.1f}s) "
        f"peak_rss={peak_mib:.0f}MiB pairs={len(pairs)} "
        f"recall(intended, J>={args.threshold})={recall:.4f} ({len(should & reported)}/"
        f"{len(should)}) below_threshold={len(wrong)}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
