"""What the by-hand benchmarks share: their timing options and how they save what they measured."""

from __future__ import annotations

import argparse
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from yolo_optimize.evaluation.reporting.report import environment
from yolo_optimize.host.environment import configure

configure()  # a benchmark is a program of ours, like the CLI: the tools stay offline and out of $HOME


def timing_parser(doc: str, seconds: float) -> argparse.ArgumentParser:
    """Threads, seconds per measurement, interleaved rounds and the results folder."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=seconds)
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds, each in fresh processes")
    parser.add_argument("--save", type=Path, default=Path("bench/results"))
    return parser


def study_parser(doc: str, out: str, report: str, repeats: str) -> argparse.ArgumentParser:
    """The options of a script that builds with the CLI into ``--out`` and evaluates into ``--report``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--assets", type=Path, default=Path("../shared/assets"))
    parser.add_argument("--out", type=Path, default=Path(out))
    parser.add_argument("--report", type=Path, default=Path(report))
    parser.add_argument("--repeats", default=repeats, help="interleaved rounds of the evaluation")
    parser.add_argument("--skip-build", action="store_true", help="Evaluate the artifacts already in --out.")
    parser.add_argument("--skip-eval", action="store_true", help="Recompute the results from the saved --report.")
    return parser


def save(folder: Path, name: str, result: dict[str, Any], threads: int) -> None:
    """Write ``<name>-<UTC time>.json`` with the environment, and say where."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-{datetime.now(timezone.utc):%Y%m%dT%H%M%S}.json"
    path.write_text(json.dumps({**result, "environment": environment(threads)}, indent=2) + "\n")
    print(f"saved {path}")
