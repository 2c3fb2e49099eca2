"""Options as the command line, the Python API and TOML config files give them, checked in one place: the parsers
every option record uses (``config.BuildOptions``, ``evaluate.options.EvalOptions``) and the precedence between
their sources.

A config file holds a command's options as keys, spelled as on the command line without the dashes
(``batch-sizes = [1, 8]``; ``batch_sizes`` works too), lists as TOML arrays or comma strings. Precedence:
the defaults, then the file, then what the command line or the API call says. An unknown key or a bad
value is a ``UserError`` naming the key and where it came from.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol, TypeVar

from yolo_optimize.errors import UserError

LOCAL, RAY = "local", "ray"
EXECUTORS = (LOCAL, RAY)  # where a build's nodes or an evaluation's hosts run


class Updatable(Protocol):
    """An options record (``BuildOptions``, ``EvalOptions``): a copy with ``values`` checked and applied."""

    def updated(self, values: Mapping[str, Any], origin: str) -> Any: ...


Options = TypeVar("Options", bound=Updatable)


def layered(defaults: Options, config: Path | Mapping[str, Any] | None, given: Mapping[str, Any],
            given_from: str) -> Options:
    """``defaults`` overridden by ``config`` (a TOML file or a mapping), overridden by ``given``: the CLI's and the
    API's one way to a command's options, each value checked and a bad one named with where it came from."""
    options = defaults
    if isinstance(config, Path):
        options = options.updated(read_config(config), f"config file {config}")
    elif config is not None:
        options = options.updated(config, "config")
    return options.updated(given, given_from)


def checked_values(values: Mapping[str, Any], parsers: Mapping[str, Callable[[Any], Any]], origin: str,
                   descriptions: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Each of ``values`` through its parser, keys as in Python or on the command line: an unknown key or a bad value
    is a UserError naming the key and where it came from (the build options, the API's arguments)."""
    checked = {}
    for key, value in values.items():
        name = key.replace("-", "_")
        if name not in parsers:
            known = ", ".join(option.replace("_", "-") for option in parsers)
            raise UserError(f"{origin}: unknown key {key!r} (keys: {known})")
        try:
            checked[name] = parsers[name](value)
        except UserError as err:
            raise UserError(f"{origin}: {key}: {err}") from None
        except (TypeError, ValueError):
            raise UserError(f"{origin}: {key}: {value!r} is not {(descriptions or {}).get(name, 'valid')}") from None
    return checked


def read_config(path: Path) -> dict[str, Any]:
    """A TOML config file's keys and values (checked by ``BuildOptions.updated``); a UserError when unreadable."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        return tomllib.loads(path.read_text())
    except OSError as err:
        raise UserError(f"config file {path}: {err.strerror or err}") from None
    except tomllib.TOMLDecodeError as err:
        raise UserError(f"config file {path} is not valid TOML: {err}") from None


def comma(value: Any) -> str:
    """A list, a number or a comma string, as the comma string the format table's parsers take."""
    if isinstance(value, (list, tuple)):
        return ",".join(str(item) for item in value)
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise TypeError(value)
    return str(value)


def integer(low: int) -> Callable[[Any], int]:
    def parse(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise UserError(f"must be an integer >= {low}, got {value!r}")
        return value
    return parse


def number(low: float = 0, *, above: bool = False) -> Callable[[Any], float]:
    """A parser of numbers ``>= low`` (``> low`` with ``above``)."""
    def parse(value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < low or above and value == low:
            raise UserError(f"must be a number {'>' if above else '>='} {low:g}, got {value!r}")
        return float(value)
    return parse


def flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise UserError(f"must be true or false, got {value!r}")
    return value


def choice(choices: tuple[str, ...]) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        if value not in choices:
            raise UserError(f"must be one of {', '.join(choices)}, got {value!r}")
        return str(value)
    return parse


def text(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise UserError(f"must be a non-empty string, got {value!r}")
    return value


def path(value: Any) -> Path | None:
    return None if value is None else Path(text(str(value) if isinstance(value, Path) else value))


def optional(parse: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: None if value is None else parse(value)
