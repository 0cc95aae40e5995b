"""The per-file job wrapper :func:`compactctl.app.jobs.replanned`."""

from __future__ import annotations

import gc
from typing import Any

import pytest

from compactctl.app.jobs import replanned
from compactctl.errors import FileChanged


def test_replanned_pauses_the_cyclic_collector_for_each_attempt_and_restores_it() -> None:
    during: list[bool] = []

    def changed_once() -> dict[str, Any]:
        during.append(gc.isenabled())
        if len(during) == 1:
            raise FileChanged("was rewritten", path="a.jsonl")
        return {"attempt": len(during)}

    assert replanned("a.jsonl", changed_once) == {"attempt": 2}
    assert during == [False, False] and gc.isenabled()

    def always_changed() -> dict[str, Any]:
        during.append(gc.isenabled())
        raise FileChanged("was rewritten", path="a.jsonl")

    with pytest.raises(FileChanged, match="had changed before as well"):
        replanned("a.jsonl", always_changed)
    assert during[2:] == [False, False] and gc.isenabled()  # on again after the error
