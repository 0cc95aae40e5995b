"""One option model: ``resolve`` (flag > environment > config file > default), typed parsing,
and the defaults of the layers' options dataclasses as the only source of ``--help``'s."""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import pytest
from typer.testing import CliRunner

from compactctl.app.config import KNOWN_KEYS, Settings
from compactctl.app.options import config_key, resolve
from compactctl.cli import app
from compactctl.errors import UsageError
from compactctl.layers.options import (
    DEFAULT_PIN_PATTERNS,
    CompactOptions,
    DedupOptions,
    MicroParams,
    RulesOptions,
    TiersOptions,
)

LAYER_OPTIONS = (CompactOptions, DedupOptions, MicroParams, RulesOptions, TiersOptions)


def _settings(
    table: dict[str, Any] | None = None, env: dict[str, str] | None = None, command: str = "compact"
) -> Settings:
    return Settings(table or {}, command, environ=env or {})


def test_flag_beats_env_beats_config_beats_default() -> None:
    table = {"keep_recent": 4}
    env = {"COMPACTCTL_KEEP_RECENT": "3"}
    assert resolve(CompactOptions, {}, _settings()).keep_recent == 10  # the default
    assert resolve(CompactOptions, {}, _settings(table)).keep_recent == 4
    assert resolve(CompactOptions, {}, _settings(table, env)).keep_recent == 3
    assert resolve(CompactOptions, {"keep_recent": 2}, _settings(table, env)).keep_recent == 2


def test_none_is_not_a_flag_and_a_flag_is_taken_as_typed() -> None:
    env = {"COMPACTCTL_THRESHOLD": "0.7"}
    assert resolve(DedupOptions, {"threshold": None}, _settings(env=env)).threshold == 0.7
    # a flag is already typed by the command line: never re-parsed
    assert resolve(DedupOptions, {"threshold": 0.9}, _settings(env=env)).threshold == 0.9


def test_the_command_table_overrides_the_top_level() -> None:
    table = {"scope": "assistant", "dedup": {"scope": "tool"}, "compact": {"scope": "all"}}
    assert resolve(DedupOptions, {}, _settings(table, command="dedup")).scope == "tool"
    assert resolve(DedupOptions, {}, _settings(table, command="rules")).scope == "assistant"


@pytest.mark.parametrize("value", ["0", "false", "no", "off", "FALSE", " Off ", ""])
def test_a_false_boolean_from_the_environment_is_false(value: str) -> None:
    """The fixed bug: COMPACTCTL_REDACT=0 used to turn redaction on (bool("0") is True)."""
    env = {"COMPACTCTL_REDACT": value}
    assert resolve(CompactOptions, {}, _settings(env=env)).redact is False


@pytest.mark.parametrize("value", ["1", "true", "yes", "on"])
def test_a_true_boolean_from_the_environment_is_true(value: str) -> None:
    env = {"COMPACTCTL_REDACT": value}
    assert resolve(CompactOptions, {}, _settings(env=env)).redact is True


def test_booleans_from_the_config_file() -> None:
    assert resolve(CompactOptions, {}, _settings({"redact": False})).redact is False
    assert resolve(CompactOptions, {}, _settings({"redact": "off"})).redact is False
    # --no-redact is a flag: it wins over a config file that turns redaction on
    assert resolve(CompactOptions, {"redact": False}, _settings({"redact": True})).redact is False


def test_a_bad_environment_value_names_the_variable() -> None:
    with pytest.raises(UsageError) as info:
        resolve(CompactOptions, {}, _settings(env={"COMPACTCTL_REDACT": "bogus"}))
    assert str(info.value) == (
        "environment COMPACTCTL_REDACT='bogus': expected true or false (or 1/0, yes/no, "
        "on/off); fix or unset it"
    )
    with pytest.raises(UsageError) as info:
        resolve(CompactOptions, {}, _settings(env={"COMPACTCTL_KEEP_RECENT": "three"}))
    assert str(info.value) == (
        "environment COMPACTCTL_KEEP_RECENT='three': expected a whole number (e.g. 10); fix "
        "or unset it"
    )


def test_a_bad_config_value_names_the_key() -> None:
    with pytest.raises(UsageError) as info:
        resolve(DedupOptions, {}, _settings({"dedup": {"threshold": "high"}}, command="dedup"))
    assert str(info.value) == (
        "config file: [dedup] threshold = 'high': expected a number (e.g. 0.5); fix the value "
        "or remove the key"
    )


def test_the_first_bad_value_in_field_order_is_reported() -> None:
    env = {"COMPACTCTL_TIMEOUT": "soon", "COMPACTCTL_MICRO_TRIGGER": "half"}
    with pytest.raises(UsageError, match="COMPACTCTL_MICRO_TRIGGER"):
        resolve(CompactOptions, {}, _settings(env=env))


def test_the_options_class_still_checks_the_result() -> None:
    with pytest.raises(UsageError, match="unknown strategy 'fast'"):
        resolve(CompactOptions, {}, _settings({"strategy": "fast"}))
    with pytest.raises(UsageError, match=r"--threshold must be in \(0, 1\], not 1.5"):
        resolve(DedupOptions, {"threshold": 1.5}, _settings())


def test_config_keys_that_are_not_field_names() -> None:
    s = _settings({"summary_format": "task-state", "tiers_model": "openai/x", "format": "nope"})
    assert resolve(CompactOptions, {}, s).format == "task-state"
    assert resolve(TiersOptions, {}, s).model == "openai/x"
    assert resolve(TiersOptions, {"model": "flag/y"}, s).model == "flag/y"


def test_pin_patterns_from_the_config_are_added_to_the_defaults() -> None:
    opts = resolve(CompactOptions, {}, _settings({"pin_patterns": ["^KEEP"]}))
    assert opts.pin_patterns == (*DEFAULT_PIN_PATTERNS, "^KEEP")
    assert resolve(CompactOptions, {}, _settings()).pin_patterns == DEFAULT_PIN_PATTERNS


def test_a_key_of_another_layer_does_not_leak_into_a_field_of_the_same_name() -> None:
    """``min_chars`` is dedup's key; micro compaction's ``min_chars`` is not configurable."""
    s = _settings({"min_chars": 50, "preserve": ["Read"], "keep_turns": 3})
    assert resolve(MicroParams, {}, s) == MicroParams(keep_turns=3, preserve=("Read",))
    assert resolve(DedupOptions, {}, s).min_chars == 50


def test_an_unknown_flag_is_a_programming_error() -> None:
    with pytest.raises(TypeError, match="DedupOptions has no field 'treshold'"):
        resolve(DedupOptions, {"treshold": 0.5}, _settings())


def test_every_configurable_field_has_a_parser_and_every_key_a_use() -> None:
    """Each field a config key sets can be parsed from a string, and every layer key in
    KNOWN_KEYS sets a field (the others are the run's and the output's)."""
    used = set()
    for cls in LAYER_OPTIONS:
        for f in dataclasses.fields(cls):
            key = config_key(f)
            if key is not None:
                used.add(key)
                env = {"COMPACTCTL_" + key.upper(): "1"}
                with contextlib.suppress(UsageError):  # a value "1" may be out of range
                    resolve(cls, {}, _settings(env=env))  # a TypeError: no parser
    app_keys = {"jobs", "db", "lock_timeout", "torn_wait", "encoding", "context_window", "dask",
                "documents"}  # fmt: skip
    assert KNOWN_KEYS - used <= app_keys
    assert "min_chars" in used and "lsh_min_items" not in used


def test_help_quotes_the_dataclass_defaults() -> None:
    runner = CliRunner()
    dedup = " ".join(runner.invoke(app, ["dedup", "--help"]).stdout.split())
    assert f"(default {DedupOptions.threshold})" in dedup
    assert f"(default {DedupOptions.min_chars})" in dedup
    compact = " ".join(runner.invoke(app, ["compact", "--help"]).stdout.split())
    assert f"Messages kept verbatim (default {CompactOptions.keep_recent})" in compact
    assert f"({CompactOptions.micro_trigger:g})" in compact
    assert f"Model request timeout, seconds ({CompactOptions.timeout:g})" in compact
    tiers = " ".join(runner.invoke(app, ["tiers", "--help"]).stdout.split())
    assert f"[default: {TiersOptions.tier}]" in tiers


def test_the_shared_options_reach_every_command_that_takes_them() -> None:
    runner = CliRunner()
    for command in ("inspect", "compact", "rules", "dedup", "tiers", "convert"):
        text = runner.invoke(app, [command, "--help"]).stdout
        assert "--config" in text and "--jobs" in text and "--quiet" in text, command
        assert ("--verbose" in text) == (command != "convert"), command
        assert ("--lock-timeout" in text) == (command not in {"inspect", "convert"}), command


def test_settings_get_parses_a_boolean_by_its_words() -> None:
    """A direct ``Settings.get(..., bool)`` gets the same parsing as :func:`resolve`."""
    s = _settings({"redact": "no"}, {"COMPACTCTL_MICRO_ONLY": "off"})
    assert s.get("micro_only", None, True, bool) is False
    assert s.get("redact", None, True, bool) is False
    with pytest.raises(UsageError, match="config file: redact = 'maybe': expected true or false"):
        _settings({"redact": "maybe"}).get("redact", None, True, bool)
