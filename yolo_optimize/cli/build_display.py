"""The build's live progress (a table on a terminal, a line per node event in logs) and its final table."""

from __future__ import annotations

import time
from types import TracebackType

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table

from yolo_optimize.building.dag import BUILT, CACHED, FAILED, NOT_NEEDED, REPAIRED, SKIPPED, NodeResult
from yolo_optimize.cli.console import LOG_LINE, progress_bar

STYLES = {BUILT: "green", CACHED: "cyan", REPAIRED: "bold yellow", FAILED: "bold red", SKIPPED: "yellow",
          NOT_NEEDED: "dim", "running": "magenta"}


class BuildDisplay:
    """A live table on a terminal; elsewhere (logs, CI) one line when a node starts and one when it ends."""

    def __init__(self, console: Console, nodes: list[str]) -> None:
        self.console = console
        self.rows: dict[str, NodeResult | None] = dict.fromkeys(nodes)
        self.started: dict[str, float] = {}
        self.progress = progress_bar(console)
        self.task = self.progress.add_task("building", total=len(nodes))
        self.live = Live(console=console, transient=True, refresh_per_second=4, get_renderable=self._render)

    def __enter__(self) -> BuildDisplay:
        if self.console.is_terminal:
            self.live.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.live.stop()

    def event(self, node: str, result: NodeResult | None) -> None:
        if result is None:
            self.started[node] = time.monotonic()
            if not self.console.is_terminal:
                self.console.print(f"{node}: started", **LOG_LINE)
        else:
            self.rows[node] = result
            self.progress.update(self.task, completed=sum(r is not None for r in self.rows.values()),
                                 description=f"{node}: {result.status}")
            if not self.console.is_terminal and result.status not in (CACHED, NOT_NEEDED):
                self.console.print(" ".join(filter(None, (f"{node}:", result.status, _seconds(result), result.reason))),
                                   **LOG_LINE)

    def _render(self) -> Group:
        table = Table(title="optimize build", title_justify="left")
        for column in ("node", "status", "seconds"):
            table.add_column(column)
        for node, result in self.rows.items():
            if result is None and node in self.started:
                status, seconds = "running", f"{time.monotonic() - self.started[node]:.0f}"
            else:
                status, seconds = (result.status, _seconds(result)) if result else ("waiting", "")
            table.add_row(node, f"[{STYLES.get(status, '')}]{status}", seconds)
        return Group(table, self.progress.get_renderable())


def results_table(results: list[NodeResult], title: str = "", hosts: bool = False) -> Table:
    """The build's final table; with ``hosts`` (a cluster build), which machine built each node and in which try."""
    table = Table(title=f"build results{': ' + title if title else ''}", title_justify="left")
    columns = ["node", "status", "seconds", "size", *(["host"] if hosts else []), "reason"]
    for column in columns:
        table.add_column(column, justify="right" if column in ("seconds", "size") else "left")
    for r in results:
        host = [f"{r.host}{f' (attempt {r.attempt})' if r.attempt > 1 else ''}"] if hosts else []
        table.add_row(r.node, f"[{STYLES[r.status]}]{r.status}", _seconds(r), _size(r.size_bytes), *host, r.reason)
    return table


def _seconds(result: NodeResult) -> str:
    return f"{result.seconds:.1f}" if result.status == BUILT else ""


def _size(size: int) -> str:
    return f"{size / 1e6:.1f} MB" if size else ""
