"""``optimize info`` on a terminal: the CPU, the runtimes, and every measured limit with its rounds."""

from __future__ import annotations

from rich.table import Table

from yolo_optimize.limits.peaks import MachineLimits


def limits_tables(limits: MachineLimits) -> list[Table]:
    cpu = limits.cpu
    facts = Table(title="this machine", show_header=False)
    facts.add_row("CPU", f"{cpu['model']} ({cpu['machine']})")
    facts.add_row("ISA", ", ".join(cpu["isa"]) or "none of the reported flags")
    facts.add_row("VNNI / native bf16", f"{'yes' if cpu['vnni'] else 'no'} / {'yes' if cpu['native_bf16'] else 'no'}")
    facts.add_row("threads measured", str(limits.threads))
    facts.add_row("tools", ", ".join(f"{k} {v}" for k, v in limits.tools.items()))
    facts.add_row("memory bandwidth", f"{limits.bandwidth_gb_s:.1f} GB/s (rounds: "
                  f"{', '.join(f'{b:.1f}' for b in limits.bandwidth_rounds_gb_s)}; {limits.bandwidth_method})")
    facts.add_row("measured", limits.measured_at)
    peaks = Table(title="peak rates (GOP/s: 2 per multiply-add; the fastest of the interleaved rounds)")
    for column in ("runtime", "kernel", "precision", "executes in", "GOP/s", "rounds"):
        peaks.add_column(column, justify="right" if column in ("GOP/s",) else "left")
    for peak in limits.peaks:
        if peak.gops is not None:
            peaks.add_row(peak.runtime, peak.operation, peak.precision, str(peak.executed), f"{peak.gops:.1f}",
                          ", ".join(f"{r:.1f}" for r in peak.rounds_gops))
    skipped = {(p.runtime, p.precision): p.skipped for p in limits.peaks if p.gops is None}
    for (runtime, precision), reason in skipped.items():
        peaks.add_row(runtime, "all", precision, f"not measured: {reason}", "", "")
    return [facts, peaks]
