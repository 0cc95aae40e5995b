"""Settings: flag > environment (``COMPACTCTL_*``) > config file (TOML) > default.

The config file is ``--config PATH``, else ``$COMPACTCTL_CONFIG``, else
``<user config dir>/compactctl/config.toml`` when it exists (``platformdirs``: on Linux
``$XDG_CONFIG_HOME/compactctl/config.toml``). Keys are the long option names with ``_``
(``keep_recent = 10``); a table per command overrides the top level
(``[compact] model = "openai/gpt-4o-mini"``). The environment variable of a key is
``COMPACTCTL_`` + the key in upper case (``COMPACTCTL_MODEL``).

:meth:`Settings.get` resolves one key; :func:`compactctl.app.options.resolve` builds a whole
options dataclass with it, parsing each value by the field's type (booleans by
:func:`to_bool`).
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar, cast

from compactctl.errors import UsageError

__all__ = [
    "KNOWN_KEYS",
    "COMMANDS",
    "Settings",
    "default_config_path",
    "load_config",
    "to_bool",
    "unknown_keys",
]

KNOWN_KEYS = frozenset(
    {
        "context_window", "dask", "db", "documents", "encoding", "input_token_threshold",
        "instructions", "jobs", "keep_recent", "keep_recent_tokens", "keep_turns",
        "lock_timeout", "max_summary_chars", "max_summary_tokens", "micro_trigger",
        "min_chars", "min_saving", "model", "num_retries", "pin_patterns", "preserve",
        "redact", "scope", "strategy", "summary_format", "summary_trigger", "threshold",
        "tiers_model", "timeout", "torn_wait",
    }
)  # fmt: skip
"""Every key a config file may set (the long option names with ``_``, plus config-only
``max_summary_tokens``, ``pin_patterns``, ``preserve``, ``redact``, ``tiers_model``)."""

COMMANDS = frozenset({"inspect", "compact", "rules", "dedup", "tiers", "convert", "eval"})
"""The tables a config file may have, one per command."""


def unknown_keys(table: Mapping[str, Any]) -> list[str]:
    """The keys of a parsed config file that compactctl does not know (typos), dotted.

    >>> unknown_keys({"model": "x", "compact": {"keep_recnt": 3}, "tiers": {"tier": 1}})
    ['compact.keep_recnt', 'tiers.tier']
    """
    out = []
    for key, value in table.items():
        if isinstance(value, dict):
            if key not in COMMANDS:
                out.append(f"[{key}]")
                continue
            out.extend(f"{key}.{k}" for k in value if k not in KNOWN_KEYS)
        elif key not in KNOWN_KEYS:
            out.append(key)
    return out


T = TypeVar("T")


def default_config_path() -> Path:
    """``<user config dir>/compactctl/config.toml`` (it need not exist)."""
    import platformdirs

    return Path(platformdirs.user_config_dir("compactctl")) / "config.toml"


def load_config(path: str | None) -> tuple[dict[str, Any], str | None]:
    """Read the TOML config file.

    Args:
        path: an explicit path (``--config``), or ``None`` for ``$COMPACTCTL_CONFIG`` or the
            default location (a missing default file is not an error).

    Returns:
        ``(table, path_used)``; ``({}, None)`` when there is no config file.

    Raises:
        UsageError: an explicit file is missing or is not valid TOML (the message gives the
            file and the parser's line and column).
    """
    explicit = path or os.environ.get("COMPACTCTL_CONFIG")
    p = Path(explicit) if explicit else default_config_path()
    if not p.is_file():
        if explicit:
            raise UsageError("config file not found; fix the path or drop --config", path=str(p))
        return {}, None
    try:
        with open(p, "rb") as fh:
            return tomllib.load(fh), str(p)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"invalid TOML: {exc}", path=str(p)) from None
    except OSError as exc:
        raise UsageError(f"cannot read config: {exc.strerror}", path=str(p)) from None


class Settings:
    """Resolves one setting at a time with the documented precedence.

    Args:
        table: the parsed config file.
        command: the subcommand, whose ``[command]`` table overrides the top level.
        environ: the environment (``os.environ`` by default).
        source: the config file's path, named in the message of a value that cannot be
            parsed (``None``: no file, or not known).
    """

    def __init__(
        self,
        table: Mapping[str, Any],
        command: str,
        environ: Mapping[str, str] | None = None,
        source: str | None = None,
    ) -> None:
        self._table, self._environ, self._source = table, environ, source
        self._command = command
        section = table.get(command)
        self._file = {k: v for k, v in table.items() if not isinstance(v, dict)}
        if isinstance(section, dict):
            self._file.update(section)
        self._tables = {k: v for k, v in table.items() if isinstance(v, dict)}
        self._env = os.environ if environ is None else environ

    def for_command(self, command: str) -> Settings:
        """The same config file and environment, with ``[command]``'s table over the top
        level (``compact --layers`` reads each layer's options as its own command would)."""
        return Settings(self._table, command, self._environ, self._source)

    def get(self, key: str, flag: T | None, default: T, convert: Callable[[Any], T]) -> T:
        """The value of ``key``: ``flag`` if given, else env, else config file, else default.

        An environment or config value is parsed by ``convert`` (``bool`` by
        :func:`to_bool`, so ``COMPACTCTL_REDACT=0`` is false).

        Raises:
            UsageError: the env or config value cannot be converted (names the source).
        """
        if flag is not None:
            return flag
        if convert is bool:  # bool("0") is True: a boolean is parsed from its words
            convert = cast(Callable[[Any], T], to_bool)
        env_name = "COMPACTCTL_" + key.upper()
        if env_name in self._env:
            value = self._env[env_name]
            try:
                return convert(value)
            except (TypeError, ValueError) as exc:
                raise UsageError(
                    f"environment {env_name}={value!r}: {_expected(convert, exc)}; fix or unset it"
                ) from None
        if key in self._file:
            value = self._file[key]
            try:
                return convert(value)
            except (TypeError, ValueError) as exc:
                table = self._command if key in self._tables.get(self._command, {}) else None
                where = f"[{table}] " if table else ""
                raise UsageError(
                    f"config {self._source or 'file'}: {where}{key} = {value!r}: "
                    f"{_expected(convert, exc)}; fix the value or remove the key"
                ) from None
        return default

    def table(self, name: str) -> dict[str, Any]:
        """A whole sub-table of the config file (e.g. ``[tools]``), or ``{}``."""
        return dict(self._tables.get(name, {}))


def _expected(convert: Callable[[Any], Any], exc: Exception) -> str:
    """What a setting's value must be, in words, by its parser; for another parser, its own
    error's message (``exc``).

    >>> _expected(int, ValueError()), _expected(float, ValueError())
    ('expected a whole number (e.g. 10)', 'expected a number (e.g. 0.5)')
    >>> _expected(to_bool, ValueError())
    'expected true or false (or 1/0, yes/no, on/off)'
    """
    if convert is int:
        return "expected a whole number (e.g. 10)"
    if convert is float:
        return "expected a number (e.g. 0.5)"
    if convert is to_bool:
        return "expected true or false (or 1/0, yes/no, on/off)"
    if convert is tuple:
        return 'expected a list of strings (e.g. ["a", "b"])'
    return str(exc)


def to_bool(value: Any) -> bool:
    """Parse a boolean from TOML or an environment string (1/0, true/false, yes/no, on/off).

    Raises:
        ValueError: anything else.
    """
    if isinstance(value, bool):
        return value
    s = str(value).strip().lower()
    if s in {"1", "true", "yes", "on"}:
        return True
    if s in {"0", "false", "no", "off", ""}:
        return False
    raise ValueError(f"not a boolean: {value!r}")
