"""Declaring options: every command's options, as the command line, the Python API and TOML config files give them,
are the fields of one frozen record in the ``options.py`` of the part that does the work (``building/options.py``:
``BuildOptions``; ``evaluation/options.py``: ``EvalOptions``; ``evaluation/measuring/options.py``:
``ProfileOptions``; ``evaluation/reporting/options.py``: ``RecommendOptions``, ``ReportOptions``;
``limits/options.py``: ``InfoOptions``), each field declared with ``option(default, kind, help)``. From that one
declaration come the API's keywords and TOML keys and their checks (``checked_values``), the record itself
(``record_of``, ``layered``), and the command line's click options with the help's ``[default: ...]``
(``cli/click_options.py``): adding an option is one field and the code that uses it.

A config file (``build``, ``eval``) holds a command's options as keys, spelled as on the command line without the
dashes (``batch-sizes = [1, 8]``; ``batch_sizes`` works too), lists as TOML arrays or comma strings. Precedence:
the defaults, then the file, then what the command line or the API call says. An unknown key or a bad
value is a ``UserError`` naming the key and where it came from.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from yolo_optimize.errors import UserError

LOCAL, RAY = "local", "ray"
EXECUTORS = (LOCAL, RAY)  # where a build's nodes or an evaluation's hosts run


class Updatable(Protocol):
    """An options record (``BuildOptions``, ``EvalOptions``): a copy with ``values`` checked and applied."""

    def updated(self, values: Mapping[str, Any], origin: str) -> Any: ...


Options = TypeVar("Options", bound=Updatable)
Record = TypeVar("Record")


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


def record_of(record: type[Record], values: Mapping[str, Any], origin: str) -> Record:
    """``record``'s defaults with ``values`` checked and applied: a command's options where no config file layers
    them (``info``, ``profile``, ``recommend``, ``report``)."""
    return record(**checked_values(values, record, origin))


def read_config(path: Path) -> dict[str, Any]:
    """A TOML config file's keys and values (checked by the record's ``updated``); a UserError when unreadable."""
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


def listed_names(text: str) -> list[str]:
    """A comma list's items, stripped and lower-cased; an empty list is a UserError."""
    names = [n.strip().lower() for n in text.split(",") if n.strip()]
    if not names:
        raise UserError("empty list")
    return names


def parse_batch_sizes(text: str) -> tuple[int, ...]:
    """Comma list of positive batch sizes, sorted and de-duplicated."""
    try:
        sizes = sorted({int(n) for n in listed_names(text)})
    except ValueError:
        raise UserError(f"--batch-sizes must be positive integers, got {text!r}") from None
    if not sizes or sizes[0] < 1:
        raise UserError(f"--batch-sizes must be positive integers, got {text!r}")
    return tuple(sizes)


def parse_image_sizes(text: str) -> tuple[int, ...]:
    """Comma list of square input sizes, each a positive multiple of 32, sorted and de-duplicated."""
    try:
        sizes = sorted({int(n) for n in listed_names(text)})
    except ValueError:
        raise UserError(f"--imgsz must be a positive multiple of 32 (or a comma list of them), got {text!r}") from None
    if any(size < 32 or size % 32 for size in sizes):
        raise UserError(f"--imgsz must be a positive multiple of 32 (or a comma list of them), got {text!r}")
    return tuple(sizes)


class Kind:
    """The values an option takes, said once for every way in: called on a value from a config file or the API it
    returns the value checked (a UserError, or TypeError/ValueError read as "is not ``described``", when bad);
    the command line reads it with the click type ``cli/click_options.py`` makes of the same kind."""

    described = "valid"

    def __call__(self, value: Any) -> Any:
        raise NotImplementedError


@dataclass(frozen=True)
class Whole(Kind):
    """An integer ``>= low``."""

    low: int

    def __call__(self, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < self.low:
            raise UserError(f"must be an integer >= {self.low}, got {value!r}")
        return value


@dataclass(frozen=True)
class Real(Kind):
    """A finite number ``>= low`` (``> low`` with ``above``), at most ``high`` when given: NaN compares false with
    every bound, so a range check alone would take it (and a NaN budget or threshold disables what it limits), and
    no option here means anything by infinity (an unset limit is None)."""

    low: float = 0
    high: float | None = None
    above: bool = False

    def __call__(self, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or value < self.low or self.above and value == self.low:
            raise UserError(f"must be a finite number {'>' if self.above else '>='} {self.low:g}, got {value!r}")
        if self.high is not None and value > self.high:
            raise UserError(f"must be at most {self.high:g}, got {value!r}")
        return float(value)


@dataclass(frozen=True)
class OneOf(Kind):
    choices: tuple[str, ...]

    def __call__(self, value: Any) -> str:
        if value not in self.choices:
            raise UserError(f"must be one of {', '.join(self.choices)}, got {value!r}")
        return str(value)


@dataclass(frozen=True)
class Flag(Kind):
    """True or false; on the command line ``--name`` when off by default, ``--no-name`` when on."""

    def __call__(self, value: Any) -> bool:
        if not isinstance(value, bool):
            raise UserError(f"must be true or false, got {value!r}")
        return value


@dataclass(frozen=True)
class Text(Kind):
    """A non-empty string (a path given for one is taken as its string)."""

    def __call__(self, value: Any) -> str:
        if isinstance(value, Path):
            value = str(value)
        if not isinstance(value, str) or not value:
            raise UserError(f"must be a non-empty string, got {value!r}")
        return value


@dataclass(frozen=True)
class FilePath(Kind):
    """A file or folder, as a string or a Path."""

    def __call__(self, value: Any) -> Path:
        return Path(Text()(value))


@dataclass(frozen=True)
class Listed(Kind):
    """A list: a comma string on the command line, a TOML array or a comma string elsewhere, checked by ``parse``."""

    parse: Callable[[str], Any]
    described: str = "a list"

    def __call__(self, value: Any) -> Any:
        return self.parse(comma(value))


@dataclass(frozen=True)
class Repeated(Kind):
    """Paths given one at a time: the option repeated on the command line, a list (or one path) elsewhere."""

    described: str = "a list of paths"

    def __call__(self, value: Any) -> tuple[str, ...]:
        return tuple(str(FilePath()(item)) for item in ([value] if isinstance(value, (str, Path)) else value))


@dataclass(frozen=True)
class Percentage(Kind):
    """A share given in percent, ``5%`` or ``5`` (a string or a number), as the fraction (0.05): finite and >= 0."""

    described = "a percentage"

    def __call__(self, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise UserError(f"must be a percentage such as 5%, got {value!r}")
        try:
            number = float(value.strip().removesuffix("%") if isinstance(value, str) else value)
        except ValueError:
            raise UserError(f"must be a percentage such as 5%, got {value!r}") from None
        if not math.isfinite(number) or number < 0:
            raise UserError(f"must be a finite percentage >= 0, got {value!r}")
        return number / 100


@dataclass(frozen=True)
class Option:
    """One option's declaration beside its record field: what it takes, what the help says, how the help states the
    default where the value alone does not (``shown_default``: None shows the value), how it names the value
    (``metavar``: None leaves it to the kind's click type), and whether the command line takes it as an option (a
    command's argument, such as eval's DIRECTORY, is declared by the command)."""

    kind: Kind
    help: str | Callable[[], str] = ""  # a function where the text comes from a table read when asked (the formats)
    shown_default: str | None = None
    metavar: str | None = None
    on_command_line: bool = True

    def check(self, value: Any, default: Any) -> Any:
        """``value`` checked; None only where the option's default is None (unset)."""
        return None if value is None and default is None else self.kind(value)


OPTION = "option"  # the key of a field's metadata that holds its Option


def option(default: Any, kind: Kind, help: str | Callable[[], str] = "", *, shown_default: str | None = None,
           metavar: str | None = None, on_command_line: bool = True) -> Any:
    """A record field declared as an option (see the module's docstring)."""
    declared = Option(kind, help, shown_default, metavar, on_command_line)
    return dataclasses.field(default=default, metadata={OPTION: declared})


@dataclass(frozen=True)
class Declared:
    name: str
    default: Any
    option: Option


def declared(record: type) -> list[Declared]:
    """The options ``record`` declares, in declaration order."""
    return [Declared(field.name, field.default, field.metadata[OPTION]) for field in dataclasses.fields(record)
            if OPTION in field.metadata]


def checked_values(values: Mapping[str, Any], record: type, origin: str) -> dict[str, Any]:
    """Each of ``values`` checked by the option ``record`` declares for it, keys as in Python or on the command line:
    an unknown key or a bad value is a UserError naming the key and where it came from."""
    options = {item.name: item for item in declared(record)}
    checked = {}
    for key, value in values.items():
        name = key.replace("-", "_")
        if name not in options:
            known = ", ".join(option.replace("_", "-") for option in options)
            raise UserError(f"{origin}: unknown key {key!r} (keys: {known})")
        try:
            checked[name] = options[name].option.check(value, options[name].default)
        except UserError as err:
            raise UserError(f"{origin}: {key}: {err}") from None
        except (TypeError, ValueError):
            raise UserError(f"{origin}: {key}: {value!r} is not {options[name].option.kind.described}") from None
    return checked
