"""A Recommendation in words: ``optimize recommend``'s text (``describe``), the one line ``optimize eval`` prints per
pick (``brief``), and a candidate's memory as the HTML report shows it; the choice itself is recommend.py's, kept
apart from how it is said."""

from __future__ import annotations

from yolo_optimize.evaluation.reporting.recommend import Candidate, Recommendation


def memory_text(candidate: Candidate) -> str:
    """Its peak memory, saying when it is on the GPU."""
    return f"{candidate.memory_mb:g} MB" + (" on the GPU" if candidate.memory_on == "GPU" else "")


def describe(recommendation: Recommendation) -> str:
    """The recommendation as plain text: the verdict, the choice and runner-up with their numbers, the snippet."""
    lines = [f"{recommendation.model} at batch {recommendation.batch}: {recommendation.verdict}",
             *([f"  {recommendation.doubt}"] if recommendation.doubt else []),
             *([f"  accuracy against: {recommendation.reference}"] if recommendation.reference else [])]
    for label, candidate in (("ship", recommendation.choice), ("runner-up", recommendation.runner_up)):
        if candidate:
            low, high = candidate.throughput_range
            lines.append(f"  {label}: {candidate.artifact} ({candidate.path}), runs in {candidate.runs_in}, "
                         f"{candidate.mode}: {_rates(candidate)} (rounds {low:g}-{high:g}), p50 "
                         f"{candidate.p50_ms:g} ms, p99 {candidate.p99_ms:g} ms, peak {memory_text(candidate)}, "
                         f"{candidate.accuracy}")
    if recommendation.choice:
        lines += ["  " + line for line in recommendation.choice.snippet.splitlines()]
    lines += [f"  not eligible: {artifact}: {why}" for artifact, why in recommendation.excluded.items()]
    if recommendation.against_host_nms:
        lines.append(f"  {recommendation.against_host_nms}")
    return "\n".join(lines)


def _rates(candidate: Candidate) -> str:
    """Inference-only and end-to-end images/s, as far as measured."""
    text = f"{candidate.inference_ips:g} img/s"
    return text + (f", {candidate.end_to_end_ips:g} end to end" if candidate.end_to_end_ips else "")


def brief(recommendation: Recommendation) -> str:
    """One line: the pick (or the tie, or why none) with its speed and accuracy."""
    choice, runner_up = recommendation.choice, recommendation.runner_up
    head = f"{recommendation.model} b{recommendation.batch}: "
    if choice is None:
        return head + recommendation.verdict
    text = f"{choice.artifact} ({_rates(choice)}, p50 {choice.p50_ms:.1f} ms, {choice.accuracy})"
    if recommendation.tie and runner_up:
        text += f", tied within noise with {runner_up.artifact} ({runner_up.throughput_ips:g} img/s)"
    elif runner_up:
        text += f", {choice.throughput_ips / runner_up.throughput_ips - 1:.0%} ahead of {runner_up.artifact}"
    if recommendation.against_host_nms:
        text += f"; {recommendation.against_host_nms}"
    return head + text + (f" ({recommendation.doubt})" if recommendation.doubt else "")
