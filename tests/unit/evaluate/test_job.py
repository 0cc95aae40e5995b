"""`eval` per file: which original ``--against`` takes, what is refused as an effective
context, the gates on unrounded shares, and ``--compare``'s base."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest

from compactctl.app.provenance import find_record
from compactctl.errors import InputError
from compactctl.evaluate import EvalOptions
from compactctl.evaluate.compare import parse_configs
from compactctl.evaluate.job import _REDUCED, eval_path, original_for
from compactctl.evaluate.report import ProbeCounts, gate_failures
from compactctl.layers.dedup import pointer_text
from compactctl.layers.micro import elide
from compactctl.layers.options import MicroParams
from compactctl.media import image_info
from tests.helpers import SAMPLES

EST = EvalOptions(encoding="estimate")


def _tree(root: Path, *names: str) -> None:
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes((SAMPLES / "small-s1.canonical.jsonl").read_bytes())


def test_original_for_pairs_as_o_dir_names_outputs(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path, "in/a/s.jsonl", "in/b/s.jsonl.gz", "in/t.jsonl", "out/a/s.jsonl",
          "out/b/s.jsonl", "out/t.jsonl", "loose/t.jsonl", "loose/s.jsonl")  # fmt: skip
    # a folder of PATHS: its path relative to it, subfolders mirrored, .gz dropped
    assert original_for("out/a/s.jsonl", "in", ("out",)) == "in/a/s.jsonl"
    assert original_for("out/b/s.jsonl", "in", ("out",)) == "in/b/s.jsonl.gz"
    assert original_for("out/t.jsonl", "in", ("out",)) == "in/t.jsonl"
    # named by itself: its name, at the top, else the one of that name at any depth
    assert original_for("loose/t.jsonl", "in") == "in/t.jsonl"
    two = r"2 transcripts there could be its original, in/a/s.jsonl and in/b/s.jsonl.gz; pass"
    with pytest.raises(InputError, match=two):
        original_for("loose/s.jsonl", "in")
    # found in a folder of PATHS, the mirrored path decides: no guess at another depth
    with pytest.raises(InputError, match="no original of it there .* would name s.jsonl"):
        original_for("out/a/s.jsonl", "in", ("out/a",))
    # never the file itself: in the folder, or as the file
    with pytest.raises(InputError, match="would name a/s.jsonl"):
        original_for("in/a/s.jsonl", "in", ("in",))
    with pytest.raises(InputError, match="is the file evaluated itself"):
        original_for("out/t.jsonl", "./out/t.jsonl")
    with pytest.raises(InputError, match="would name stdin.jsonl"):  # as -o DIR/ names -
        original_for("-", "in")


def test_the_record_of_o_dir_names_the_original(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path, "in/x/s.jsonl", "in/y/s.jsonl", "out/deep/s.jsonl")
    record = tmp_path / "out" / ".compactctl" / "deep" / "s.jsonl.json"
    record.parent.mkdir(parents=True)
    record.write_bytes(orjson.dumps({"source": str(tmp_path / "in" / "y" / "s.jsonl")}))
    where, rec = find_record("out/deep/s.jsonl") or ("", {})
    assert (where, rec["source"]) == (str(record), str(tmp_path / "in/y/s.jsonl"))
    assert find_record("in/x/s.jsonl") is None and find_record("-") is None
    # the name alone would be ambiguous (x and y), and deep/ is no folder of in/
    assert original_for("out/deep/s.jsonl", "in") == "in/y/s.jsonl"
    # a record naming a file outside --against is not followed: the name decides
    assert original_for("out/deep/s.jsonl", "in/x") == "in/x/s.jsonl"


def test_only_compactctl_reduced_text_gives_an_effective_context_away():
    """:data:`_REDUCED` matches what the layers write (so a change of their format fails
    here), and not the same words indented or in a sentence."""
    log = "run\n" + "ok\n" * 300 + "src/a.py:3: error: bad\n" + "ok\n" * 300 + "done"
    v2 = elide(log, {**MicroParams().replay_params(), "headMax": 8, "tailMax": 5})
    v1 = elide("a" * 200, {"minChars": 120, "headRatio": 0.2, "tailRatio": 0.1,
                           "headMax": 600, "tailMax": 300})  # fmt: skip
    image = image_info({"type": "image", "width": 1280, "height": 800}, "anthropic")
    for text, hit in (
        (v2, "[... 1798 chars elided, 1 line of them kept ...]"),
        (v1, "[... 140 chars elided ...]"),
        (image.placeholder(), image.placeholder()),
        (pointer_text("m9", 0.8312, None), pointer_text("m9", 0.8312, None)),
        (pointer_text("m9", 1.0, "read_file"), pointer_text("m9", 1.0, "read_file")),
    ):
        found = _REDUCED.search(text)
        assert found is not None and found.group(0) == hit, text
    for text in (
        "    [... 140 chars elided ...]",  # a doctest's expected output, indented
        "the log said [... 140 chars elided ...] there",
        "see " + pointer_text("m9", 1.0, None),
    ):
        assert _REDUCED.search(text) is None, text


def test_gates_compare_unrounded_shares():
    """20000 of 20001 rounds to 1.0 (4 places): it passed ``--min-retention 1``."""
    counts = ProbeCounts()
    for i in range(20001):
        counts.add("command", i > 0)
    assert counts.retention == 1.0
    assert gate_failures(counts, 1.0, {"command": 1.0}) == [
        "retention 0.99995 < 1",
        "command retention 0.99995 < 1",
    ]
    assert gate_failures(counts, 0.9999, {"command": 0.99995}) == []
    half = ProbeCounts(total=2, kept=1, by_kind={"error": [2, 1]})
    assert gate_failures(half, 0.5, {"error": 0.6}) == ["error retention 0.5 < 0.6"]


def test_compare_reuses_the_report_and_its_base(tmp_path: Path):
    """The ``as is`` row is the report's own numbers (not checked and sized again), and with
    ``--against`` every ratio is of the original's tokens."""
    from compactctl.app.jobs import OutputOptions, compact_path
    from compactctl.layers.options import CompactOptions

    src = SAMPLES / "small-s1.canonical.jsonl"
    ctx = tmp_path / "ctx.jsonl"
    compact_path(str(src), CompactOptions(force=True, encoding="estimate"),
                 OutputOptions(output=str(ctx), materialize=True, db=""))  # fmt: skip
    options = EvalOptions(encoding="estimate", against=str(src),
                          compare=parse_configs(["micro_only=true"]))  # fmt: skip
    result = eval_path(str(ctx), options)["result"]
    as_is, micro = result.compare or []
    assert result.ratio < 0.5
    assert (as_is["tokensAfter"], as_is["ratio"]) == (result.tokens_after, result.ratio)
    assert as_is["probes"] == result.counts.to_json()
    assert micro["ratio"] == round(micro["tokensAfter"] / result.tokens_before, 4)


def test_an_original_without_messages_is_an_error(tmp_path: Path):
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    shutil.copy(SAMPLES / "small-s1.canonical.jsonl", tmp_path / "s.jsonl")
    with pytest.raises(InputError, match=f"--against {empty}: the original has no messages"):
        eval_path(str(tmp_path / "s.jsonl"), EvalOptions(encoding="estimate", against=str(empty)))
