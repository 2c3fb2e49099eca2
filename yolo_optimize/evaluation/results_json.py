"""A results.json read back: a schema version this version reads, every field decoded into the typed results
(results.py) and checked against its annotation, and runs of 0 ms found. ``report.load_report`` reads with it."""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from pathlib import Path
from typing import Any

from yolo_optimize.errors import UserError
from yolo_optimize.evaluation.results import SCHEMA_VERSION, Row
from yolo_optimize.runtime.accuracy import RANGE

READABLE_VERSIONS = (7, 8, 9, 10, SCHEMA_VERSION)  # the matrix is computed again from the rows (report.load_report)
NOT_NEGATIVE = (0.0, math.inf)  # every figure read back (times, rates, sizes) unless its field's RANGE says otherwise


def read_results(folder: Path) -> dict[str, Any]:
    """An eval's results.json (``folder`` or the file itself) as parsed JSON of a schema this version reads
    (READABLE_VERSIONS: version 7 differs from 8 in its matrix only, which report.load_report computes again from
    the rows, and 8 to 10 from 11 in fields added since with defaults); anything else is a UserError naming the file."""
    path = folder / "results.json" if folder.is_dir() else folder
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise UserError(f"{folder} holds no readable results.json of 'optimize eval' ({err.__class__.__name__})") \
            from None
    if not isinstance(data, dict) or data.get("schema_version") not in READABLE_VERSIONS:
        found = data.get("schema_version") if isinstance(data, dict) else None
        raise UserError(f"{path} has results schema {found}, this version reads "
                        f"{', '.join(map(str, READABLE_VERSIONS[:-1]))} or {READABLE_VERSIONS[-1]}: evaluate "
                        "again with this version")
    return data


def zero_runs(rows: list[Row]) -> str:
    """Where a row's timed runs read 0 ms (a results field's path), or "": LatencyStats keeps 0.0001 ms and no
    runtime's call or deployed path is that short, so such a file is not one ``optimize eval`` wrote as measured
    (edited, or broken), and no throughput can be read from it (images over 0 seconds)."""
    return next((f"rows[{i}].measurements[{j}].batches[{k}].{part}.samples_ms"
                 for i, row in enumerate(rows) for j, measurement in enumerate(row.measurements)
                 for k, batch in enumerate(measurement.batches)
                 for part, stats in (("latency", batch.latency), ("end_to_end", batch.end_to_end))
                 if stats and min(stats.samples_ms, default=1.0) <= 0), "")


def from_json(kind: Any, data: Any, where: str, bounds: tuple[float, float] = NOT_NEGATIVE) -> Any:
    """Parsed JSON as ``kind`` (a dataclass, ``list[X]``, ``dict[str, X]``, ``X | None``, a plain type), every field
    checked against its annotation: a file this tool reads back is refused in one line naming the first field that
    is missing or of the wrong type (a UserError), never a KeyError or TypeError later. ``Path`` fields take a
    string, ``tuple[X, ...]`` a list, ``dict[int, X]`` integers written as object keys (JSON has none of them).
    Every float is finite and within ``bounds``: its field's ``RANGE`` metadata, else NOT_NEGATIVE (a NaN mAP would
    otherwise pass every budget, a negative latency break the statistics)."""
    origin, arguments = typing.get_origin(kind), typing.get_args(kind)
    if kind is Any:
        return data
    if origin in (typing.Union, types.UnionType):
        if data is None and type(None) in arguments:
            return None
        return from_json(next(a for a in arguments if a is not type(None)), data, where, bounds)
    if dataclasses.is_dataclass(kind):
        return _dataclass_from_json(kind, data, where)
    if origin in (list, tuple):
        items = _checked(data, list, where, "a list")
        return origin(from_json(arguments[0], item, f"{where}[{index}]", bounds) for index, item in enumerate(items))
    if origin is dict:
        entries = _checked(data, dict, where, "an object")
        return {_key(arguments[0], key, where): from_json(arguments[1], value, f"{where}.{key}", bounds)
                for key, value in entries.items()}
    if kind is Path:
        return Path(_checked(data, str, where, "a path"))
    if kind is float:
        return _in_bounds(_checked(data, (int, float), where, "a number"), bounds, where)
    return _checked(data, kind, where, {int: "an integer", str: "a string", bool: "true or false"}.get(kind, str(kind)))


def _in_bounds(number: float, bounds: tuple[float, float], where: str) -> float:
    low, high = bounds
    if not math.isfinite(number) or not low <= number <= high:
        span = f"at least {low:g}" if high == math.inf else f"within {low:g}..{high:g}"
        raise UserError(f"{where}: expected a finite number {span}, got {number}")
    return number


def _dataclass_from_json(kind: Any, data: Any, where: str) -> Any:
    entries = _checked(data, dict, where, "an object")
    hints = typing.get_type_hints(kind)
    unknown = sorted(set(entries) - set(hints))
    if unknown:
        raise UserError(f"{where}.{unknown[0]}: not a field this version writes")
    values = {}
    for found in dataclasses.fields(kind):
        if found.name in entries:
            values[found.name] = from_json(hints[found.name], entries[found.name], f"{where}.{found.name}",
                                           found.metadata.get(RANGE, NOT_NEGATIVE))
        elif found.default is dataclasses.MISSING and found.default_factory is dataclasses.MISSING:
            raise UserError(f"{where}.{found.name}: missing")
    return kind(**values)


def _key(kind: Any, key: str, where: str) -> Any:
    """A JSON object's key as ``kind``: an ``int`` key (a batch size) is written as its digits."""
    if kind is not int:
        return key
    if not key.isdigit():
        raise UserError(f"{where}.{key}: expected an integer key")
    return int(key)


def _checked(value: Any, kind: type | tuple[type, ...], where: str, wanted: str) -> Any:
    """``value`` when it is a ``kind`` (a bool is no number here), else a UserError naming ``where``."""
    if not isinstance(value, kind) or isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else
                                                                               (kind,)):
        raise UserError(f"{where}: expected {wanted}, got {json.dumps(value)[:60]}")
    return value
