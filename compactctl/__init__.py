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
    # events and the effective context
    "Event": "compactctl.model",
    "Message": "compactctl.model",
    "CompactEvent": "compactctl.model",
    "SummaryEvent": "compactctl.model",
    "SessionEvent": "compactctl.model",
    "BadLine": "compactctl.model",
    "Filter": "compactctl.model",
    "inspect_events": "compactctl.app.inspector",
    # reading and writing transcripts
    "Session": "compactctl.session",
    "read": "compactctl.io.files",
    "load": "compactctl.formats.reader",
    "append_events": "compactctl.io.files",
    "write_output": "compactctl.io.files",
    "TokenCounter": "compactctl.tokens",
    "CompactError": "compactctl.errors",
    # the layers: filters, and Layer objects over a Session
    "rules": "compactctl.layers.rules",
    "dedup": "compactctl.layers.dedup",
    "micro": "compactctl.layers.micro",
    "Layer": "compactctl.layers.base",
    "Plan": "compactctl.layers.base",
    "plan_layers": "compactctl.layers.base",
    "plan_onepass": "compactctl.layers.onepass",
    "OnePassOptions": "compactctl.layers.onepass",
    "RulesLayer": "compactctl.layers.rules",
    "DedupLayer": "compactctl.layers.dedup",
    "MicroLayer": "compactctl.layers.micro",
    "CompactLayer": "compactctl.layers.summary",
    "TiersLayer": "compactctl.layers.tiers",
    "RulesOptions": "compactctl.layers.options",
    "DedupOptions": "compactctl.layers.options",
    "MicroParams": "compactctl.layers.options",
    "CompactOptions": "compactctl.layers.options",
    "TiersOptions": "compactctl.layers.options",
    "plan_compact": "compactctl.layers.summary",
    "plan_tiers": "compactctl.layers.tiers",
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
