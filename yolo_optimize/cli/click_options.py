"""A command's click options made from its options record (``declaring.option`` declarations): the spelling, the
click type of the option's kind, and the help with the real default, so that the command line cannot drift from the
config file and the API; which of them the command line gave (``given_only``), and ``--json``, the one flag a command
adds by hand besides ``--config``."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from yolo_optimize.declaring import Declared, FilePath, Flag, Kind, OneOf, Real, Repeated, Whole, declared

F = TypeVar("F", bound=Callable[..., Any])


def options_of(record: type) -> Callable[[F], F]:
    """A decorator adding the click option of every option ``record`` declares for the command line, in declaration
    order. Each is None when not given (a repeated one: empty), so that only what the command line says overrides
    the config file."""
    def decorate(command: F) -> F:
        for item in reversed(declared(record)):
            if item.option.on_command_line:
                command = click.option(*_spelling(item), **_settings(item))(command)
        return command
    return decorate


def _spelling(item: Declared) -> tuple[str, str]:
    """``--name`` and the keyword the command receives (the field's name); ``--no-name`` for a flag on by default."""
    dashed = item.name.replace("_", "-")
    return (f"--no-{dashed}" if isinstance(item.option.kind, Flag) and item.default else f"--{dashed}", item.name)


def _settings(item: Declared) -> dict[str, Any]:
    kind = item.option.kind
    settings: dict[str, Any] = {"help": help_text(item)}
    if item.option.metavar is not None:
        settings["metavar"] = item.option.metavar
    if isinstance(kind, Flag):
        return {**settings, "flag_value": not item.default, "default": None}
    if isinstance(kind, Repeated):
        return {**settings, "multiple": True}
    return {**settings, "type": _click_type(kind)}


def _click_type(kind: Kind) -> Any:
    """The click type that reads ``kind`` from the command line (click refuses a bad value in its own words first)."""
    if isinstance(kind, Whole):
        return click.IntRange(kind.low)
    if isinstance(kind, Real):
        return FiniteFloatRange(kind.low, kind.high, min_open=kind.above)
    if isinstance(kind, OneOf):
        return click.Choice(kind.choices)
    if isinstance(kind, FilePath):
        return click.Path(path_type=Path)
    return None  # text: lists, selectors and percentages arrive as given, checked by the record's kind


class FiniteFloatRange(click.FloatRange):
    """click's float range refusing NaN and infinity, as ``Real`` does: NaN passes every bound click compares."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number


def help_text(item: Declared) -> str:
    """The option's help with ``[default: ...]`` before its last full stop: the declared ``shown_default``, else the
    default value itself; none for a flag or an unset default that declares nothing to show."""
    declared_help = item.option.help
    text = declared_help() if callable(declared_help) else declared_help
    shown = item.option.shown_default
    if shown is None and not isinstance(item.option.kind, Flag) and item.default not in (None, ()):
        shown = shown_value(item.default)
    if shown is None:
        return text
    stem, stop = (text[:-1], ".") if text.endswith(".") else (text, "")
    return f"{stem} [default: {shown}]{stop}".strip()


def shown_value(value: Any) -> str:
    """A default as the command line would spell it: a list as its comma string."""
    return ",".join(str(item) for item in value) if isinstance(value, tuple) else str(value)


def given_only(values: dict[str, Any]) -> dict[str, Any]:
    """What the command line said: the options it was given (click passes None, or () for a repeatable option, for
    the others), which override the config file's."""
    return {key: value for key, value in values.items() if value is not None and value != ()}


def json_flag(what: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--json``: the command's result printed as JSON instead of text, how it prints rather than what it does (as
    ``--config`` says where the options come from): the command's own flag, no option of its record."""
    return click.option("--json", "as_json", is_flag=True, help=f"Print the {what} as JSON.")
