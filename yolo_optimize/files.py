"""Writing a file so that a reader never sees it half-written, even when the writer is killed or another process
writes the same file at the same time."""

from __future__ import annotations

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
