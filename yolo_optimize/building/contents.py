"""What a build's data inputs hold, by content: the parity, calibration, tuning and gate images, their YOLO label
files and any COCO annotation file, so that a node's cache key changes when a file it read changes in place
(``dag.cache_keys``). A gate verdict is about the images and labels it scored, not about their paths.

Hashing every image at every build would make a cached rebuild of a large calibration set slow, so each file's
sha256 is kept in a record under ``--out`` beside the stamp it was read at (size, modification time, inode): a file
whose stamp is unchanged has not been written since, as the store trusts its own files (``artifact.verify_files``).
``--verify`` hashes every byte again, inputs too. The record is a cache: lost or stale, it costs a hash, never a
wrong key.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from yolo_optimize.files import file_sha256, write_atomically

RECORD = ".inputs.json"  # under --out: path -> [size, mtime_ns, inode, sha256]
NO_LABEL = "no label file"


class Digests:
    """sha256 of files by path, trusted from the record where a file's stamp is the one recorded (with ``full``, only
    once hashed by this build: a file that two roles name, a calibration image also tuned on, is read once)."""

    def __init__(self, record: Path, *, full: bool) -> None:
        self.record, self.full = record, full
        self.known: dict[str, list[Any]] = _read(record)
        self.hashed: set[str] = set()  # paths this build read

    def of(self, path: Path) -> str:
        facts = path.stat()
        stamp = [facts.st_size, facts.st_mtime_ns, facts.st_ino]
        entry = self.known.get(str(path))
        if entry is not None and entry[:3] == stamp and (not self.full or str(path) in self.hashed):
            return str(entry[3])
        digest = file_sha256(path)
        self.known[str(path)] = [*stamp, digest]
        self.hashed.add(str(path))
        return digest

    def save(self) -> None:
        """Write the record back when a file was hashed (a concurrent build's entries may be lost: a cache)."""
        if self.hashed:
            try:
                write_atomically(self.record, json.dumps(self.known, sort_keys=True))
            except OSError:
                pass  # the next build hashes again


def _read(record: Path) -> dict[str, list[Any]]:
    try:
        found = json.loads(record.read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def data_contents(images: Iterable[str], annotations: Iterable[str], digests: Digests) -> dict[str, str]:
    """Each image's content with its YOLO label file's (or that it has none), and each COCO annotation file's, by the
    path a stage's parameters name them with."""
    from yolo_optimize.runtime.dataset import label_path

    found: dict[str, str] = {}
    for image in images:
        label = label_path(Path(image))
        found[image] = f"{digests.of(Path(image))} {digests.of(label) if label.is_file() else NO_LABEL}"
    for annotation in annotations:
        if Path(annotation).is_file():
            found[annotation] = digests.of(Path(annotation))
    return found


def named_contents(params: Any, contents: Mapping[str, str]) -> dict[str, str]:
    """The contents of the data files ``params`` (a stage's parameters, as JSON) name, by path: what enters the
    node's key beside the parameters, so a node that reads no data file keeps its key."""
    if isinstance(params, dict):
        params = list(params.values())
    if isinstance(params, list):
        return {path: digest for value in params for path, digest in named_contents(value, contents).items()}
    return {params: contents[params]} if isinstance(params, str) and params in contents else {}
