"""Whether an evaluation scores an INT8 artifact on the images it was calibrated on.

Its quantization scales were fitted to those images, so its accuracy there is not evidence of its
accuracy on any other image: the report says so in the row's note and on the console, and
``recommend`` does not count it within an accuracy budget. The build records the calibration
images as the absolute paths it resolved (the INT8 node's manifest, ``params["calib_images"]``).
They are compared with the evaluation's images by resolved path and by content (sha256), so that a
copy in another folder is caught too; a file is hashed only where its size is that of a file on the
other side, so an evaluation on other images reads none of them.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from yolo_optimize.artifact import Manifest
from yolo_optimize.files import file_sha256


def calibration_overlap(manifest: Manifest | None, images: Sequence[Path]) -> int:
    """How many of ``images`` the artifact of ``manifest`` was calibrated on; 0 for one not calibrated. A calibration
    image since deleted matches nothing (its content is gone)."""
    calibrated = [Path(path) for path in (manifest.params.get("calib_images") or [])] if manifest else []
    if not calibrated:
        return 0
    paths = {str(path.resolve()) for path in calibrated}
    by_size: dict[int, list[Path]] = {}
    for path in calibrated:
        if (size := _size(path)) is not None:
            by_size.setdefault(size, []).append(path)
    digests: dict[Path, str] = {}
    return sum(str(image.resolve()) in paths or _same_content(image, by_size, digests) for image in images)


def _same_content(image: Path, by_size: dict[int, list[Path]], digests: dict[Path, str]) -> bool:
    """``image`` holds the bytes of one of the calibration images of its size (``digests``: those hashed so far)."""
    others = by_size.get(_size(image) or -1, [])
    if not others:
        return False
    mine = _sha256(image)
    for path in others:
        if path not in digests:
            digests[path] = _sha256(path)
        if digests[path] == mine:
            return True
    return False


def _size(path: Path) -> int | None:
    try:
        return os.stat(path).st_size
    except OSError:
        return None


def _sha256(path: Path) -> str:
    try:
        return file_sha256(path)
    except OSError:
        return f"unreadable {path}"

