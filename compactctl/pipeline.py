"""Composing filters: ``pipeline(read(path), rules(), dedup(), compact())``.

A filter is ``Iterable[Event] -> Iterator[Event]`` (``compactctl.model.Filter``). Filters
compose left to right with a plain loop, as toolz's ``pipe`` does; nothing is read twice and
nothing is held unless a filter says so in its docstring.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from compactctl.model import Event, Filter

__all__ = ["compose", "pipeline"]


def pipeline(source: Iterable[Event], *filters: Filter) -> Iterator[Event]:
    """Run ``source`` through ``filters`` left to right; returns the lazy result stream.

    >>> from compactctl.model import event_from_dict
    >>> def upper(events):
    ...     for e in events:
    ...         yield e.evolve(content=e.data["content"].upper())
    >>> src = [event_from_dict({"type": "message", "role": "user", "content": "hi"})]
    >>> [e.data["content"] for e in pipeline(src, upper, upper)]
    ['HI']
    """
    stream: Iterable[Event] = source
    for f in filters:
        stream = f(stream)
    return iter(stream)


def compose(*filters: Filter) -> Filter:
    """One filter that applies ``filters`` left to right."""

    def composed(events: Iterable[Event]) -> Iterator[Event]:
        return pipeline(events, *filters)

    return composed
