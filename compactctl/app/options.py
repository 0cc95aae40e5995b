"""Options from the command line: flag > environment > config file > default, in one place.

:func:`resolve` builds any options dataclass (the layers' in :mod:`compactctl.layers.options`,
the only place a default lives; :class:`~compactctl.app.jobs.OutputOptions`;
:class:`~compactctl.app.inspect.InspectOptions`) from what the user typed and the settings
(:class:`~compactctl.app.config.Settings`: ``COMPACTCTL_<KEY>`` and the config file), parsing
each value by its field's type. :func:`output_options` adds the checks of ``-o``, ``--as`` and
``--tier`` against the inputs.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
from collections import Counter
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from compactctl.app.config import KNOWN_KEYS, Settings, to_bool
from compactctl.errors import UsageError
from compactctl.io.files import STDIN, Walk, is_stream, same_file, walk
from compactctl.io.native import AS_NATIVE
from compactctl.io.remote import is_url

if TYPE_CHECKING:
    from compactctl.app.jobs import OutputOptions

__all__ = [
    "config_key",
    "data_on_stdout",
    "onepass_options",
    "output_folder",
    "output_options",
    "resolve",
    "walk_inputs",
]

Options = TypeVar("Options")

_PARSERS: dict[str, Callable[[Any], Any]] = {
    "bool": to_bool,
    "int": int,
    "float": float,
    "str": str,
    "tuple[str, ...]": tuple,
}
"""How a config or environment value is parsed, by the field's type (``X | None`` as ``X``).
A tuple of strings is ``tuple(value)``: a TOML array; a plain string gives its characters,
as it always has."""

_UNSET: Any = object()


def config_key(f: dataclasses.Field[Any]) -> str | None:
    """The config key (and ``COMPACTCTL_`` suffix) of an options field, or ``None``.

    The field's name, or the key its metadata names (:func:`compactctl.layers.options.
    setting`); ``None`` when that is not one of :data:`~compactctl.app.config.KNOWN_KEYS`:
    the field is then set by flags and by library callers only.
    """
    key = f.metadata.get("config", f.name)
    return key if key in KNOWN_KEYS else None


def resolve(cls: type[Options], flags: Mapping[str, Any], settings: Settings) -> Options:
    """An options dataclass ``cls`` built from flags, environment, config file and defaults.

    Fields are resolved in their declaration order (so the first bad value is the one
    reported). For each field: its value in ``flags`` when not ``None`` (what the user
    typed, already typed by the command line); else, for a field with a :func:`config_key`,
    :meth:`Settings.get` of that key (``COMPACTCTL_<KEY>``, then the config file), parsed by
    the field's type (:data:`_PARSERS`); else the class default. A configured value of a
    field whose metadata says ``extends`` is added to the default instead of replacing it.

    >>> from compactctl.layers.options import DedupOptions
    >>> s = Settings({"dedup": {"min_chars": 50}}, "dedup", environ={"COMPACTCTL_SCOPE": "tool"})
    >>> resolve(DedupOptions, {"threshold": 0.8}, s)
    DedupOptions(threshold=0.8, scope='tool', min_chars=50, lsh_min_items=300)

    Raises:
        UsageError: an environment or config value cannot be parsed (the message names the
            variable or the key), or ``cls`` rejects the result (its ``__post_init__``).
        TypeError: ``flags`` names a field ``cls`` does not have, or a configurable field
            has a type without a parser (programming errors).
    """
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = set(flags) - set(fields)
    if unknown:
        raise TypeError(f"{cls.__name__} has no field {sorted(unknown)[0]!r}")
    values: dict[str, Any] = {}
    for name, f in fields.items():
        flag = flags.get(name)
        if flag is not None:
            values[name] = flag
            continue
        key = config_key(f)
        if key is None:
            continue
        found = settings.get(key, None, _UNSET, _parser(f))
        if found is not _UNSET:
            values[name] = f.default + found if f.metadata.get("extends") else found
    return cls(**values)


def _parser(f: dataclasses.Field[Any]) -> Callable[[Any], Any]:
    kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
    try:
        return _PARSERS[kind.removesuffix(" | None")]
    except KeyError:
        raise TypeError(f"no parser for field {f.name!r} of type {f.type!r}") from None


def output_folder(output: str | None) -> str | None:
    """``-o``'s value when it names a folder (``-o DIR/``, or an existing directory), else
    ``None`` (a file, ``-``, or no ``-o``)."""
    if output is not None and (
        output.endswith("/") or (not is_url(output) and os.path.isdir(output))
    ):
        return output
    return None


def walk_inputs(settings: Settings, paths: list[str], flags: Mapping[str, Any]) -> Walk:
    """The transcripts a run over PATHS takes (:func:`~compactctl.io.files.walk`), as the run
    walks them: with ``--documents`` (``flags["documents"]``, else the ``documents``
    setting) and the filters (``flags["filters"]``: ``--older-than``, ``--glob``, ...), and
    never inside the ``-o DIR/`` of ``flags["output"]``. Walked once, it serves the
    one-input checks (``-o FILE``, ``convert`` to stdout, ``undo --event``) and the run
    itself (:attr:`~compactctl.app.runner.RunScope.found`).

    Raises:
        UsageError: a time filter with a URL among PATHS.
    """
    folder = output_folder(flags.get("output"))
    documents = settings.get("documents", flags.get("documents"), False, bool)
    return walk(paths, documents=documents, filters=flags.get("filters"),
                skip=[folder] if folder else [])  # fmt: skip


def output_options(
    settings: Settings, paths: list[str], flags: Mapping[str, Any], found: Walk | None = None
) -> OutputOptions:
    """The :class:`~compactctl.app.jobs.OutputOptions` of a run over PATHS.

    Args:
        settings: for ``lock_timeout``, ``torn_wait``, ``db`` and ``documents``.
        paths: the command's PATHS, as typed.
        flags: fields of ``OutputOptions`` as typed (``None``: not given); ``output`` names
            a folder (``-o DIR/`` or an existing directory: :func:`output_folder`) or a
            file. The folder is created unless ``dry_run`` or ``check``; under it each input
            keeps its path relative to the folder of PATHS it was found in (``roots``:
            :func:`~compactctl.app.jobs.mirrored_name`), and the folder itself is never
            searched for inputs.
        found: PATHS as :func:`walk_inputs` walked them for this run, when the caller did
            already; else, with ``-o``, they are walked here.

    Raises:
        UsageError: ``-o FILE`` with several inputs, or naming an input; two inputs with
            the same target under ``-o DIR/`` (files named from two folders), or one that
            would overwrite its input; ``--as`` not canonical or openai, or without
            ``--materialize``; ``--tier`` not L0, L1 or L2; a bad ``lock_timeout`` or
            ``torn_wait`` setting; ``--as native`` (or
            ``claude-code``, ``codex-rollout``: only when ``flags["native_ok"]``, compact's)
            with ``-o`` or ``--materialize``.
    """
    from compactctl.app.jobs import OutputOptions, mirrored_name

    output: str | None = flags.get("output")
    remote = [p for p in paths if is_url(p)]
    if remote and output is None:
        raise UsageError(
            f"{remote[0]} is in object storage, which cannot be appended to: pass -o (a file, "
            "a folder ending in /, or a URL) to write the result there"
        )
    output_dir = output_folder(output)
    if output_dir is not None:
        output = None
        if not (flags.get("dry_run") or flags.get("check")):
            if is_url(output_dir):
                from compactctl.io.remote import makedirs

                makedirs(output_dir)
            else:
                os.makedirs(output_dir, exist_ok=True)
    roots: tuple[str, ...] = ()
    if output is not None or output_dir is not None:
        # the files the run takes: the filters (--older-than, --glob, ...) apply here too
        found = found or walk_inputs(settings, paths, flags)
        files = [f.path for f in found.files]
        roots = tuple(dict.fromkeys(f.root for f in found.files if f.root is not None))
        if output is not None and len(files) > 1:
            raise UsageError(
                f"-o {output} would receive {len(files)} transcripts; give a folder "
                "(-o DIR/) to write one file per input, or omit -o to append in place"
            )
        for f in files:
            if output is not None and f != STDIN and same_file(f, output):
                raise UsageError(
                    f"-o names the input {f} itself; write to another file (compactctl never "
                    "rewrites a transcript), or omit -o to append to a canonical one in place"
                )
        if output_dir is not None:
            targets = [os.path.join(output_dir, mirrored_name(f, roots)) for f in files]
            clash = {t for t, n in Counter(targets).items() if n > 1}
            if clash:
                first = sorted(clash)[0]
                both = [f for f, t in zip(files, targets, strict=True) if t == first]
                raise UsageError(_clash_message(first, both, found))
            for f, t in zip(files, targets, strict=True):
                if f != STDIN and same_file(f, t):
                    raise UsageError(
                        f"-o {output_dir} would overwrite the input {f}; use another dir"
                    )
    as_format = flags.get("as_format") or OutputOptions.as_format
    native = flags.get("native_ok") and as_format in AS_NATIVE
    if native:
        if flags.get("materialize") or output is not None or output_dir is not None:
            raise UsageError(
                f"--as {as_format} writes a new session beside the original, where its agent "
                "finds it: it takes neither -o nor --materialize (-o writes canonical JSONL)"
            )
    elif as_format not in {"canonical", "openai"}:
        more = f"; compact also takes {', '.join(AS_NATIVE)}" if as_format in AS_NATIVE else ""
        raise UsageError(f"--as must be canonical or openai, not {as_format!r}{more}")
    elif as_format != "canonical" and not flags.get("materialize"):
        raise UsageError("--as applies to --materialize only")
    tier = flags.get("tier")
    if tier is not None and tier not in {"L0", "L1", "L2"}:
        raise UsageError(f"--tier must be L0, L1 or L2, not {tier!r}")
    fields = {k: v for k, v in flags.items() if k not in ("native_ok", "documents", "filters")}
    fields.update(output=output, output_dir=output_dir, roots=roots or None)
    return resolve(OutputOptions, fields, settings)


def _clash_message(target: str, inputs: list[str], found: Walk) -> str:
    """Why two (or more) ``inputs`` cannot go to one ``-o DIR/`` ``target``, and how to fix
    it: leave one out with ``--exclude`` (a pattern relative to the folder it was found in,
    and ``'*.gz'`` when the clash is a file and its gzip copy, since ``.gz`` is dropped from
    an output's name), or, for files named from different folders, name the folder that
    holds them (the tree is mirrored) or run them with different ``-o DIR/``.

    >>> from compactctl.io.files import Found, Walk
    >>> w = Walk([Found("t/a/x.jsonl", "t"), Found("t/a/x.jsonl.gz", "t")], [])
    >>> print(_clash_message("o/a/x.jsonl", ["t/a/x.jsonl", "t/a/x.jsonl.gz"], w))
    2 inputs would both be written to o/a/x.jsonl: t/a/x.jsonl and t/a/x.jsonl.gz (-o DIR/ writes uncompressed canonical JSONL, named without .gz); leave one out, e.g. --exclude /a/x.jsonl.gz (or --exclude '*.gz' for every gzip copy)
    """  # noqa: E501
    roots = {f.path: f.root for f in found.files}
    verb = "both" if len(inputs) == 2 else "all"
    head = f"{len(inputs)} inputs would {verb} be written to {target}: {' and '.join(inputs)}"
    gz = [f for f in inputs if f.endswith(".gz")]
    if gz and len(gz) < len(inputs):
        head += " (-o DIR/ writes uncompressed canonical JSONL, named without .gz)"
    walked = [f for f in inputs if roots.get(f) is not None]
    if walked:
        example = next((f for f in gz if f in walked), walked[-1])
        rel = "/" + os.path.relpath(example, roots[example]).replace(os.sep, "/")
        how = f"leave one out, e.g. --exclude {shlex.quote(rel)}"
        if gz and len(gz) < len(inputs):
            how += " (or --exclude '*.gz' for every gzip copy)"
    else:
        how = (
            "name the folder that holds them instead (-o DIR/ mirrors a folder's tree), or "
            "write them in separate runs to different -o folders"
        )
    return f"{head}; {how}"


def data_on_stdout(out: OutputOptions, paths: list[str]) -> bool:
    """Whether a transcript-changing run writes transcript data to stdout (its ``--json``
    report then goes to stderr): ``-o -``, ``--materialize``, or a stream among PATHS
    (``-``, a FIFO, ``/dev/stdin``: :func:`~compactctl.io.files.is_stream`)."""
    if out.output is not None:
        return out.output == STDIN
    return out.output_dir is None and (out.materialize or any(is_stream(p) for p in paths))


def onepass_options(layers: str, compact: Any, settings: Settings, *, by_rule: bool) -> Any:
    """The :class:`~compactctl.layers.onepass.OnePassOptions` of ``compact --layers LAYERS``.

    Args:
        layers: the ``--layers`` value (:func:`compactctl.layers.onepass.parse_layers`).
        compact: the resolved :class:`~compactctl.layers.options.CompactOptions` (micro and
            summary, from ``compact``'s flags).
        settings: ``compact``'s settings; rules, dedup and tiers read theirs from their own
            command's table of the config file (``[rules]``, ...), as their commands do.
        by_rule: the rules report's per-rule savings (shown unless ``-q``).

    Raises:
        UsageError: an unknown layer name (the message lists the valid ones) or a bad
            setting.
    """
    from compactctl.layers.onepass import OnePassOptions, parse_layers
    from compactctl.layers.options import DedupOptions, RulesOptions, TiersOptions

    names = parse_layers(layers)
    if compact.micro_only or not compact.micro_enabled:
        raise UsageError(
            "--layers names the layers that run: leave out --micro-only and --no-micro "
            "(--layers micro runs micro compaction alone, --layers summary the summary alone)"
        )
    rules = resolve(RulesOptions, {"by_rule": by_rule}, settings.for_command("rules"))
    try:
        rules.chosen()
    except KeyError as exc:
        raise UsageError(str(exc.args[0]) + " (see compactctl rules --list)") from None
    return OnePassOptions(
        layers=names,
        rules=rules,
        dedup=resolve(DedupOptions, {}, settings.for_command("dedup")),
        compact=compact,
        tiers=resolve(TiersOptions, {}, settings.for_command("tiers")),
    )
