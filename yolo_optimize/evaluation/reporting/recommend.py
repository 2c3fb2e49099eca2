"""Which artifact to ship: per model and batch size, the fastest one within the accuracy budget and the optional
latency and memory limits, with its spread, the runner-up, and a tie where the two are within measurement noise.

Speed is each row's throughput in the host's fast state (``Row.fast_state``, the matrix's figure),
inference alone or the pipelined end-to-end path (``RecommendOptions.by``), ranked; its spread is the row's
throughput per interleaved round (every round one process per artifact). Two candidates are told
apart only when the faster one wins in every round the two share and by more than TIE_MARGIN at
the median: on these hosts a process runs in a fast or a
1.4-1.65x slower mode, so a gap smaller than the rounds' spread is noise and is reported as a tie,
not as a choice.

The choice is made here; recommendation_text.py says it in words and deployment_snippet.py writes the lines that
load the pick.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace

from yolo_optimize.errors import UserError
from yolo_optimize.evaluation.reporting.deployment_snippet import snippet
from yolo_optimize.evaluation.reporting.options import RANKINGS, RecommendOptions
from yolo_optimize.evaluation.results import BASELINE_TARGET, END_TO_END, INFERENCE, Report, Row, is_baseline
from yolo_optimize.evaluation.run_statistics import TIE_MARGIN
from yolo_optimize.families.nms import FOLDER as NMS_FOLDER

RANKED_ON = dict(zip(RANKINGS, (INFERENCE, END_TO_END)))  # --by's choice -> the figure it ranks on


@dataclass(frozen=True)
class Budget:
    """What one batch size's recommendation holds the rows to: the options' limits (accuracy in points of the family's
    metric, p50 latency in the host's fast state as in the matrix, peak memory of the measuring process: on the GPU
    for a GPU row, else RSS) and what speed is ranked on, at ``batch``."""

    batch: int
    options: RecommendOptions = RecommendOptions()

    @property
    def ranking(self) -> str:
        """The figure a row's speed is ranked on: ``results.INFERENCE`` or ``results.END_TO_END`` (``--by``)."""
        return RANKED_ON[self.options.by]


@dataclass(frozen=True)
class Candidate:
    model: str
    artifact: str
    path: str  # the file to load
    runs_in: str
    mode: str  # the configuration it ran in at this batch size (runners.base.Execution.label)
    throughput_ips: float  # what it is ranked on (RecommendOptions.by), in the host's fast state, as in the matrix
    throughput_range: tuple[float, float]  # lowest and highest round
    speedup: float | None  # throughput_ips over the PyTorch baseline's, measured the same way (None: no baseline)
    inference_ips: float  # inference alone, fast state
    end_to_end_ips: float | None  # the pipelined deployed path, fast state (None: not measured)
    p50_ms: float  # fast state, as the matrix
    p99_ms: float  # over all runs
    memory_mb: float  # the measuring process's peak: on the GPU for a GPU row (``memory_on``), else host RSS
    accuracy: str  # the family's metric and its change against FP32
    snippet: str  # three lines that load it with its plain runtime
    memory_on: str = "host"  # or "GPU"


@dataclass
class Recommendation:
    model: str
    batch: int
    choice: Candidate | None
    runner_up: Candidate | None = None
    tie: bool = False  # the two are within measurement noise
    verdict: str = ""  # one sentence: why this one, or why none
    excluded: dict[str, str] = field(default_factory=dict)  # artifact -> why it is not a candidate
    against_host_nms: str = ""  # a model built with --nms beside the same model without it: which path is faster
    doubt: str = ""  # why the ranking and its speedups are not to be taken as confident (``_doubt``)
    reference: str = ""  # what the accuracy budget held each row to (``Reference``); "": speed alone decided


def recommendations(report: Report, options: RecommendOptions, name: str = "the report") -> list[Recommendation]:
    """What ``optimize recommend`` prints and ``yo.recommend`` picks from: at each batch size asked (every one the
    report measured, unless ``options`` names one) the recommendation for each model asked (every one, unless named).
    A batch size or a model the report lacks is a UserError naming the report as ``name``."""
    measured = report.settings.batch_sizes
    if options.batch_size is not None and options.batch_size not in measured:
        raise UserError(f"{name} measured batch sizes {list(measured)}, not {options.batch_size}")
    models = list(dict.fromkeys(row.model for row in report.rows))
    if options.model is not None and options.model not in models:
        raise UserError(f"{name} has no model {options.model!r} (it has {', '.join(models)})")
    sizes = measured if options.batch_size is None else (options.batch_size,)
    return [pick for size in sizes for pick in recommend(report, Budget(size, options))
            if options.model in (None, pick.model)]


def recommend(report: Report, budget: Budget) -> list[Recommendation]:
    """One recommendation per model in the report."""
    found = [_for_model(report, model, budget) for model in dict.fromkeys(row.model for row in report.rows)]
    return [replace(pick, against_host_nms=_against_host_nms(report, pick.model, budget.batch)) for pick in found]


def _against_host_nms(report: Report, model: str, batch: int) -> str:
    """For a model built with NMS inside its artifacts (``<model>-nms``) evaluated beside the same model without it:
    each deployable artifact's end-to-end speed against its host-NMS twin, and which path to ship (in-graph NMS only
    where it is faster in every round)."""
    if NMS_FOLDER not in model:
        return ""
    host_model = model.replace(NMS_FOLDER, "", 1)
    host = {row.name: row for row in report.rows if row.model == host_model}
    pairs = [(row, host[row.name]) for row in report.rows if row.model == model and row.name in host
             and row.target != BASELINE_TARGET and _throughput(row, batch, END_TO_END)
             and _throughput(host[row.name], batch, END_TO_END)]
    if not pairs:
        return ""
    compared = [f"{row.name} {_throughput(row, batch, END_TO_END):.1f} vs {_throughput(twin, batch, END_TO_END):.1f} "
                f"img/s" for row, twin in pairs]
    faster = [row.name for row, twin in pairs if _clearly_faster(row, twin, batch, END_TO_END)]
    slower = [row.name for row, twin in pairs if _clearly_faster(twin, row, batch, END_TO_END)]
    verdict = (f"NMS inside the graph is faster for {', '.join(faster)}" if faster else
               f"host NMS ({host_model}) is faster for {', '.join(slower)}" if slower else "within noise")
    return f"end to end at b{batch}, NMS inside the graph vs host NMS: {'; '.join(compared)}: {verdict}"


def _for_model(report: Report, model: str, budget: Budget) -> Recommendation:
    rows = [row for row in report.rows if row.model == model]
    baseline = next((row for row in rows if is_baseline(row.target, row.precision)), None)
    reference = _reference(rows, baseline)
    eligible: list[Row] = []
    excluded: dict[str, str] = {}
    for row in rows:
        why = _exclusion(row, reference, budget)
        if why:
            excluded[row.name] = why
        else:
            eligible.append(row)
    ranked = sorted(eligible, key=lambda row: -_throughput(row, budget.batch, budget.ranking))
    held_to = reference.describe()
    if not ranked:
        return Recommendation(model, budget.batch, None, verdict="no artifact meets the budget" + _aside(reference),
                              excluded=excluded, reference=held_to)
    choice, doubt = _candidate(ranked[0], baseline, reference, budget), _doubt(baseline, ranked[:2], budget)
    if len(ranked) == 1:
        return Recommendation(model, budget.batch, choice, verdict=f"{choice.artifact}: the only artifact within "
                              "the budget" + _aside(reference), excluded=excluded, doubt=doubt, reference=held_to)
    runner_up = _candidate(ranked[1], baseline, reference, budget)
    tie = not _clearly_faster(ranked[0], ranked[1], budget.batch, budget.ranking)
    gap = choice.throughput_ips / runner_up.throughput_ips - 1
    ranked_on = "" if budget.ranking == INFERENCE else "end to end "
    verdict = (f"{choice.artifact} and {runner_up.artifact} are {ranked_on}within measurement noise ({gap:+.1%} at the "
               f"median; not faster in every round by more than {TIE_MARGIN:.0%}): pick either on other grounds"
               if tie else f"{choice.artifact}: {gap:.1%} faster {ranked_on}than {runner_up.artifact}, and faster in "
               "every round")
    return Recommendation(model, budget.batch, choice, runner_up, tie, verdict + _aside(reference), excluded,
                          doubt=doubt, reference=held_to)


@dataclass(frozen=True)
class Reference:
    """What the accuracy budget holds a model's rows to (``_reference``). A budget needs a reference: the PyTorch
    baseline's accuracy where it was measured, else the most accurate FP32 artifact's (the same weights, unquantized),
    else none, and then no row whose accuracy counts can pass it. Only where no row of the model has its accuracy
    measured (random weights, --no-accuracy) does speed alone decide."""

    row: Row | None  # whose accuracy a drop is counted from; None: no accuracy to count it from
    measured: bool  # some row of the model has its accuracy measured: the budget applies
    instead: str = ""  # why it is not the PyTorch baseline's accuracy

    def describe(self) -> str:
        """The reference in words ("" where speed alone decides)."""
        if not self.measured:
            return ""
        if self.row is None:
            return f"no reference accuracy: {self.instead} and no FP32 artifact's was measured"
        if not self.instead:
            return "the PyTorch FP32 baseline"
        return f"{self.row.name}'s {_metric_text(self.row)}, the most accurate FP32 artifact's, since {self.instead}"


def _reference(rows: list[Row], baseline: Row | None) -> Reference:
    measured = any(_measured(row) for row in rows)
    if baseline is not None and _measured(baseline):
        return Reference(baseline, measured)
    fp32 = [row for row in rows if row.precision == "fp32" and _score(row) is not None]
    return Reference(max(fp32, key=lambda row: _score(row) or 0.0, default=None), measured, _no_baseline(baseline))


def _no_baseline(baseline: Row | None) -> str:
    """Why the PyTorch baseline gives no reference accuracy."""
    if baseline is None:
        return "the PyTorch baseline was not evaluated"
    if baseline.error:
        return f"the PyTorch baseline failed ({baseline.error})"
    if baseline.skipped:
        return f"the PyTorch baseline was skipped ({baseline.skipped})"
    note = baseline.accuracy.note if baseline.accuracy and baseline.accuracy.note else "not measured"
    return f"the PyTorch baseline's accuracy is unknown ({note})"


def _aside(reference: Reference) -> str:
    """What a verdict adds about the accuracy budget: that speed alone decided, or that the reference is not the
    PyTorch baseline's accuracy (the budget is never dropped without saying so)."""
    if not reference.measured:
        return " (accuracy not measured: ranked on speed alone)"
    if reference.row is None:
        return f" ({reference.describe()})"
    return f" (accuracy held to {reference.describe()})" if reference.instead else ""


def _doubt(baseline: Row | None, leading: list[Row], budget: Budget) -> str:
    """Why a ranking is not to be taken as confident, or "": other processes shared the CPUs while the baseline or
    the leading rows measured (``Row.busy_host``), or the baseline's own processes disagree by more than
    TIE_MARGIN in the host's fast state. Each round's ratio cancels a steady drift, but a baseline that cannot
    agree with itself says the host's speed moved under every row, by as much."""
    rows = [*([baseline] if baseline else []), *leading]
    busy = list(dict.fromkeys(row.name for row in rows if row.busy_host()))
    if busy:
        return f"not a confident ranking: other processes shared the CPUs while {', '.join(busy)} measured"
    spread = baseline.process_spread(budget.batch, budget.ranking) if baseline else None
    if baseline is None or spread is None or spread <= TIE_MARGIN:
        return ""
    return (f"not a confident ranking: the PyTorch baseline's {len(baseline.measurements)} processes disagree by "
            f"{spread:.0%} at b{budget.batch} in the host's fast state (more than the {TIE_MARGIN:.0%} tie margin), "
            "so its speedups are uncertain by as much")


def _exclusion(row: Row, reference: Reference, budget: Budget) -> str:
    """Why ``row`` cannot be shipped under ``budget``; empty when it can."""
    if row.error or row.skipped:
        return row.error or row.skipped
    options = budget.options
    if not row.round_throughputs(budget.batch, budget.ranking) or not _throughput(row, budget.batch, budget.ranking):
        what = "" if budget.ranking == INFERENCE else " end to end"
        return f"not measured{what} at batch {budget.batch}"
    why = _accuracy_exclusion(row, reference, budget)
    if why:
        return why
    p50 = _p50(row, budget.batch)
    if options.max_latency_ms is not None and p50 > options.max_latency_ms:
        return f"p50 {p50:.1f} ms over {options.max_latency_ms:g} ms"
    memory, where = row.deployed_memory_mb(), "GPU " if row.median_gpu_memory_mb() is not None else ""
    if options.max_memory_mb is not None and memory > options.max_memory_mb:
        return f"peak {where}memory {memory:.0f} MB over {options.max_memory_mb:g} MB"
    return ""


def _accuracy_exclusion(row: Row, reference: Reference, budget: Budget) -> str:
    """Why ``row``'s accuracy does not pass the budget, where the model's accuracy was measured: no reference to count
    a drop from, measured on images it was calibrated on (not evidence), unknown, or too low; "" when it passes."""
    if not reference.measured:
        return ""
    if reference.row is None:
        return reference.describe()
    if row.calibration_overlap and _measured(row):
        return f"{row.calibration_note()}, so it is not counted within the accuracy budget"
    drop = _accuracy_drop(row, reference)
    if drop is None:
        note = row.accuracy.note if row.accuracy and row.accuracy.note else "not measured"
        return f"accuracy unknown ({note}) where the others' was measured: cannot be held to the accuracy budget"
    if drop > budget.options.max_map_drop:
        return f"loses {drop:.2f} points (budget {budget.options.max_map_drop:g})"
    return ""


def _accuracy_drop(row: Row, reference: Reference) -> float | None:
    """Points lost against the reference in the family's metric (top-1 agreement: against the PyTorch baseline's
    predictions); None where the row's accuracy or the reference's is unknown."""
    if row is reference.row:
        return 0.0
    accuracy, score, base = row.accuracy, _score(row), _score(reference.row) if reference.row else None
    if accuracy and accuracy.top1_agreement is not None:
        return (1 - accuracy.top1_agreement) * 100
    return (base - score) * 100 if score is not None and base is not None else None


def _score(row: Row) -> float | None:
    """The row's own accuracy, which a drop is counted in: mAP50-95 (detectors), top-1 on labelled images
    (classifiers); None where not measured."""
    accuracy = row.accuracy
    if accuracy is None:
        return None
    return accuracy.map50_95 if accuracy.map50_95 is not None else accuracy.top1


def _measured(row: Row) -> bool:
    """The row has an accuracy figure: its own (``_score``) or its top-1 agreement with the baseline."""
    return _score(row) is not None or bool(row.accuracy and row.accuracy.top1_agreement is not None)


def _metric_text(row: Row) -> str:
    """The row's own accuracy as a report shows it ("" where not measured)."""
    score, accuracy = _score(row), row.accuracy
    if score is None or accuracy is None:
        return ""
    return f"{'mAP50-95' if accuracy.map50_95 is not None else 'top-1'} {score:.4f}"


def _clearly_faster(first: Row, second: Row, batch: int, part: str) -> bool:
    """``first`` won every round both were measured in, and by more than TIE_MARGIN at the median."""
    shared = first.round_ratios(second, batch, part)
    if not shared:
        return False
    return min(shared) > 1 and statistics.median(shared) > 1 + TIE_MARGIN


def _throughput(row: Row, batch: int, part: str = INFERENCE) -> float:
    fast = row.fast_state(batch, part)
    return fast.throughput_ips if fast else 0.0


def _p50(row: Row, batch: int) -> float:
    """The matrix's p50: the fast-state runs' (p99 stays over all runs: the slow state is part of the tail)."""
    fast = row.fast_state(batch)
    return fast.latency.p50_ms if fast else 0.0


def _candidate(row: Row, baseline: Row | None, reference: Reference, budget: Budget) -> Candidate:
    batch, ranking = budget.batch, budget.ranking
    rounds = list(row.round_throughputs(batch, ranking).values())
    path = row.entry or row.folder
    execution = row.execution(batch) or {}
    end_to_end = _throughput(row, batch, END_TO_END) or None
    ranked, base = _throughput(row, batch, ranking), _throughput(baseline, batch, ranking) if baseline else 0.0
    return Candidate(row.model, row.name, path, row.measurements[0].executed_precision, execution.get("label", ""),
                     round(ranked, 2), (round(min(rounds), 2), round(max(rounds), 2)),
                     round(ranked / base, 3) if base else None,
                     round(_throughput(row, batch), 2), round(end_to_end, 2) if end_to_end else None,
                     round(_p50(row, batch), 3), round(row.median_latency(batch, "p99_ms") or 0.0, 3),
                     round(row.deployed_memory_mb(), 1), _accuracy_text(row, reference),
                     snippet(row.target, row.precision, path, execution, row.input_form,
                             row.facts.imgsz if row.facts else 640),
                     "GPU" if row.median_gpu_memory_mb() is not None else "host")


def _accuracy_text(row: Row, reference: Reference) -> str:
    accuracy, drop = row.accuracy, _accuracy_drop(row, reference)
    if accuracy and accuracy.top1_agreement is not None:
        return f"top-1 agreement {accuracy.top1_agreement:.1%}"
    if not _metric_text(row):
        return accuracy.note if accuracy and accuracy.note else "not measured"
    return _metric_text(row) + (f" ({-drop:+.2f} points)" if drop else "")
