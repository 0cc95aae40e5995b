"""Transcripts in object storage: inputs and ``-o`` outputs as fsspec URLs (issue 20).

A PATH or ``-o`` target with a scheme (``s3://bucket/sessions/``, ``gs://...``,
``file:///srv/sessions/s.jsonl``, ``memory://...``) is read and written through fsspec,
the filesystem layer Dask uses; the scheme's own package provides the store (``s3fs`` for
``s3://``, ``gcsfs`` for ``gs://``; ``file://`` and ``memory://`` are built in).

- Reading: a URL to a file is opened as a binary stream (gzip by its magic bytes, as a
  local file); a URL to a folder (or prefix) is searched recursively for ``*.jsonl`` and
  ``*.jsonl.gz``, sorted.
- Writing: an object store cannot be appended to, so a URL input needs ``-o`` (checked
  before anything runs, :func:`compactctl.app.options.output_options`); an output URL is
  written whole in one ``open``/``close``, which object stores make visible at once (a
  reader sees the old object or the new one), and through a temporary name and a move on
  ``file://``.

fsspec comes with the ``dask`` extra; this module imports it only when a URL is used.
"""

from __future__ import annotations

import contextlib
import gzip
import re
import uuid
from collections.abc import Iterable, Iterator
from typing import Any, BinaryIO

from compactctl.errors import InputError, UsageError, WriteError

__all__ = ["discover_url", "is_url", "makedirs", "open_url", "write_url"]

_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+://")
GZIP_MAGIC = b"\x1f\x8b"
SUFFIXES = (".jsonl", ".jsonl.gz")


def is_url(path: str) -> bool:
    """Whether PATH is an fsspec URL (a scheme of two or more letters, then ``://``).

    >>> is_url("s3://b/k.jsonl"), is_url("memory://x"), is_url("/tmp/a.jsonl"), is_url("-")
    (True, True, False, False)
    """
    return bool(_URL.match(path))


def _fs(url: str) -> tuple[Any, str]:
    """``(filesystem, path inside it)`` of a URL.

    Raises:
        UsageError: fsspec, or the package of the URL's scheme, is not installed.
    """
    try:
        from fsspec.core import url_to_fs  # type: ignore[import-untyped]
    except ImportError:
        raise UsageError(f"{url}: URLs need fsspec: pip install 'compactctl[dask]'") from None
    try:
        return url_to_fs(url)  # type: ignore[no-any-return]
    except (ImportError, ValueError) as exc:
        raise UsageError(f"{url}: {exc}") from None


def discover_url(url: str) -> list[str]:
    """The transcripts a URL names: itself when it is a file, else every ``*.jsonl`` /
    ``*.jsonl.gz`` below it (sorted, as URLs with the same scheme).

    Raises:
        InputError: nothing exists at the URL.
        UsageError: as :func:`_fs`.
    """
    fs, path = _fs(url)
    try:
        if fs.isfile(path):
            return [url]
        if not fs.isdir(path):
            raise InputError("no such file or folder", path=url)
        found = sorted(p for p in fs.find(path) if p.endswith(SUFFIXES))
    except OSError as exc:
        raise InputError(f"cannot list: {exc}", path=url) from None
    return [fs.unstrip_protocol(p) for p in found]


@contextlib.contextmanager
def open_url(url: str) -> Iterator[BinaryIO]:
    """The bytes at ``url`` as a binary stream (gunzipped when they start with gzip's magic).

    Raises:
        InputError: nothing there, or the store refused the read.
        UsageError: as :func:`_fs`.
    """
    fs, path = _fs(url)
    try:
        fh = fs.open(path, "rb")
    except FileNotFoundError:
        raise InputError("no such file", path=url) from None
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot open: {exc}", path=url) from None
    with fh:
        head = fh.read(2)
        fh.seek(0)
        if head == GZIP_MAGIC:
            with gzip.GzipFile(fileobj=fh) as gz:
                yield gz  # type: ignore[misc]
        else:
            yield fh


def makedirs(url: str) -> None:
    """Create the folder ``url`` names where the store has folders (``file://``); object
    stores have none and need nothing."""
    fs, path = _fs(url)
    with contextlib.suppress(OSError):
        fs.makedirs(path, exist_ok=True)


def write_url(url: str, lines: Iterable[bytes]) -> int:
    """Write ``lines`` to ``url`` whole: to a temporary name beside it and moved into place
    on stores with folders (``file://``: a reader sees the old file or the new one), in one
    object written on close on object stores (made visible at once).

    Returns:
        bytes written.

    Raises:
        WriteError: the store refused the write (the target is unchanged).
    """
    fs, path = _fs(url)
    local = "file" in (fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,))
    tmp = f"{path}.compactctl-{uuid.uuid4().hex}.tmp" if local else path
    total = 0
    try:
        with fs.open(tmp, "wb") as fh:
            for chunk in lines:
                fh.write(chunk)
                total += len(chunk)
        if local:
            fs.mv(tmp, path)
    except OSError as exc:
        if local:
            with contextlib.suppress(OSError):
                fs.rm(tmp)
        raise WriteError(
            f"cannot write output ({exc}); the target is unchanged", path=url
        ) from None
    return total
