"""Files as the store and the checkpoints need them: written so that a reader never sees one half-written, even
when the writer is killed or another process writes the same file at the same time, and hashed."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def write_atomically(path: Path, data: bytes | str) -> None:
    """Write ``data`` to a temporary name beside ``path`` (this process's own), then rename it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.part")
    try:
        if isinstance(data, str):
            partial.write_text(data)
        else:
            partial.write_bytes(data)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def file_sha256(path: Path, chunk: int = 1 << 20) -> str:
    """The file's sha256, read in ``chunk``-byte blocks (a weights file need not fit in memory twice)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()
