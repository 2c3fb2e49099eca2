"""Run-to-run comparison of two evals: per artifact and batch size, the change in throughput, latency, memory and
accuracy, and whether a latency change is real or noise.

A change is significant when the 95% interval of the ratio of median latencies (new / old) excludes
1. The interval comes from a two-level bootstrap of the raw samples: first the processes (each
eval measures every artifact in several processes, and on these hosts a whole process runs in a
fast or a 1.4-1.65x slower mode), then the timed runs within each drawn process. Resampling
processes is what keeps a process-mode difference from passing for a regression; an eval with a
single process per artifact gives no such protection, and the comparison says so.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from yolo_optimize.errors import UserError
from yolo_optimize.evaluation.results import EvalSettings, Report, Row

DRAWS = 2000
ACCURACY_TOLERANCE = 0.001  # mAP50-95 or top-1 agreement: a drop beyond 0.1 point is a regression (evaluation is
#                             deterministic up to the runtimes' threading, which moves it by less)


@dataclass(frozen=True)
class Change:
    model: str
    artifact: str
    batch: int
    old_ips: float
    new_ips: float
    throughput_change: float  # new / old - 1
    p50_change: float  # median latency, new / old - 1
    p50_interval: tuple[float, float]  # its 95% bootstrap interval
    p99_change: float
    memory_change_mb: float
    accuracy_change: float | None  # points, in the family's metric
    verdict: str  # "slower", "faster", "no significant change"


@dataclass
class Comparison:
    old: str
    new: str
    changes: list[Change]
    unmatched: list[str]  # artifacts in only one of the runs
    setup_differences: list[str]  # empty unless --force compared different setups
    single_process: bool  # some row had one process: process-mode noise cannot be told from a change
    same_data: bool  # both measured accuracy on the same images; otherwise accuracy is not compared

    def regressions(self, max_slowdown: float) -> list[Change]:
        """Significant slowdowns beyond ``max_slowdown`` (0.05 = 5%) and accuracy drops beyond the tolerance."""
        return [c for c in self.changes if (c.verdict == "slower" and c.p50_change > max_slowdown)
                or (c.accuracy_change is not None and c.accuracy_change < -ACCURACY_TOLERANCE * 100)]


def setup_differences(new: Report, old: Report) -> list[str]:
    """What makes two runs' timings incomparable: host CPU, its ISA, the thread count, the device."""
    facts = (("CPU", lambda r: r.environment.get("cpu")),
             ("ISA", lambda r: ",".join(map(str, r.environment.get("cpu_facts", {}).get("isa", [])))),
             ("threads", lambda r: r.settings.threads), ("device", lambda r: r.settings.device))
    return [f"{name} {get(old)} vs {get(new)}" for name, get in facts if get(old) != get(new)]


def compare(new: Report, old: Report, *, names: tuple[str, str], force: bool = False) -> Comparison:
    """``new`` against ``old`` (their folder names in ``names``); different setups are refused unless ``force``."""
    differences = setup_differences(new, old)
    if differences and not force:
        raise UserError(f"the runs were measured differently ({'; '.join(differences)}): their timings are not "
                        "comparable; pass --force to compare anyway")
    same_data = _data_of(new.settings) == _data_of(old.settings)
    rng = np.random.default_rng(0)
    old_rows = {(r.model, r.name): r for r in old.rows if r.measurements}
    new_rows = {(r.model, r.name): r for r in new.rows if r.measurements}
    changes = [change for key in new_rows if key in old_rows
               for batch in new.settings.batch_sizes if batch in old.settings.batch_sizes
               if (change := _change(new_rows[key], old_rows[key], batch, rng, same_data))]
    unmatched = sorted(f"{model} {name}" for model, name in old_rows.keys() ^ new_rows.keys())
    single = any(len(r.measurements) < 2 for r in [*old_rows.values(), *new_rows.values()])
    return Comparison(names[1], names[0], changes, unmatched, differences, single, same_data)


def _change(new: Row, old: Row, batch: int, rng: np.random.Generator, same_data: bool) -> Change | None:
    new_runs, old_runs = _samples(new, batch), _samples(old, batch)
    if not new_runs or not old_runs:
        return None
    low, high = _ratio_interval(new_runs, old_runs, rng)
    p50, p99 = (_ratio(new.median_latency(batch, statistic), old.median_latency(batch, statistic)) - 1
                for statistic in ("p50_ms", "p99_ms"))
    verdict = "slower" if low > 1 else "faster" if high < 1 else "no significant change"
    new_ips = statistics.median(new.round_throughputs(batch).values())
    old_ips = statistics.median(old.round_throughputs(batch).values())
    return Change(new.model, new.name, batch, round(old_ips, 2), round(new_ips, 2), round(new_ips / old_ips - 1, 4),
                  round(p50, 4), (round(low - 1, 4), round(high - 1, 4)),
                  round(p99, 4),
                  round(new.median_memory_mb() - old.median_memory_mb(), 1),
                  _accuracy_change(new, old) if same_data else None, verdict)


def _samples(row: Row, batch: int) -> list[np.ndarray]:
    """Each process's raw latencies at ``batch``."""
    return [np.asarray(b.latency.samples_ms) for m in row.measurements for b in m.batches
            if b.batch == batch and b.latency and b.latency.samples_ms]


def _ratio_interval(new: list[np.ndarray], old: list[np.ndarray], rng: np.random.Generator) -> tuple[float, float]:
    """95% interval of median(new) / median(old) under the two-level bootstrap (processes, then runs)."""
    ratios = np.array([_resampled_median(new, rng) / _resampled_median(old, rng) for _ in range(DRAWS)])
    low, high = np.percentile(ratios, [2.5, 97.5])
    return float(low), float(high)


def _resampled_median(processes: list[np.ndarray], rng: np.random.Generator) -> float:
    drawn = rng.integers(len(processes), size=len(processes))
    return float(np.median(np.concatenate([rng.choice(processes[i], size=len(processes[i])) for i in drawn])))


def _ratio(new: float | None, old: float | None) -> float:
    """new / old of two medians both runs have (they timed the batch: ``_samples`` found its runs)."""
    if new is None or old is None:
        raise ValueError("a latency median is missing although both runs timed the batch")
    return new / old


def _accuracy_change(new: Row, old: Row) -> float | None:
    """Points gained (negative: lost) in the family's metric, where both runs measured it."""
    for metric in ("map50_95", "top1_agreement"):
        now, before = (getattr(r.accuracy, metric) if r.accuracy else None for r in (new, old))
        if now is not None and before is not None:
            return round((now - before) * 100, 3)
    return None


def caveats(comparison: Comparison) -> list[str]:
    """How to read the comparison, and what limits it (a forced setup difference, other images, one process)."""
    found = [f"Comparison of {comparison.new} against {comparison.old}: p50 change with its 95% bootstrap interval "
             "(processes, then runs, resampled); significant when the interval excludes 0. Over all runs, the "
             "host's slow state included (the matrix's speedups take the fast-state runs)."]
    if comparison.setup_differences:
        found.append(f"Compared across different setups (--force): {'; '.join(comparison.setup_differences)}.")
    if not comparison.same_data:
        found.append("The runs measured accuracy on different images (--data, --max-images or --imgsz differ): "
                     "accuracy is not compared.")
    if comparison.single_process:
        found.append("Some rows were measured in one process only: a process running in the slow mode cannot be "
                     "told from a real change (evaluate with --repeats 2 or more).")
    return found


def comparison_markdown(comparison: Comparison) -> str:
    """The comparison as a Markdown table after its caveats."""
    lines = [line for caveat in caveats(comparison) for line in (caveat, "")]
    lines += ["| model | artifact | batch | img/s old -> new | p50 change [95% interval] | p99 change | memory | "
              "accuracy | verdict |", "|---|---|---|---|---|---|---|---|---|"]
    for c in comparison.changes:
        accuracy = f"{c.accuracy_change:+.2f} points" if c.accuracy_change is not None else "n/a"
        lines.append(f"| {c.model} | {c.artifact} | {c.batch} | {c.old_ips:g} -> {c.new_ips:g} "
                     f"({c.throughput_change:+.1%}) | {c.p50_change:+.1%} [{c.p50_interval[0]:+.1%}, "
                     f"{c.p50_interval[1]:+.1%}] | {c.p99_change:+.1%} | {c.memory_change_mb:+g} MB | {accuracy} | "
                     f"{c.verdict} |")
    if comparison.unmatched:
        lines += ["", f"In one run only: {', '.join(comparison.unmatched)}."]
    return "\n".join(lines) + "\n"


def _data_of(settings: EvalSettings) -> tuple[Path | None, int | None, int | None]:
    """What two runs must share for their accuracy to compare: the images, how many, at what size."""
    return settings.data, settings.max_images, settings.imgsz
