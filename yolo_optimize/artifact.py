"""Artifact folders and their manifests: written atomically, verified by sha256."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from yolo_optimize.checkpoint import file_sha256

SCHEMA_VERSION = 1
MANIFEST = "manifest.json"


@dataclass
class Manifest:
    """Everything needed to trust, reproduce and run one built node."""

    node: str
    stage: str
    model_id: str
    target: str | None  # None for intermediate nodes (.cache)
    precision: str | None
    entry: str | None  # the deployable file, relative to the artifact dir
    cache_key: str
    parents: dict[str, str]  # parent node -> its cache key
    params: dict[str, Any]
    tool_versions: dict[str, str]
    metadata: dict[str, Any]  # also embedded in the artifact itself
    files: dict[str, dict[str, Any]] = field(default_factory=dict)  # relpath -> {sha256, bytes}
    build_seconds: float = 0.0
    parity: dict[str, Any] | None = None
    info: dict[str, Any] = field(default_factory=dict)  # stage-specific facts (e.g. TensorRT profile)
    schema_version: int = SCHEMA_VERSION

    def write(self, folder: Path) -> None:
        self.files = hash_files(folder)
        (folder / MANIFEST).write_text(json.dumps(asdict(self), indent=2, sort_keys=True) + "\n")

    @classmethod
    def read(cls, folder: Path) -> Manifest:
        data = json.loads((folder / MANIFEST).read_text())
        if data.get("schema_version") != SCHEMA_VERSION:
            raise ValueError(f"manifest schema {data.get('schema_version')} != {SCHEMA_VERSION}")
        return cls(**data)


def hash_files(folder: Path) -> dict[str, dict[str, Any]]:
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST)
    return {p.relative_to(folder).as_posix(): {"sha256": file_sha256(p), "bytes": p.stat().st_size} for p in files}


def verify_files(folder: Path, manifest: Manifest) -> str | None:
    """None when every listed file is present with its recorded sha256; else what is wrong."""
    for relpath, expected in manifest.files.items():
        path = folder / relpath
        if not path.is_file():
            return f"missing file {relpath}"
        if path.stat().st_size != expected["bytes"] or file_sha256(path) != expected["sha256"]:
            return f"sha256 mismatch for {relpath}"
    return None


def read_valid(folder: Path, cache_key: str | None = None) -> Manifest | None:
    """The folder's manifest if it is readable, matches ``cache_key`` (when given) and its files verify."""
    try:
        manifest = Manifest.read(folder)
    except (OSError, ValueError, TypeError):
        return None
    if cache_key is not None and manifest.cache_key != cache_key:
        return None
    return manifest if verify_files(folder, manifest) is None else None


def staging_dir(final: Path) -> Path:
    """A fresh private folder beside ``final``; only a finished build is renamed into place."""
    path = final.parent / f".tmp-{final.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    path.mkdir(parents=True)
    return path


def clear_stale_staging(final: Path) -> None:
    """Remove staging folders of builds of this node that died (call with the node's lock held)."""
    for stale in final.parent.glob(f".tmp-{final.name}-*"):
        shutil.rmtree(stale, ignore_errors=True)


def publish(staging: Path, final: Path) -> None:
    """Replace ``final`` by ``staging`` so that readers see the old or the new artifact, never a mix."""
    if final.exists():
        trash = final.parent / f".old-{final.name}-{uuid.uuid4().hex[:8]}"
        os.replace(final, trash)
        os.replace(staging, final)
        shutil.rmtree(trash, ignore_errors=True)
    else:
        os.replace(staging, final)
