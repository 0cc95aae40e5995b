"""``compactctl serve``: compaction on request over HTTP (issue 21).

The API of Coding Code's context service (docs/design.md section 9): a runtime or a UI asks
for a compaction with ``POST /api/sessions/{id}/compact`` and body ``{cwd}``, and gets
``{didCompress, released, promptEstimate}`` back, without starting a process per request.

Routes (FastAPI; the OpenAPI docs at ``/docs``):

- ``POST /api/sessions/{id}/compact``, body ``{cwd?, force? (true), model?, strategy?}``:
  the ``compact`` job on that session (:func:`compactctl.app.jobs.compact_path`, appended in
  place, recorded in the store) and its report, as ``compact --json`` prints it per file.
- ``GET /api/sessions/{id}``: the ``inspect --json`` report of the session.
- ``GET /api/sessions``: ``{"sessions": [{"id", "path", "bytes", "modified"}]}``.
- ``GET /healthz``: ``{"status": "ok", "version"}``.

Finding a session (:class:`SessionIndex`): ``id`` is the file name without ``.jsonl`` under
``--root``; ``cwd`` narrows it to that working directory's project folder, named the way
Claude Code names its folders (every character other than ``[A-Za-z0-9]`` becomes ``-``) or
given as a sub-folder path of the root. None: 404; more than one: 409. An id or cwd that
could leave the root (``..``, an absolute sub-folder, a separator in the id): 400; a file
reached through a symbolic link that resolves outside the root is not listed (404).

Security: the server listens on 127.0.0.1 unless told otherwise and refuses another address
without a token (:func:`check_bind`); with a token, every ``/api`` route needs
``Authorization: Bearer TOKEN`` (compared in constant time, :func:`hmac.compare_digest`;
401 otherwise); a request body over :data:`MAX_BODY_BYTES` is refused with 413; the
summaries are redacted as by the CLI (the ``redact`` option, on by default).

Concurrency: handlers are plain functions, which FastAPI runs in its thread pool, so a model
call never blocks the event loop. Requests on one session take that session's lock in this
process (and the transcript's ``flock`` across processes): the first appends its summary, the
next ones find it there and answer ``didCompress: false``. A model failure answers 502 with
the error, and nothing is appended. uvicorn writes one access log line per request (stderr).

FastAPI and uvicorn are the optional extra ``compactctl[serve]``; this module is imported
only by ``serve``.
"""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import hmac
import ipaddress
import os
import re
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, Header, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from compactctl.errors import (
    CompactError,
    FileChanged,
    InputError,
    LockTimeout,
    SummarizerError,
    UsageError,
)

__all__ = [
    "MAX_BODY_BYTES",
    "CompactBody",
    "ServeConfig",
    "SessionIndex",
    "check_bind",
    "claude_project_name",
    "create_app",
]

MAX_BODY_BYTES = 64 * 1024
"""The largest request body accepted, in bytes (a compact request is a few hundred bytes)."""

SESSION_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,254}")
"""An ``id``: a file name without its ``.jsonl``; no separator, not starting with a dot."""

SUFFIXES = (".jsonl", ".jsonl.gz")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class HTTPProblem(Exception):
    """An error answer: ``status`` (an HTTP status code) and ``detail`` (a sentence)."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


def claude_project_name(cwd: str) -> str:
    """The folder Claude Code keeps the sessions of working directory ``cwd`` in, under
    ``~/.claude/projects/`` (docs/formats.md section 2): every character other than an ASCII
    letter or digit becomes ``-``.

    >>> claude_project_name("/tmp/compactctl-agent-work/claude")
    '-tmp-compactctl-agent-work-claude'
    """
    return re.sub(r"[^A-Za-z0-9]", "-", cwd)


def check_bind(host: str, token: str | None) -> None:
    """Refuse to listen on an address other than the loopback without a token.

    Raises:
        UsageError: ``host`` is not a loopback address (127.0.0.0/8, ::1, ``localhost``)
            and ``token`` is empty.
    """
    if token:
        return
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise UsageError(
            f"refusing to listen on {host} without a token: anyone who reaches it could "
            "compact your sessions. Pass --token T (or set COMPACTCTL_TOKEN), or listen on "
            "127.0.0.1"
        )


class SessionIndex:
    """The sessions under one root folder, found by id (and cwd).

    Args:
        root: the folder; only files whose real path is inside it are ever returned.
    """

    def __init__(self, root: str) -> None:
        self.root = Path(root).resolve()

    def all(self) -> list[Path]:
        """Every ``*.jsonl`` / ``*.jsonl.gz`` file below the root (real path inside the
        root; symbolic links to folders are not followed), sorted."""
        found: list[Path] = []
        for folder, dirs, files in os.walk(self.root):
            dirs.sort()
            for name in sorted(files):
                path = Path(folder) / name
                if name.endswith(SUFFIXES) and self._inside(path) and path.is_file():
                    found.append(path)
        return found

    def _inside(self, path: Path) -> bool:
        try:
            return path.resolve().is_relative_to(self.root)
        except OSError:
            return False

    def session_id(self, path: Path) -> str:
        """The id of a session file: its name without ``.jsonl`` / ``.jsonl.gz``."""
        name = path.name
        for suffix in SUFFIXES:
            if name.endswith(suffix):
                return name[: -len(suffix)]
        return name

    def find(self, session_id: str, cwd: str | None = None) -> Path:
        """The one session named ``session_id`` (in ``cwd``'s project folder, if given).

        Raises:
            HTTPProblem: 400 for an id or cwd that could leave the root; 404 when no session
                matches; 409 when several do (the message lists them, relative to the root).
        """
        if not SESSION_ID.fullmatch(session_id):
            raise HTTPProblem(
                400, f"bad session id {session_id!r}: a file name without .jsonl, no / or .."
            )
        folder: Path | None = None
        if cwd is not None and not os.path.isabs(cwd):
            if ".." in Path(cwd).parts:
                raise HTTPProblem(400, f"cwd {cwd!r} leaves the root")
            folder = (self.root / cwd).resolve()
            if not folder.is_relative_to(self.root):
                raise HTTPProblem(400, f"cwd {cwd!r} leaves the root")
        matches = [p for p in self.all() if self.session_id(p) == session_id]
        if cwd is not None:
            project = claude_project_name(cwd)
            matches = [
                p
                for p in matches
                if p.parent.name == project or (folder is not None and p.parent.resolve() == folder)
            ]
        if not matches:
            where = f" in the project folder of {cwd}" if cwd is not None else ""
            raise HTTPProblem(404, f"no session {session_id}{where} under the root")
        if len(matches) > 1:
            names = ", ".join(str(p.relative_to(self.root)) for p in matches)
            raise HTTPProblem(
                409, f"{len(matches)} sessions are named {session_id}: {names}; pass cwd"
            )
        return matches[0]


@dataclass
class ServeConfig:
    """What the server serves and how.

    Attributes:
        root: the folder the sessions are under.
        token: the bearer token ``/api`` routes need (``None``: none needed, loopback only).
        config: the config file (``--config``; ``None``: the usual lookup), for the
            ``compact`` and ``inspect`` defaults, as the CLI reads them.
        db: the store (``--db``; ``None``: ``COMPACTCTL_DB``, the config or the default;
            ``""``: no store).
        max_body: the largest request body accepted, in bytes.
    """

    root: str
    token: str | None = None
    config: str | None = None
    db: str | None = None
    max_body: int = MAX_BODY_BYTES
    _locks: dict[Path, threading.Lock] = field(default_factory=dict, repr=False)
    _guard: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def lock_for(self, path: Path) -> threading.Lock:
        """The in-process lock that serializes requests on the session at ``path``."""
        with self._guard:
            return self._locks.setdefault(path, threading.Lock())


class BodyLimit:
    """ASGI middleware: a request whose body is over ``limit`` bytes gets 413, by its
    ``Content-Length`` or, without one, as soon as the bytes received pass the limit."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            await _plain(send, 413, f"request body over {self.limit} bytes")
            return
        if length is None:  # chunked: read it all (up to the limit) before the app runs
            chunks: list[bytes] = []
            seen = 0
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    break
                chunks.append(message.get("body", b""))
                seen += len(chunks[-1])
                if seen > self.limit:
                    await _plain(send, 413, f"request body over {self.limit} bytes")
                    return
                if not message.get("more_body"):
                    break
            whole: Message = {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            sent = False

            async def replay() -> Message:
                nonlocal sent
                if sent:
                    return await receive()
                sent = True
                return whole

            await self.app(scope, replay, send)
            return
        await self.app(scope, receive, send)


async def _plain(send: Send, status: int, detail: str) -> None:
    import orjson

    body = orjson.dumps({"detail": detail})
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})  # fmt: skip
    await send({"type": "http.response.body", "body": body})


class CompactBody(BaseModel):
    """The body of ``POST /api/sessions/{id}/compact`` (unknown keys and values of the wrong
    type are refused: a misspelt ``"forse"`` must not compact with the defaults)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    cwd: str | None = Field(default=None, description="the session's working directory")
    force: bool = Field(default=True, description="compact whatever the triggers say")
    model: str | None = Field(default=None, description="extractive or a litellm model")
    strategy: str | None = Field(default=None, description="keep_recent or full_replace")


def _status(exc: CompactError) -> int:
    """The HTTP status of a compaction error: the model failed 502, the file is busy or
    changed 409, the input is not a transcript compactctl can append to 422, bad request
    values 400, the store 500."""
    if isinstance(exc, SummarizerError):
        return 502
    if isinstance(exc, LockTimeout | FileChanged):
        return 409
    if isinstance(exc, UsageError):
        return 400
    if isinstance(exc, InputError):
        return 422
    return 500  # StoreNotUpdated (the transcript was appended) and any other failure


def _relative(result: dict[str, Any], root: Path) -> dict[str, Any]:
    """``result`` with its ``path`` and ``written`` relative to the root."""
    out = dict(result)
    for key in ("path", "written"):
        value = out.get(key)
        if isinstance(value, str) and os.path.isabs(value):
            with contextlib.suppress(ValueError):
                out[key] = str(Path(value).resolve().relative_to(root))
    return out


def create_app(config: ServeConfig) -> Any:
    """The FastAPI application serving ``config.root``.

    Returns:
        a ``fastapi.FastAPI`` (an ASGI app: run it with uvicorn, or test it with
        ``fastapi.testclient.TestClient``).
    """
    from compactctl import __version__
    from compactctl.app.config import Settings, load_config

    index = SessionIndex(config.root)
    table, _ = load_config(config.config)

    def authorized(authorization: str | None = Header(default=None)) -> None:
        if not config.token:
            return
        scheme, _, given = (authorization or "").strip().partition(" ")
        if scheme.lower() != "bearer":  # the scheme is case-insensitive (RFC 9110 11.1)
            given = ""
        if not hmac.compare_digest(given.strip().encode(), config.token.encode()):
            raise HTTPProblem(401, "missing or wrong token: send Authorization: Bearer TOKEN")

    app = FastAPI(
        title="compactctl",
        version=__version__,
        description="Compaction of LLM agent session transcripts on request "
        "(Coding Code's context service API).",
    )

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'] if p != 'body') or 'body'}: {e['msg']}"
            for e in exc.errors()
        )
        return JSONResponse({"detail": f"bad request body: {problems}"}, status_code=400)

    @app.exception_handler(HTTPProblem)
    async def problem(_: Request, exc: HTTPProblem) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return JSONResponse({"detail": exc.detail}, status_code=exc.status, headers=headers)

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        """Liveness: ``{"status": "ok", "version"}``."""
        return {"status": "ok", "version": __version__}

    @app.get("/api/sessions", dependencies=[Depends(authorized)])
    def sessions() -> dict[str, Any]:
        """Every session under the root: id, path (relative to the root), bytes, modified."""
        rows = []
        for path in index.all():
            st = path.stat()
            modified = dt.datetime.fromtimestamp(st.st_mtime, dt.UTC)
            rows.append({
                "id": index.session_id(path),
                "path": str(path.relative_to(index.root)),
                "bytes": st.st_size,
                "modified": modified.isoformat(timespec="seconds").replace("+00:00", "Z"),
            })  # fmt: skip
        return {"sessions": rows}

    @app.get("/api/sessions/{session_id}", dependencies=[Depends(authorized)])
    def inspect(session_id: str, cwd: str | None = None) -> dict[str, Any]:
        """The ``inspect --json`` report of one session."""
        from compactctl.app.inspect import InspectOptions, inspect_path

        path = index.find(session_id, cwd)
        try:
            report = inspect_path(str(path), InspectOptions())
        except CompactError as exc:
            raise HTTPProblem(_status(exc), exc.message) from None
        return _relative(report, index.root)

    @app.post("/api/sessions/{session_id}/compact", dependencies=[Depends(authorized)])
    def compact(session_id: str, body: CompactBody | None = None) -> dict[str, Any]:
        """Compact one session now (``compact --force`` unless ``force`` is false);
        ``{didCompress, released, promptEstimate, ...}`` as ``compact --json`` per file."""
        from compactctl.app.jobs import compact_path
        from compactctl.app.options import output_options, resolve
        from compactctl.layers.options import CompactOptions

        body = body or CompactBody()
        path = index.find(session_id, body.cwd)
        settings = Settings(table, "compact")
        try:
            flags = {"force": body.force, "model": body.model, "strategy": body.strategy}
            options = resolve(CompactOptions, flags, settings)
            out = output_options(settings, [str(path)], {"db": config.db})
            with config.lock_for(path):
                result = compact_path(str(path), options, out)
        except CompactError as exc:
            raise HTTPProblem(_status(exc), exc.message) from None
        return _relative(context_service_keys(result), index.root)

    return app


def context_service_keys(result: dict[str, Any]) -> dict[str, Any]:
    """``compact --json``'s per-file entry with the three keys Coding Code's context service
    answers first: ``didCompress`` (``changed``), ``released`` (``tokensSaved``) and
    ``promptEstimate`` (``tokensAfter``). The CLI's report says the same in the shared
    vocabulary (docs/report.schema.json); this API keeps the service's names, which its
    clients read.

    >>> sorted(context_service_keys({"changed": True, "tokensSaved": 5, "tokensAfter": 7}).items())
    ... # doctest: +NORMALIZE_WHITESPACE
    [('changed', True), ('didCompress', True), ('promptEstimate', 7), ('released', 5),
     ('tokensAfter', 7), ('tokensSaved', 5)]
    """
    head = {
        "didCompress": bool(result.get("changed")),
        "released": result.get("tokensSaved", 0),
        "promptEstimate": result.get("tokensAfter"),
    }
    return {**head, **result}


def serve(config: ServeConfig, host: str, port: int, announce: Callable[[str], None]) -> None:
    """Listen on ``host:port`` (``port`` 0: a free port) and serve until interrupted.

    ``announce`` gets one line once the socket is bound, with the address actually used
    (``compactctl serve: listening on http://127.0.0.1:PORT ...``).

    Raises:
        UsageError: a non-loopback ``host`` without a token (:func:`check_bind`); the
            address cannot be bound; the root is not a folder.
    """
    import socket

    import uvicorn

    check_bind(host, config.token)
    if not os.path.isdir(config.root):
        raise UsageError(f"--root {config.root} is not a folder")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    bound = sock.getsockname()[1]
    app = BodyLimit(create_app(config), config.max_body)
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    announce(
        f"compactctl serve: listening on http://{shown}:{bound} (root "
        f"{os.path.abspath(config.root)}); "
        f"API docs at http://{shown}:{bound}/docs"
    )
    logging = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    logging["handlers"]["access"]["stream"] = "ext://sys.stderr"  # stdout is for data only
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="info", access_log=True, log_config=logging)
    )
    server.run(sockets=[sock])
