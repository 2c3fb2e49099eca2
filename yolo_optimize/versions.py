"""The installed versions of the tools a result depends on, read from package metadata (no imports, so cheap)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

__version__ = "0.1.0"  # this package's, as pyproject.toml's [project] version (the package exports it)


def tool_versions(tools: tuple[str, ...]) -> dict[str, str]:
    """Installed versions, read from package metadata (no imports, so cheap)."""
    found = {"yolo-optimize": __version__}
    for tool in tools:
        try:
            found[tool] = version(tool)
        except PackageNotFoundError:
            found[tool] = "absent"
    return found
