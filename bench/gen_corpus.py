"""A corpus of realistic canonical sessions (docs/design.md section 3) for ``make bench``.

Each session is one coding-agent run on a made-up repository: a user asks for a fix, the
assistant reads files, greps, edits, runs the tests and the build, and reports. What the
layers and the benchmark care about is all there:

- tool outputs from 50 B (``edit_file``, ``update_plan`` confirmations) to 60 KB (big source
  files, build logs);
- files read again later, unchanged (exact duplicates) or after an edit (near duplicates);
- test runs repeated with small differences (near duplicates), ANSI colours and ``\\r``
  progress redraws in logs, ``ls -la`` and ``git log`` listings, grep hits, diffs;
- code in Python, TypeScript and Go; Markdown tables, bullet lists and emoji in the assistant's
  reports; CJK sessions (user, assistant and comments in Chinese), the odd image part.

Session sizes vary (log-uniform, from a few KB to ``max_session_mb``), so that a corpus holds
many small sessions and a few large ones. Everything is deterministic by seed: the same
arguments write the same bytes.

    .venv/bin/python -m bench.gen_corpus bench/corpus/demo --mb 20 --seed 1
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import random
import sys
import uuid as uuidlib
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson

__all__ = ["GENERATOR_VERSION", "session_lines", "session_sizes", "write_corpus"]

GENERATOR_VERSION = 1
"""Bump when the bytes a seed produces change (cached corpora are then rebuilt)."""


def _split(words: str) -> list[str]:
    return words.split()


_WORDS = _split(
    "cache config parser record entry window ledger token buffer stream session writer reader "
    "index batch queue worker router handler client server request response payload schema "
    "field value offset limit page cursor filter mapper reducer loader store bucket shard "
    "replica lease lock retry backoff timeout deadline budget metric counter gauge span trace "
    "event signal channel socket frame packet header footer encoder decoder codec format "
    "layout render widget panel report export import migrate upgrade rollback commit branch "
    "merge rebase patch diff hunk line column table row cell key item node edge graph path "
    "route plan task step stage phase job run build test check lint format deploy release"
)
_VERBS = _split(
    "load save parse read write open close flush sync merge split apply build render check "
    "validate resolve compute update create delete fetch send receive encode decode format "
    "normalize collect group sort filter map reduce emit handle retry schedule"
)
_PROSE = _split(
    "the a of to in and is for on with that this it as be by at from was not we can should "
    "will now then when because so but if only still also again first next last new old "
    "value test file function error case result change fix bug problem reason step call"
)
_CJK_PHRASES = _split(
    "先复现问题 再修改代码 测试通过了 这个函数 配置文件 缓存目录 环境变量 应该优先 "
    "不要重命名 保持兼容 解析时间戳 时区偏移 边界情况 回退到旧格式 分页逻辑 最后一页 "
    "重复条目 根本原因 修复方案 单元测试 集成测试 构建失败 依赖版本 日志输出 性能问题 "
    "内存占用 并发写入 文件锁 增量更新 迁移说明 发布之前 待办事项 已完成 进行中"
)
_CJK_PUNCT = ("，", "。", "；", "：", "！", "？")
_EMOJI = ("✅", "🚀", "⚠️", "🐛", "📝", "✨", "🔧", "❌")
_TOOLS_PY = ("pytest", "ruff", "mypy")
_MODELS = (
    ("gpt-4o", 128000),
    ("claude-sonnet-4-5", 200000),
    ("gpt-4.1-mini", 1047576),
    ("claude-opus-4-1", 200000),
)
_ANSI = ("\x1b[32m", "\x1b[31m", "\x1b[33m", "\x1b[1m", "\x1b[36m", "\x1b[2m")
_RESET = "\x1b[0m"


def _uuid(rng: random.Random) -> str:
    return str(uuidlib.UUID(int=rng.getrandbits(128), version=4))


def _call_id(rng: random.Random) -> str:
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    return "call_" + "".join(rng.choices(alphabet, k=24))


@dataclass
class _File:
    path: str
    lang: str
    lines: list[str]

    @property
    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


@dataclass
class _Project:
    name: str
    cjk: bool
    files: list[_File] = field(default_factory=list)
    tests: list[str] = field(default_factory=list)


class _Writer:
    """Fresh text of every kind, from one seeded generator."""

    def __init__(self, rng: random.Random, cjk: bool) -> None:
        self.rng = rng
        self.cjk = cjk

    # -- words ------------------------------------------------------------------------------

    def ident(self) -> str:
        r = self.rng
        n = r.choice((1, 2, 2, 3))
        return "_".join(r.choices(_WORDS, k=n))

    def camel(self) -> str:
        parts = self.rng.choices(_WORDS, k=self.rng.choice((1, 2, 3)))
        return parts[0] + "".join(p.capitalize() for p in parts[1:])

    def sentence(self, lo: int = 6, hi: int = 16) -> str:
        r = self.rng
        words = [
            r.choice(_PROSE) if r.random() < 0.55 else r.choice(_WORDS)
            for _ in range(r.randint(lo, hi))
        ]
        return " ".join(words).capitalize() + r.choice("....!?")

    def cjk_sentence(self) -> str:
        r = self.rng
        parts = r.choices(_CJK_PHRASES, k=r.randint(2, 6))
        out = ""
        for i, p in enumerate(parts):
            out += p
            if r.random() < 0.2:
                out += f" `{self.ident()}` "
            out += r.choice(_CJK_PUNCT[:3]) if i < len(parts) - 1 else "。"
        return out

    def prose(self, sentences: int) -> str:
        if self.cjk and self.rng.random() < 0.7:
            return "".join(self.cjk_sentence() for _ in range(sentences))
        return " ".join(self.sentence() for _ in range(sentences))

    # -- code -------------------------------------------------------------------------------

    def _py_block(self) -> list[str]:
        r = self.rng
        name, args = self.ident(), ", ".join(r.choices(_WORDS, k=r.randint(1, 3)))
        doc = self.cjk_sentence() if self.cjk and r.random() < 0.5 else self.sentence()
        out = ["", "", f"def {r.choice(_VERBS)}_{name}({args}):", f'    """{doc}"""']
        for _ in range(r.randint(2, 12)):
            var = self.ident()
            out.extend(
                r.choice(
                    (
                        [f"    {var} = {self.ident()}({args})"],
                        [f"    if {var} is None:", f"        return {r.randint(0, 99)}"],
                        [f"    for {var} in {self.ident()}:", f"        {var}.{self.ident()}()"],
                        [f"    # {self.sentence(4, 9)}"],
                        [f'    logger.debug("{r.choice(_VERBS)} %s", {var})'],
                        [f"    {var} += len({self.ident()})"],
                    )
                )
            )
        out.append(f"    return {self.ident()}")
        return out

    def _ts_block(self) -> list[str]:
        r = self.rng
        name = self.camel()
        head = f"export function {r.choice(_VERBS)}{name.capitalize()}(input: Input): Output {{"
        out = ["", head]
        for _ in range(r.randint(2, 10)):
            v = self.camel()
            out.append(
                r.choice(
                    (
                        f"  const {v} = input.{self.camel()} ?? {r.randint(0, 99)};",
                        f"  if (!{v}) {{ return {{ ok: false }}; }}",
                        f"  // {self.sentence(4, 9)}",
                        f"  await {self.camel()}({v}, {{ retries: {r.randint(1, 5)} }});",
                    )
                )
            )
        out.append(f"  return {{ ok: true, {self.camel()}: {self.camel()} }};")
        out.append("}")
        return out

    def _go_block(self) -> list[str]:
        r = self.rng
        name = self.camel().capitalize()
        out = ["", f"func (s *Server) {name}(ctx context.Context, req *Request) error {{"]
        for _ in range(r.randint(2, 10)):
            v = self.camel()
            out.append(
                r.choice(
                    (
                        f"\t{v}, err := s.{self.camel().capitalize()}(ctx, req.{name})",
                        '\tif err != nil {\n\t\treturn fmt.Errorf("%w", err)\n\t}',
                        f"\t// {self.sentence(4, 9)}",
                        f"\ts.metrics.{self.camel().capitalize()}.Inc()",
                    )
                )
            )
        out.append("\treturn nil")
        out.append("}")
        return out

    def source_file(self, path: str, lang: str, size: int) -> _File:
        r = self.rng
        if lang == "py":
            lines = ['"""' + self.sentence(4, 10) + '"""', "from __future__ import annotations", ""]
            lines += [f"import {w}" for w in sorted(set(r.choices(_WORDS, k=r.randint(2, 6))))]
            block = self._py_block
        elif lang == "ts":
            lines = [f"import {{ {self.camel()} }} from './{self.ident()}';"]
            block = self._ts_block
        else:
            lines = ["package main", "", 'import (\n\t"context"\n\t"fmt"\n)']
            block = self._go_block
        total = sum(len(x) + 1 for x in lines)
        while total < size:
            for line in block():
                lines.append(line)
                total += len(line) + 1
        return _File(path, lang, lines)

    def doc_file(self, path: str, size: int) -> _File:
        r = self.rng
        lines = [f"# {self.ident().replace('_', ' ').title()}", ""]
        total = 0
        while total < size:
            kind = r.random()
            if kind < 0.3:
                block = [f"## {self.ident().replace('_', ' ').title()}", "", self.prose(3), ""]
            elif kind < 0.55:
                block = self.table(r.randint(3, 12)) + [""]
            elif kind < 0.8:
                block = [f"- {self.sentence(3, 8)}" for _ in range(r.randint(3, 7))] + [""]
            else:
                block = ["```bash", f"{self.ident()} --{self.ident()} {r.randint(1, 9)}", "```", ""]
            lines += block
            total += sum(len(x) + 1 for x in block)
        return _File(path, "md", lines)

    def table(self, rows: int) -> list[str]:
        r = self.rng
        cols = r.randint(2, 5)
        head = [self.ident() for _ in range(cols)]
        out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
        for _ in range(rows):
            cells = [
                r.choice((self.ident(), str(r.randint(0, 9999)), f"`{self.ident()}`", "yes", "no"))
                for _ in head
            ]
            out.append("| " + " | ".join(cells) + " |")
        return out

    # -- tool outputs -----------------------------------------------------------------------

    def pytest_output(self, tests: list[str], failing: set[str], color: bool) -> str:
        r = self.rng
        out = ["=" * 30 + " test session starts " + "=" * 29]
        out.append(f"platform linux -- Python 3.11.7, pytest-8.3.{r.randint(0, 5)}, pluggy-1.5.0")
        out.append(f"collected {len(tests)} items")
        out.append("")
        row = ""
        for t in tests:
            row += "F" if t in failing else "."
            if len(row) == 72:
                out.append(row + f" [{r.randint(1, 99):3d}%]")
                row = ""
        if row:
            out.append(row.ljust(72) + " [100%]")
        for t in sorted(failing):
            out.append("")
            out.append("_" * 20 + f" {t.split('::')[-1]} " + "_" * 20)
            out.append("")
            for _ in range(r.randint(4, 14)):
                out.append(f"    {self.ident()} = {self.ident()}({self.ident()})")
            out.append(f">       assert {self.ident()} == {r.randint(0, 99)}")
            out.append(f"E       AssertionError: assert {r.randint(0, 99)} == {r.randint(0, 99)}")
            out.append("")
            out.append(f"{t.split('::')[0]}:{r.randint(10, 400)}: AssertionError")
        secs = f"{r.uniform(0.2, 30):.2f}s"
        summary = (
            f"{len(failing)} failed, {len(tests) - len(failing)} passed in {secs}"
            if failing
            else f"{len(tests)} passed in {secs}"
        )
        if color:
            summary = ("\x1b[31m" if failing else "\x1b[32m") + summary + _RESET
        out.append("=" * 20 + " " + summary + " " + "=" * 20)
        return "\n".join(out)

    def build_log(self, size: int) -> str:
        r = self.rng
        out: list[str] = []
        total = 0
        step = 0
        while total < size:
            step += 1
            kind = r.random()
            if kind < 0.25:
                bar = ""
                for pct in range(0, 101, r.choice((5, 10, 20))):
                    filled = "#" * (pct // 5)
                    bar += f"\r[{filled:<20}] {pct:3d}% {self.ident()}"
                line = bar
            elif kind < 0.6:
                color = r.choice(_ANSI)
                line = (
                    f"{color}{r.choice(('INFO', 'WARN', 'DEBUG', 'ERROR')):5}{_RESET} "
                    f"[{self.ident()}] {r.choice(_VERBS)} {self.ident()} "
                    f"in {r.randint(1, 900)}ms"
                )
            elif kind < 0.8:
                line = (
                    f"  Compiling {self.ident()} v{r.randint(0, 3)}.{r.randint(0, 30)}."
                    f"{r.randint(0, 9)}"
                )
            else:
                package = f"{self.ident()}@{r.randint(1, 9)}.0.0"
                line = f"npm WARN deprecated {package}: {self.sentence()}"
            out.append(line)
            total += len(line) + 1
        return "\n".join(out)

    def listing(self, project: _Project) -> str:
        r = self.rng
        out = [f"total {r.randint(8, 400)}"]
        for f in project.files[: r.randint(3, 40)]:
            mode = r.choice(("-rw-r--r--", "-rwxr-xr-x"))
            size = sum(len(x) + 1 for x in f.lines)
            day, minute = r.randint(1, 28), r.randint(10, 59)
            out.append(f"{mode} 1 dev staff {size:>7} Jun {day:>2} 10:{minute} {f.path}")
        return "\n".join(out)

    def git_log(self) -> str:
        r = self.rng
        return "\n".join(
            f"{r.getrandbits(28):07x} {self.sentence(3, 8)}" for _ in range(r.randint(3, 15))
        )

    def grep(self, project: _Project, pattern: str) -> str:
        r = self.rng
        hits = []
        for f in r.sample(project.files, min(len(project.files), r.randint(1, 8))):
            for _ in range(r.randint(1, 6)):
                i = r.randrange(len(f.lines))
                hits.append(f"{f.path}:{i + 1}:{f.lines[i][:160]}")
        return "\n".join(hits) if hits else f"no matches for {pattern}"

    def json_blob(self, size: int) -> str:
        r = self.rng
        records = []
        total = 0
        while total < size:
            rec = {
                "id": r.randint(1, 10**6),
                "name": self.ident(),
                "status": r.choice(("ok", "failed", "pending")),
                "tags": r.choices(_WORDS, k=r.randint(0, 4)),
                "score": round(r.random(), 4),
            }
            if self.cjk and r.random() < 0.3:
                rec["note"] = self.cjk_sentence()
            records.append(rec)
            total += 90
        return json.dumps({"items": records, "total": len(records)}, ensure_ascii=False, indent=2)


def _lognormal_size(rng: random.Random, lo: int, hi: int, mu: float, sigma: float) -> int:
    return max(lo, min(hi, int(math.exp(rng.gauss(mu, sigma)))))


def _make_project(w: _Writer, scale: float) -> _Project:
    """A repository: source files (200 B - 60 KB), docs, and a test list."""
    r = w.rng
    project = _Project(name=w.ident().replace("_", "-"), cjk=w.cjk)
    lang = r.choice(("py", "py", "ts", "go"))
    ext = {"py": ".py", "ts": ".ts", "go": ".go"}[lang]
    n_files = max(3, min(40, int(6 + 30 * scale)))
    for i in range(n_files):
        folder = r.choice(("src", "src/core", "lib", "tests", "internal"))
        if i % 7 == 6:
            path = f"docs/{w.ident()}.md"
            size = _lognormal_size(r, 200, 60_000, 7.5, 1.0)
            project.files.append(w.doc_file(path, size))
        else:
            path = f"{folder}/{w.ident()}{ext}"
            size = _lognormal_size(r, 200, 60_000, 8.3, 1.0)
            project.files.append(w.source_file(path, lang, size))
    project.tests = [
        f"tests/test_{w.ident()}.py::test_{w.ident()}" for _ in range(r.randint(8, 300))
    ]
    return project


class _Session:
    """Writes one session's lines; tracks bytes so the caller can stop at a target size."""

    def __init__(self, rng: random.Random, cjk: bool, target: int) -> None:
        self.rng = rng
        self.w = _Writer(rng, cjk)
        self.time = datetime(2025, 1, 1, tzinfo=UTC) + timedelta(seconds=rng.randrange(3 * 10**7))
        self.turn = 0
        self.size = 0
        self.lines: list[bytes] = []
        self.project = _make_project(self.w, min(1.0, target / 8_000_000))
        self.failing: set[str] = set(
            rng.sample(self.project.tests, min(3, len(self.project.tests)))
        )

    def _stamp(self, lo: float, hi: float) -> str:
        self.time += timedelta(seconds=self.rng.uniform(lo, hi))
        return self.time.strftime("%Y-%m-%dT%H:%M:%S.") + f"{self.time.microsecond // 1000:03d}Z"

    def _emit(self, record: dict[str, object]) -> None:
        line = orjson.dumps(record)
        self.lines.append(line)
        self.size += len(line) + 1

    def message(self, role: str, content: object, **extra: object) -> None:
        rec: dict[str, object] = {
            "type": "message",
            "uuid": _uuid(self.rng),
            "turnId": self.turn,
            "role": role,
            "content": content,
        }
        rec.update(extra)
        rec["timestamp"] = self._stamp(0.05, 4.0)
        self._emit(rec)

    def header(self) -> None:
        model, window = self.rng.choice(_MODELS)
        self._emit(
            {
                "type": "session",
                "uuid": _uuid(self.rng),
                "sessionId": _uuid(self.rng),
                "model": model,
                "contextWindow": window,
                "timestamp": self._stamp(0, 1),
            }
        )
        system = (
            "You are a coding agent working inside the user's repository at "
            f"/home/dev/work/{self.project.name}. " + self.w.prose(6) + "\n\nTools:\n"
            "- read_file(path): return the text of a file.\n- grep(pattern, path): search.\n"
            "- edit_file(path, old_string, new_string): replace one exact occurrence.\n"
            "- bash(command): run a command in the repository root.\n"
            "- update_plan(plan): keep a short checklist."
        )
        self.message("system", system)

    def user(self) -> None:
        self.turn += 1
        w, r = self.w, self.rng
        text = w.prose(r.randint(1, 4))
        if r.random() < 0.5:
            text += (
                "\n\n请不要修改公共接口。" if w.cjk else "\n\nPlease do not change the public API."
            )
        if r.random() < 0.04:
            data = base64.b64encode(r.randbytes(r.randint(2_000, 20_000))).decode()
            content: object = [
                {"type": "text", "text": text},
                {"type": "image", "mediaType": "image/png", "data": data},
            ]
        else:
            content = text
        self.time += timedelta(seconds=r.uniform(30, 900))
        self.message("user", content)

    def tool_round(self) -> None:
        """One assistant message with 1-3 tool calls, and their results."""
        r, w, p = self.rng, self.w, self.project
        calls = []
        results = []
        for _ in range(r.choice((1, 1, 1, 2, 3))):
            cid = _call_id(r)
            kind = r.random()
            error = False
            if kind < 0.34:
                f = r.choice(p.files)
                name, args, out = "read_file", {"path": f.path}, f.text
            elif kind < 0.5:
                name = "bash"
                args = {"command": f"python -m pytest -q {r.choice(('', 'tests/', '-x'))}".strip()}
                out = w.pytest_output(p.tests, self.failing, color=r.random() < 0.5)
                error = bool(self.failing)
            elif kind < 0.58:
                name, args = "bash", {"command": r.choice(("npm run build", "cargo build", "make"))}
                out = w.build_log(_lognormal_size(r, 300, 60_000, 8.0, 1.2))
            elif kind < 0.64:
                name, args = "bash", {"command": r.choice(("ls -la", "ls -la src", "git status"))}
                out = w.listing(p)
            elif kind < 0.68:
                name, args = "bash", {"command": "git log --oneline -n 15"}
                out = w.git_log()
            elif kind < 0.78:
                pattern = w.ident()
                name, args = "grep", {"pattern": pattern, "path": "."}
                out = w.grep(p, pattern)
            elif kind < 0.9:
                f = r.choice(p.files)
                i = r.randrange(len(f.lines))
                old = f.lines[i]
                new = old + f"  # {w.ident()}" if f.lang == "py" else old + " "
                f.lines[i] = new
                if r.random() < 0.3 and len(f.lines) > 20:
                    j = r.randrange(len(f.lines) - 5)
                    del f.lines[j : j + r.randint(1, 4)]
                if self.failing and r.random() < 0.5:
                    self.failing.discard(min(self.failing))
                name = "edit_file"
                args = {"path": f.path, "old_string": old, "new_string": new}
                out = f"Edited {f.path}: replaced 1 occurrence (1 line(s) -> 1)."
            elif kind < 0.95:
                name = "update_plan"
                steps = [{"step": w.sentence(2, 5), "status": "pending"} for _ in range(3)]
                args = {"plan": steps}
                out = f"Plan updated: {len(steps)} step(s) (0 in progress, 3 pending)."
            else:
                name, args = "bash", {"command": f"curl -s localhost:8080/api/{w.ident()}"}
                out = w.json_blob(_lognormal_size(r, 100, 40_000, 7.0, 1.2))
            calls.append({"id": cid, "name": name, "arguments": args})
            results.append((cid, name, out, error))
        lead = w.prose(1) if r.random() < 0.5 else ""
        self.message("assistant", lead, toolCalls=calls)
        for cid, name, out, error in results:
            extra: dict[str, object] = {"toolCallId": cid, "toolName": name}
            if error:
                extra["isError"] = True
            self.message("tool", out, **extra)

    def report(self) -> None:
        r, w = self.rng, self.w
        parts = [w.prose(2), ""]
        if r.random() < 0.6:
            parts += w.table(r.randint(2, 8)) + [""]
        bullets = [f"- {r.choice(_EMOJI)} {w.sentence(3, 7)}" for _ in range(r.randint(2, 6))]
        parts += bullets + ["", "", "", w.prose(1) + " " + r.choice(_EMOJI)]
        self.message("assistant", "\n".join(parts))


def session_lines(seed: int, target_bytes: int, *, cjk: bool | None = None) -> list[bytes]:
    """The lines (without ``\\n``) of one session of about ``target_bytes`` bytes.

    The session stops after the turn that reaches ``target_bytes`` (a turn is a user message,
    3-30 tool rounds and a report), so it may overshoot by one turn.
    """
    rng = random.Random(seed)
    if cjk is None:
        cjk = rng.random() < 0.2
    s = _Session(rng, cjk, target_bytes)
    if rng.random() < 0.9:
        s.header()
    while s.size < target_bytes:
        s.user()
        for _ in range(rng.randint(3, 30)):
            s.tool_round()
            if s.size >= target_bytes * 1.05:
                break
        s.report()
    return s.lines


def session_sizes(
    total_bytes: int, seed: int, *, max_bytes: int, min_bytes: int = 4_000
) -> list[int]:
    """Target sizes of the sessions: log-uniform in [min_bytes, max_bytes], summing to about
    ``total_bytes``."""
    rng = random.Random(seed ^ 0x5EED)
    sizes: list[int] = []
    left = total_bytes
    lo, hi = math.log(min_bytes), math.log(max(max_bytes, min_bytes + 1))
    while left > 0:
        size = min(int(math.exp(rng.uniform(lo, hi))), max(left, min_bytes))
        sizes.append(size)
        left -= size
    return sizes


def write_corpus(
    folder: Path,
    *,
    total_mb: float,
    seed: int = 1,
    max_session_mb: float = 12.0,
    min_session_kb: float = 4.0,
    prefix: str = "session",
) -> list[Path]:
    """Write sessions totalling about ``total_mb`` MB (10^6 bytes) into ``folder``.

    Returns the files, in order. A ``manifest.json`` records the arguments and
    :data:`GENERATOR_VERSION`; if it matches, the existing files are reused.
    """
    folder.mkdir(parents=True, exist_ok=True)
    args = {
        "version": GENERATOR_VERSION,
        "total_mb": total_mb,
        "seed": seed,
        "max_session_mb": max_session_mb,
        "min_session_kb": min_session_kb,
        "prefix": prefix,
    }
    manifest = folder / "manifest.json"
    if manifest.exists():
        try:
            old = json.loads(manifest.read_text())
        except ValueError:
            old = {}
        if old.get("args") == args and all((folder / f).exists() for f in old.get("files", [])):
            return [folder / f for f in old["files"]]
    for stale in folder.glob(f"{prefix}-*.jsonl"):
        stale.unlink()
    sizes = session_sizes(
        int(total_mb * 1e6),
        seed,
        max_bytes=int(max_session_mb * 1e6),
        min_bytes=int(min_session_kb * 1e3),
    )
    files = []
    for i, size in enumerate(sizes):
        path = folder / f"{prefix}-{i:05d}.jsonl"
        lines = session_lines(seed * 1_000_003 + i, size)
        path.write_bytes(b"\n".join(lines) + b"\n")
        files.append(path)
    manifest.write_text(json.dumps({"args": args, "files": [f.name for f in files]}, indent=1))
    return files


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--mb", type=float, default=20.0, help="total size in MB (default 20)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-session-mb", type=float, default=12.0)
    parser.add_argument("--min-session-kb", type=float, default=4.0)
    args = parser.parse_args(argv)
    files = write_corpus(
        args.folder,
        total_mb=args.mb,
        seed=args.seed,
        max_session_mb=args.max_session_mb,
        min_session_kb=args.min_session_kb,
    )
    total = sum(f.stat().st_size for f in files)
    print(f"{len(files)} sessions, {total / 1e6:.1f} MB in {args.folder}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
