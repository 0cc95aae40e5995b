"""Transcripts in object storage (issue 20, point 3): fsspec URLs as inputs and ``-o``
outputs, on fsspec's ``memory://`` store (in process) and ``file://`` (through the CLI)."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path

import fsspec
import orjson
import pytest

from compactctl.app.config import Settings
from compactctl.app.jobs import compact_path
from compactctl.app.options import output_options
from compactctl.errors import InputError, UsageError
from compactctl.io.files import discover
from compactctl.io.remote import discover_url, is_url, open_url, write_url
from compactctl.layers.options import CompactOptions
from tests.helpers import SAMPLES, run_cli

SMALL = (SAMPLES / "small-s1.canonical.jsonl").read_bytes()


@pytest.fixture
def store() -> Iterator[fsspec.AbstractFileSystem]:
    fs = fsspec.filesystem("memory")
    fs.pipe("/bucket/in/a.jsonl", SMALL)
    fs.pipe("/bucket/in/deep/b.jsonl.gz", gzip.compress(SMALL))
    fs.pipe("/bucket/in/notes.txt", b"not a transcript")
    yield fs
    fs.rm("/bucket", recursive=True)


def test_discover_and_read(store: fsspec.AbstractFileSystem) -> None:
    assert discover_url("memory://bucket/in") == [
        "memory:///bucket/in/a.jsonl",
        "memory:///bucket/in/deep/b.jsonl.gz",
    ]
    files, errors = discover(["memory://bucket/in/", "memory://bucket/nothing"])
    assert len(files) == 2 and [e.message for e in errors] == ["no such file or folder"]
    for url in files:  # gzip by its magic bytes, as for a local file
        with open_url(url) as stream:
            assert stream.read() == SMALL
    with pytest.raises(InputError, match="no such file"), open_url("memory://bucket/x.jsonl"):
        pass
    assert not is_url("/tmp/a.jsonl") and is_url("gs://b/k")


def test_write_is_whole(store: fsspec.AbstractFileSystem) -> None:
    assert write_url("memory://bucket/out/c.jsonl", [b"a\n", b"b\n"]) == 4
    assert store.cat("/bucket/out/c.jsonl") == b"a\nb\n"


def test_compact_from_and_to_object_storage(store: fsspec.AbstractFileSystem) -> None:
    paths = ["memory://bucket/in/"]
    settings = Settings({}, "compact")
    with pytest.raises(UsageError, match="cannot be appended to: pass -o"):
        output_options(settings, paths, {"db": ""})
    out = output_options(settings, paths, {"output": "memory://bucket/out/", "db": ""})
    assert out.output_dir == "memory://bucket/out/"
    for url in discover(paths)[0]:
        result = compact_path(url, CompactOptions(force=True), out)
        assert result["changed"] and result["written"].startswith("memory://bucket/out/")
    for name in ("a.jsonl", "b.jsonl"):
        data = store.cat(f"/bucket/out/{name}")
        assert data.startswith(SMALL)
        kinds = [orjson.loads(line)["type"] for line in data[len(SMALL) :].splitlines()]
        assert kinds == ["compact", "summary"]
    assert store.cat("/bucket/in/a.jsonl") == SMALL  # the input is never written


def test_cli_with_file_urls(tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    (src / "a.jsonl").write_bytes(SMALL)
    env = {"COMPACTCTL_DB": str(tmp_path / "state.db")}
    r = run_cli("compact", "--force", f"file://{src}/", env=env)
    assert r.returncode == 2 and b"cannot be appended to: pass -o" in r.stderr
    r = run_cli("compact", "--force", "-o", f"file://{tmp_path}/out/", f"file://{src}/", env=env)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out" / "a.jsonl").read_bytes().startswith(SMALL)
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.endswith(".tmp")]
    assert (src / "a.jsonl").read_bytes() == SMALL
    r = run_cli("inspect", "--json", f"file://{tmp_path}/out/a.jsonl", env=env)
    doc = orjson.loads(r.stdout)
    assert doc["files"][0]["effectiveTokens"] < doc["files"][0]["tokens"]


def test_s3_round_trip_against_a_local_s3_server(tmp_path: Path) -> None:
    """An S3 round trip through the CLI against moto's S3 server on 127.0.0.1 (s3fs is the
    s3:// filesystem; the endpoint comes from fsspec's FSSPEC_S3_ENDPOINT_URL)."""
    import socket

    import s3fs
    from moto.server import ThreadedMotoServer

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        endpoint = f"http://127.0.0.1:{port}"
        creds = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                 "AWS_DEFAULT_REGION": "us-east-1"}  # fmt: skip
        fs = s3fs.S3FileSystem(key="test", secret="test", endpoint_url=endpoint)
        fs.mkdir("sessions")
        fs.pipe("sessions/in/a.jsonl", SMALL)
        fs.pipe("sessions/in/b.jsonl.gz", gzip.compress(SMALL))
        env = {**creds, "FSSPEC_S3_ENDPOINT_URL": endpoint,
               "COMPACTCTL_DB": str(tmp_path / "state.db")}  # fmt: skip
        r = run_cli("compact", "--force", "-o", "s3://sessions/out/", "s3://sessions/in/", env=env)
        assert r.returncode == 0, r.stderr
        fs.invalidate_cache()
        assert sorted(fs.ls("sessions/out")) == ["sessions/out/a.jsonl", "sessions/out/b.jsonl"]
        for name in ("a", "b"):
            data = fs.cat(f"sessions/out/{name}.jsonl")
            kinds = [orjson.loads(x)["type"] for x in data[len(SMALL) :].splitlines()]
            assert data.startswith(SMALL) and kinds == ["compact", "summary"]
        assert fs.cat("sessions/in/a.jsonl") == SMALL
        r = run_cli("compact", "--force", "s3://sessions/in/a.jsonl", env=env)
        assert r.returncode == 2 and b"cannot be appended to" in r.stderr
    finally:
        server.stop()
