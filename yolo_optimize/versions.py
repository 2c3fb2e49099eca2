"""The installed versions of the tools a result depends on, read from package metadata (no imports, so cheap)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from yolo_optimize import __version__


def tool_versions(tools: tuple[str, ...]) -> dict[str, str]:
    """Installed versions, read from package metadata (no imports, so cheap)."""
    found = {"yolo-optimize": __version__}
    for tool in tools:
        try:
            found[tool] = version(tool)
        except PackageNotFoundError:
            found[tool] = "absent"
    return found
