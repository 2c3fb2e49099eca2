"""A profile's files: profile.json (the typed profile) and profile.md (the page ``optimize profile`` prints), beside
the trace the runner wrote."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path

from yolo_optimize.evaluation.profiles import STAGES, TOP, ArtifactProfile


def write_profile(profile: ArtifactProfile, out: Path) -> list[Path]:
    """profile.json and profile.md beside the trace the runner wrote."""
    files = [out / "profile.json", out / "profile.md"]
    files[0].write_text(json.dumps(asdict(profile), indent=2) + "\n")
    files[1].write_text(profile_markdown(profile))
    return files + ([out / profile.trace] if profile.trace else [])


def profile_markdown(profile: ArtifactProfile) -> str:
    """The profile as a short Markdown report: hotspots, layer types, breakdown, threads, energy."""
    lines = [f"# {profile.model} {profile.artifact} (runs in {profile.executed_precision}), batch {profile.batch_size}",
             "", f"Forward {profile.forward_ms:.2f} ms without a profiler; a pass under the profiler "
             f"{profile.profiled_pass_ms:.2f} ms ({_ratio(profile.profiled_pass_ms, profile.forward_ms)} of the "
             f"forward){_unsteady(profile)}; per-layer sum {profile.layers_ms:.2f} ms "
             f"({_ratio(profile.layers_ms, profile.profiled_pass_ms)} of the profiled pass). "
             f"Trace: {profile.trace or 'none'} ({profile.trace_note or profile.unavailable.get('trace', '')}).", "",
             "| hotspot | type | ms | share | runs in | kernel |", "|---|---|---|---|---|---|"]
    lines += [f"| {h.name} | {h.kind} | {h.ms:.3f} | {h.share:.1%} | {h.executed} | {h.kernel} |"
              for h in profile.hotspots]
    lines += ["", f"Convolutions and fully connected layers ({len(profile.convolutions)} whose shapes the runtime "
              f"reports): {profile.convolution_gflops:.3f} GFLOPs per pass, "
              f"{_share(profile.convolution_utilization)} of the measured peak ({profile.peak_of}).", "",
              "| convolution | type | GFLOPs | ms | GOP/s | of its peak | runs in |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {r.name} | {r.kind} | {r.gflops:.4f} | {r.ms:.3f} | {r.achieved_gops:.1f} | {_share(r.utilization)} "
              f"| {r.executed} |" for r in profile.convolutions[:TOP]]
    lines += ["", "| layer type | ms | share |", "|---|---|---|"]
    lines += [f"| {kind} | {ms:.3f} | {ms / profile.layers_ms:.1%} |" for kind, ms in profile.by_kind_ms.items()]
    lines += ["", "| batch | " + " | ".join(STAGES) + " | end-to-end img/s | inference-only img/s |",
              "|---|" + "---|" * (len(STAGES) + 2)]
    lines += [f"| {b.batch} | " + " | ".join(f"{b.seconds_per_image[s] * 1e3:.2f} ms ({b.shares[s]:.0%})"
                                           for s in STAGES) + f" | {b.end_to_end_ips} | {b.infer_ips} |"
              for b in profile.breakdown]
    lines += ["", "| threads | p50 ms | img/s |", "|---|---|---|"]
    lines += [f"| {t.threads} | {t.latency_p50_ms} | {t.throughput_ips} |" for t in profile.threads]
    energy = profile.energy
    lines += ["", f"Energy: {energy.joules_per_image} J/image ({', '.join(energy.domains)})"
              if energy.joules_per_image is not None else f"Energy: {energy.unavailable}", ""]
    return "\n".join(lines)


def _unsteady(profile: ArtifactProfile) -> str:
    """Says when the host's speed changed around a profile: around the reported one, or only earlier ones."""
    attempts = profile.attempts
    if attempts and not attempts[profile.reported_attempt].steady:
        return f"; the host's speed changed around each of {len(attempts)} profiles (this one's brackets differ by " \
               f"{attempts[profile.reported_attempt].disagreement:.0%}): the ratio is not reliable"
    return f"; profiled {len(attempts)} times, the host's speed changed around the earlier ones" \
        if len(attempts) > 1 else ""


def _share(fraction: float | None) -> str:
    return f"{fraction:.0%}" if fraction is not None else "n/a"


def _ratio(part: float, whole: float) -> str:
    return f"{part / whole:.0%}" if whole and not math.isnan(whole) and not math.isnan(part) else "n/a"
