"""What every command prints to: the one console (160 columns off a terminal), progress lines for logs and the
progress bar. Light on purpose: every command imports it when ``optimize`` starts, so the build's live table and final
table, which read the build's node results, are build_display.py, imported when a build runs."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from rich.console import Console

if TYPE_CHECKING:
    from rich.progress import Progress

console = Console(width=None if sys.stdout.isatty() else 160)
LOG_LINE: dict[str, Any] = {"soft_wrap": True, "markup": False,  # one greppable line each, printed as said
                            "highlight": False}


def progress_bar(console: Console) -> Progress:
    """Done/total with elapsed time and an ETA, for build nodes and eval measurements alike."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(SpinnerColumn(), TextColumn("{task.description}", style="bold"), BarColumn(),
                    MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                    console=console, transient=True)


def say(text: str) -> None:
    """Progress for logs: a spinner shows it on a terminal, a line elsewhere."""
    if not console.is_terminal:
        console.print(text)
