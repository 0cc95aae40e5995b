"""Transitional re-exports: the per-file jobs moved to :mod:`compactctl.app.jobs`, format
sniffing to :mod:`compactctl.formats.reader`, the effective-context export to
:mod:`compactctl.io.export` and the encoding preload into :class:`compactctl.session.Session`.
"""

from __future__ import annotations

from compactctl.app.jobs import (
    OutputOptions,
    compact_path,
    convert_path,
    dedup_path,
    output_name,
    record_run,
    rules_path,
    tiers_path,
)
from compactctl.formats.reader import _may_be_document, _read_input, _to_canonical, load
from compactctl.formats.reader import check_format as _check_format
from compactctl.formats.reader import first_line_block as _first_line_block
from compactctl.io.export import materialized_lines, openai_messages, to_openai

__all__ = [
    "OutputOptions",
    "_check_format",
    "_first_line_block",
    "_may_be_document",
    "_read_input",
    "_to_canonical",
    "compact_path",
    "convert_path",
    "dedup_path",
    "load",
    "materialized_lines",
    "openai_messages",
    "output_name",
    "record_run",
    "rules_path",
    "tiers_path",
    "to_openai",
]
