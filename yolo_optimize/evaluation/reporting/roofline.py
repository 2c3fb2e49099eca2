"""The roofline: each CPU row's achieved rate against this machine's measured limits, in the matrix and as a
plot (SVG and PNG).

x: operational intensity (operations per byte moved, the graph estimate of facts.py); y:
achieved GOP/s. Each precision's roof is min(its measured peak, intensity x measured
bandwidth), drawn for the runtimes the rows ran on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, NamedTuple

import numpy as np

from yolo_optimize.evaluation.facts import ModelFacts, peak_precision
from yolo_optimize.evaluation.results import BatchCells, MatrixRow, Row
from yolo_optimize.formats import format_named
from yolo_optimize.limits.peaks import MachineLimits

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


class _Point(NamedTuple):
    label: str
    intensity: float
    achieved_gops: float
    peak_gops: float
    peak_of: str | None


def _points(matrix: list[MatrixRow], batch_sizes: Sequence[int]) -> list[_Point]:
    """Each row at each batch size that has an intensity, an achieved rate and a peak to set them against."""
    points = []
    for line in matrix:
        for batch in batch_sizes:
            cell = line.at(batch)
            if cell.intensity and cell.achieved_gops and line.peak_gops:
                points.append(_Point(f"{line.model} {line.artifact} b{batch}", cell.intensity, cell.achieved_gops,
                                     line.peak_gops, line.peak_of))
    return points


def roofline_figure(matrix: list[MatrixRow], limits: MachineLimits, batch_sizes: Sequence[int]) -> Any:
    """Every row at every batch size under the roofs of its runtime's measured peaks (None: no row has a point)."""
    points = _points(matrix, batch_sizes)
    if not points:
        return None
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(9, 6))
    intensities = [point.intensity for point in points]
    ridge = min(point.peak_gops for point in points) / limits.bandwidth_gb_s  # where the roofs bend
    x = np.logspace(np.log10(min(min(intensities), ridge) / 4), np.log10(max(intensities) * 4), 200)
    for peak_of in dict.fromkeys(point.peak_of for point in points):
        peak = next(point.peak_gops for point in points if point.peak_of == peak_of)
        axes.plot(x, np.minimum(peak, x * limits.bandwidth_gb_s), linewidth=1,
                  label=f"roof: {peak_of} {peak:.0f} GOP/s")
    for point, marker in zip(points, _markers(len(points))):
        axes.scatter(point.intensity, point.achieved_gops, marker=marker, label=point.label)
    axes.set(xscale="log", yscale="log", xlabel="operational intensity (operations / byte, estimated from the graph)",
             ylabel="achieved GOP/s", title=f"roofline: {limits.cpu['model']}, {limits.threads} threads, "
             f"{limits.bandwidth_gb_s:.1f} GB/s measured")
    axes.grid(True, which="both", linewidth=0.3)
    axes.legend(fontsize=6, loc="lower right", ncol=2)
    return figure


def _markers(count: int) -> list[str]:
    shapes = "osD^v<>px*h"
    return [shapes[i % len(shapes)] for i in range(count)]
