"""A COCO instances file (``instances_*.json``) checked entry by entry as it is read, before anything is measured.

faster-coco-eval scores what it is given: a box of NaN or negative size, or an annotation of a category the file
does not list, is scored as if valid (a lower mAP, exit 0), and a missing ``bbox``, a string where it takes a number
or an ``images`` object instead of a list fail only once every row has been measured. So every entry the loader and
the scoring read is checked here for the type and range they need, and the first bad one is named in one line:
``instances_val.json: annotations[17] (id 9123): bbox [...] has a negative or non-finite width/height``.

A box of zero width or height is accepted: COCO's evaluation keeps such a ground truth (no detection overlaps it, so
it counts as missed), and refusing it would refuse files the official tools score. ``json`` reads the literals
``NaN`` and ``Infinity``, which JSON itself does not allow: every number checked here must be finite.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from yolo_optimize.errors import UserError

SECTIONS = ("images", "annotations", "categories")
Entry = dict[str, Any]
Check = Callable[[Entry], str | None]  # an entry's first problem, None when it has none


def read_annotations(path: Path) -> dict[str, Any]:
    """The parsed file at ``path``, every entry checked (``check_annotations``); a UserError for a bad one."""
    try:
        found = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise UserError(f"{path} is not a JSON file: {err}") from None
    check_annotations(found, str(path))
    return found


def check_annotations(found: Any, name: str) -> None:
    """Refuse (UserError, naming ``name`` and the entry) the first entry faster-coco-eval would misread."""
    if not isinstance(found, dict) or not set(SECTIONS) <= set(found):
        raise UserError(f"{name} is not a COCO instances file (needs images, annotations, categories)")
    for section in SECTIONS:
        if not isinstance(found[section], list):
            raise UserError(f"{name}: {section} is {_kind(found[section])}, not a list")
    images = _checked_ids(found, "images", name, _image_problem)
    categories = _checked_ids(found, "categories", name, lambda entry: None)
    _checked_ids(found, "annotations", name, lambda entry: _annotation_problem(entry, images, categories))


def _checked_ids(found: dict[str, Any], section: str, name: str, check: Check) -> set[int]:
    """The ids of ``section``'s entries, each an object with an integer id of its own that passes ``check``."""
    seen: dict[int, int] = {}
    for index, entry in enumerate(found[section]):
        where = f"{name}: {section}[{index}]"
        if not isinstance(entry, dict):
            raise UserError(f"{where} is {_kind(entry)}, not an object")
        if _is_int(entry.get("id")):
            where += f" (id {entry['id']})"
        problem = _id_problem(entry, seen, section) or check(entry)
        if problem:
            raise UserError(f"{where}: {problem}")
        seen[entry["id"]] = index
    return set(seen)


def _id_problem(entry: Entry, seen: dict[int, int], section: str) -> str | None:
    if "id" not in entry:
        return "has no id"
    if not _is_int(entry["id"]):
        return f"id {_shown(entry['id'])} is not an integer"
    return f"id {entry['id']} is listed twice (also {section}[{seen[entry['id']]}])" if entry["id"] in seen else None


def _image_problem(entry: Entry) -> str | None:
    return (_field_problem(entry, "file_name", lambda v: isinstance(v, str) and bool(v), "a file name")
            or _field_problem(entry, "width", _is_positive, "a positive number", optional=True)
            or _field_problem(entry, "height", _is_positive, "a positive number", optional=True))


def _annotation_problem(entry: Entry, images: set[int], categories: set[int]) -> str | None:
    return (_field_problem(entry, "image_id", lambda v: _is_int(v) and v in images, "the id of a listed image")
            or _field_problem(entry, "category_id", lambda v: _is_int(v) and v in categories,
                              "the id of a listed category")
            or _box_problem(entry)
            or _field_problem(entry, "area", lambda v: _is_finite(v) and v >= 0, "a finite number >= 0",
                              optional=True)
            or _field_problem(entry, "iscrowd", lambda v: _is_int(v) and v in (0, 1), "0 or 1", optional=True))


def _box_problem(entry: Entry) -> str | None:
    """A ``bbox`` of 4 numbers ``[x, y, width, height]``, all finite, the width and height >= 0 (zero: see above)."""
    shape = _field_problem(entry, "bbox", lambda v: isinstance(v, list) and len(v) == 4 and all(map(_is_number, v)),
                           "4 numbers [x, y, width, height]")
    if shape:
        return shape
    x, y, width, height = entry["bbox"]
    if not (math.isfinite(x) and math.isfinite(y)):
        return f"bbox {_shown(entry['bbox'])} has a non-finite x/y"
    if not (math.isfinite(width) and math.isfinite(height) and width >= 0 and height >= 0):
        return f"bbox {_shown(entry['bbox'])} has a negative or non-finite width/height"
    return None


def _field_problem(entry: Entry, key: str, valid: Callable[[Any], bool], wanted: str,
                   optional: bool = False) -> str | None:
    if key not in entry:
        return None if optional else f"has no {key}"
    return None if valid(entry[key]) else f"{key} {_shown(entry[key])} is not {wanted}"


def _is_number(value: Any) -> bool:
    """An int or float (JSON's ``true`` reads as a bool, which Python counts as an int: not a number here)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_finite(value: Any) -> bool:
    return _is_number(value) and math.isfinite(value)


def _is_positive(value: Any) -> bool:
    return _is_finite(value) and value > 0


def _shown(value: Any, limit: int = 60) -> str:
    """A value as the file writes it (``NaN`` included), cut short."""
    text = json.dumps(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _kind(value: Any) -> str:
    kinds = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number",
             float: "a number"}
    return kinds.get(type(value), "null")
