"""OnePassOptions checks its layers as ``--layers`` does, for library callers too."""

import pytest

from compactctl.errors import UsageError
from compactctl.layers.onepass import LAYER_ORDER, OnePassOptions


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("all", LAYER_ORDER),
        (("all",), LAYER_ORDER),
        ("rules,dedup", ("rules", "dedup")),
        (("micro", "summary"), ("micro", "summary")),
    ],
)
def test_layers_are_normalised(given, expected) -> None:
    assert OnePassOptions(layers=given).layers == expected


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("bogus", "unknown layer 'bogus'"),
        (("tiers", "rules"), "'tiers,rules' is out of order"),
        ((), "no layer named"),
        (("dedup", "dedup"), "a layer named twice"),
        ("all,rules", "all names every layer and stands alone"),
    ],
)
def test_bad_layers_are_refused(given, message) -> None:
    with pytest.raises(UsageError, match=message):
        OnePassOptions(layers=given)
