"""Option declarations: each kind checks a config file's or the API's value in one line, None is taken only where an
option is unset by default, and an unknown key lists the keys a record declares."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from yolo_optimize.declaring import (
    FilePath,
    Flag,
    Listed,
    OneOf,
    Percentage,
    Real,
    Repeated,
    Text,
    Whole,
    checked_values,
    option,
    parse_batch_sizes,
)
from yolo_optimize.errors import UserError


@dataclass(frozen=True)
class Example:
    count: int = option(2, Whole(1))
    share: float | None = option(None, Real(0, 1, above=True))
    mode: str = option("a", OneOf(("a", "b")))
    quiet: bool = option(False, Flag())
    sizes: tuple[int, ...] = option((1,), Listed(parse_batch_sizes, "a list of batch sizes"))
    files: tuple[str, ...] = option((), Repeated(), metavar="PATH")
    where: Path | None = option(None, FilePath())
    name: str = option("x", Text())
    slower: float | None = option(None, Percentage())


@pytest.mark.parametrize(("given", "message"), [
    ({"count": 0}, "test: count: must be an integer >= 1, got 0"),
    ({"count": True}, "test: count: must be an integer >= 1, got True"),
    ({"share": 0}, "test: share: must be a finite number > 0, got 0"),
    ({"share": 1.5}, "test: share: must be at most 1, got 1.5"),
    ({"share": float("nan")}, "test: share: must be a finite number > 0, got nan"),
    ({"share": float("inf")}, "test: share: must be a finite number > 0, got inf"),
    ({"mode": "c"}, "test: mode: must be one of a, b, got 'c'"),
    ({"quiet": "yes"}, "test: quiet: must be true or false, got 'yes'"),
    ({"sizes": 2.5}, "test: sizes: 2.5 is not a list of batch sizes"),
    ({"name": None}, "test: name: must be a non-empty string, got None"),
    ({"name": ""}, "test: name: must be a non-empty string, got ''"),
    ({"slower": "5 percent"}, "test: slower: must be a percentage such as 5%, got '5 percent'"),
    ({"slower": "-5%"}, "test: slower: must be a finite percentage >= 0, got '-5%'"),
    ({"slower": "nan"}, "test: slower: must be a finite percentage >= 0, got 'nan'"),
    ({"colour": 1}, "test: unknown key 'colour' (keys: count, share, mode, quiet, sizes, files, where, name, "
                    "slower)"),
])
def test_a_bad_value_is_one_line_naming_the_key_and_where_it_came_from(given: dict[str, object], message: str) -> None:
    with pytest.raises(UserError) as refused:
        checked_values(given, Example, "test")
    assert str(refused.value) == message


def test_good_values_arrive_typed_and_none_only_where_the_option_is_unset_by_default() -> None:
    checked = checked_values({"share": 1, "sizes": "8,1", "files": "a.onnx", "where": "out", "name": Path("n"),
                              "quiet": True, "slower": "5%"}, Example, "test")
    assert checked == {"share": 1.0, "sizes": (1, 8), "files": ("a.onnx",), "where": Path("out"), "name": "n",
                       "quiet": True, "slower": 0.05}
    assert checked_values({"slower": 12.5}, Example, "test") == {"slower": 0.125}
    assert checked_values({"share": None, "where": None, "files": ["a", Path("b")]}, Example, "test") == {
        "share": None, "where": None, "files": ("a", "b")}
