"""compactctl: compact the session transcripts of LLM agents.

The library under the CLI. Every step is a filter ``Iterable[Event] -> Iterator[Event]``::

    from compactctl import pipeline, read, replay
    events = list(pipeline(read("session.jsonl")))
    context = replay(events)

Names are imported lazily so that ``import compactctl`` (and ``compactctl --help``) stays
fast: heavy modules load on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "Event": "compactctl.model",
    "Message": "compactctl.model",
    "CompactEvent": "compactctl.model",
    "SummaryEvent": "compactctl.model",
    "SessionEvent": "compactctl.model",
    "BadLine": "compactctl.model",
    "Filter": "compactctl.model",
    "read": "compactctl.io.files",
    "append_events": "compactctl.io.files",
    "write_output": "compactctl.io.files",
    "pipeline": "compactctl.pipeline",
    "compose": "compactctl.pipeline",
    "replay": "compactctl.replay",
    "inspect_events": "compactctl.app.inspector",
    "TokenCounter": "compactctl.tokens",
    "CompactError": "compactctl.errors",
}

__all__ = sorted(_EXPORTS) + ["__version__"]

# ``pipeline`` and ``replay`` are also the names of their submodules. Importing a submodule
# sets it as an attribute of the package, so a lazy name would come back as the module in
# ``from compactctl import pipeline, replay`` (the lookup imports it, then finds the module).
# Both are light (they import only compactctl.model, which every command imports), so
# they are bound here, after their submodules, and stay functions.
from compactctl.pipeline import compose as compose  # noqa: E402
from compactctl.pipeline import pipeline as pipeline  # noqa: E402
from compactctl.replay import replay as replay  # noqa: E402


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'compactctl' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
