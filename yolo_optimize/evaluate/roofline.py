"""The roofline: each CPU row's achieved rate against this machine's measured limits, in the matrix and as a
plot (SVG and PNG).

x: operational intensity (operations per byte moved, the graph estimate of facts.py); y:
achieved GOP/s. Each precision's roof is min(its measured peak, intensity x measured
bandwidth), drawn for the runtimes the rows ran on.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from yolo_optimize.evaluate.facts import ModelFacts
from yolo_optimize.evaluate.results import BatchCells, MatrixRow, Row
from yolo_optimize.formats import format_named
from yolo_optimize.machine.peaks import MachineLimits

ELEMENT_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "int8": 1}


def roofline_cells(row: Row, line: MatrixRow, limits: MachineLimits | None) -> MatrixRow:
    """``line`` with GFLOPs per image, achieved GOP/s per batch size and, with limits, the roofline: utilization of
    the measured peak, operational intensity and whether the row is compute- or memory-bound.

    The peak is that of the row's runtime for the precision it executes in (an INT8 file's: int8,
    though its float parts run at the float rate), the highest rate of its GEMM and convolution kernels.
    Operational intensity is the graph estimate of ``facts.py`` at the bytes per element of that
    precision; a row is memory-bound where intensity x measured bandwidth is below the peak.
    """
    if row.facts is None:
        return line
    runtime, precision = format_named(row.target).kernels, peak_precision(row.measurements[0].executed_precision)
    peak = limits.peak_gops(runtime, precision) if limits and runtime else None
    batches = {batch: _batch_roofline(row.facts, cells, batch, precision, peak, limits)
               for batch, cells in line.batches.items()}
    found = replace(line, gflops_per_image=row.facts.gflops_per_image, batches=batches)
    if not limits:
        return found
    return replace(found, peak_gops=peak, peak_of=f"{runtime} {precision}" if peak else
                   f"not measured: {runtime} {precision}")


def _batch_roofline(facts: ModelFacts, cells: BatchCells, batch: int, precision: str, peak: float | None,
                    limits: MachineLimits | None) -> BatchCells:
    """``cells`` with the achieved GOP/s and, with limits, utilization, intensity and what bounds the row."""
    achieved = round(facts.gflops_per_image * cells.throughput_ips, 2) if cells.throughput_ips else None
    if not limits:
        return replace(cells, achieved_gops=achieved)
    intensity = facts.operational_intensity(batch, ELEMENT_BYTES[precision])
    bound = ("memory" if intensity * limits.bandwidth_gb_s < peak else "compute") if peak else None
    utilization = round(achieved / peak, 4) if achieved and peak else None
    return replace(cells, achieved_gops=achieved, utilization=utilization, intensity=round(intensity, 2), bound=bound)


def peak_precision(executed: str) -> str:
    """The precision whose peak bounds a row: ``int8`` for INT8 files, else the float precision it computes in."""
    return "int8" if executed.startswith("int8") else executed.split()[0]


def roofline_figure(matrix: list[MatrixRow], limits: MachineLimits, batch_sizes: list[int]) -> Any:
    """Every row at every batch size under the roofs of its runtime's measured peaks (None: no row has a point)."""
    points = [(line, b) for line in matrix for b in batch_sizes if line.at(b).intensity
              and line.at(b).achieved_gops and line.peak_gops]
    if not points:
        return None
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(9, 6))
    intensities = [line.at(b).intensity for line, b in points]
    ridge = min(line.peak_gops for line, _ in points) / limits.bandwidth_gb_s  # where the roofs bend
    x = np.logspace(np.log10(min(min(intensities), ridge) / 4), np.log10(max(intensities) * 4), 200)
    for peak_of in dict.fromkeys(line.peak_of for line, _ in points):
        peak = next(line.peak_gops for line, _ in points if line.peak_of == peak_of)
        axes.plot(x, np.minimum(peak, x * limits.bandwidth_gb_s), linewidth=1,
                  label=f"roof: {peak_of} {peak:.0f} GOP/s")
    for (line, batch), marker in zip(points, _markers(len(points))):
        axes.scatter(line.at(batch).intensity, line.at(batch).achieved_gops, marker=marker,
                     label=f"{line.model} {line.artifact} b{batch}")
    axes.set(xscale="log", yscale="log", xlabel="operational intensity (operations / byte, estimated from the graph)",
             ylabel="achieved GOP/s", title=f"roofline: {limits.cpu['model']}, {limits.threads} threads, "
             f"{limits.bandwidth_gb_s:.1f} GB/s measured")
    axes.grid(True, which="both", linewidth=0.3)
    axes.legend(fontsize=6, loc="lower right", ncol=2)
    return figure


def _markers(count: int) -> list[str]:
    shapes = "osD^v<>px*h"
    return [shapes[i % len(shapes)] for i in range(count)]
