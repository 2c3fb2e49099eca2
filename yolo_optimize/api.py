"""The Python API: the ``optimize`` command's build, evaluation and recommendation as functions with typed results.

    import yolo_optimize as yo

    build = yo.build("yolov5n", targets=["onnx", "openvino"], precisions=["fp32", "int8"], calib_data="coco128/")
    report = yo.evaluate(build.out, data="coco_val128/", batch_sizes=[1, 8])
    best = yo.recommend(report, max_map_drop=1.0, batch_size=1)
    print(best.artifact, best.speedup, best.load_snippet)

Every keyword is the command's option of the same name (``optimize build --help``, ``optimize eval --help``,
``optimize recommend --help``); build and evaluate also take ``config=`` (a TOML file or a dict), overridden by the
keywords. Silent by default:
``progress(text, done, total)`` receives each step. The process-wide settings the tools need (offline,
no telemetry, nothing written to ``$HOME``, the measuring processes' allocator) hold only while a call
runs and in the processes it starts: your ``os.environ`` is the same after the call as before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from yolo_optimize.building.build_result import BuildResult
from yolo_optimize.building.builder import run_build
from yolo_optimize.building.dag import NodeResult
from yolo_optimize.building.options import build_options
from yolo_optimize.declaring import LOCAL, record_of
from yolo_optimize.errors import BuildFailed, UserError
from yolo_optimize.evaluation.reporting.options import RecommendOptions
from yolo_optimize.evaluation.reporting.recommend import Candidate, Recommendation
from yolo_optimize.evaluation.results import Report
from yolo_optimize.host import environment

Progress = Callable[[str, int, int], None]  # (what is happening, steps done, steps in all)


def build(model: str | Path | None = None, *, config: str | Path | Mapping[str, Any] | None = None,
          progress: Progress | None = None, **options: Any) -> BuildResult:
    """Build ``model`` (or the config's) to every target x precision asked for; the result lists every node. A build
    in which a node failed raises ``BuildFailed`` (its ``result`` has every node), as the command exits 1."""
    if model is not None:
        options["model"] = str(model)
    values = build_options(Path(config) if isinstance(config, str) else config, options, "build()")
    with environment.configured():
        result = run_build(values, on_event=_node_progress(progress) if progress else None)
    if not result.ok:
        raise BuildFailed(result)
    return result


def _node_progress(progress: Progress) -> Callable[[str, NodeResult | None], None]:
    done = [0]

    def event(node: str, result: NodeResult | None) -> None:
        if result is not None:
            done[0] += 1
        progress(f"{node}: {result.status if result else 'started'}", done[0], 0)

    return event


def evaluate(root: str | Path | None = None, *, config: str | Path | Mapping[str, Any] | None = None,
             progress: Progress | None = None, **options: Any) -> Report:
    """Measure every artifact under ``root`` (and the ``add``-ed model files) with the evaluation protocol; with
    ``out``, also write the report's files there (in ``<out>-failed`` when no artifact could be measured). The options
    are ``EvalOptions``' (evaluation/options.py), as the command names them; ``config=`` as for ``build``."""
    from yolo_optimize.evaluation.options import eval_options
    from yolo_optimize.evaluation.session import EvalRequest, run_evaluation

    if root is not None:
        options["root"] = root
    values = eval_options(Path(config) if isinstance(config, str) else config, options, "evaluate()")
    if values.executor != LOCAL or values.on:
        raise UserError("evaluate(): measures on this machine; on a Ray cluster's hosts use "
                        "'optimize eval --executor ray --on ...'")
    request = EvalRequest.of(values)
    with environment.configured():
        return run_evaluation(request, progress or (lambda text, done, total: None))


@dataclass(frozen=True)
class Pick:
    """What to ship for one model and batch size: the recommendation (its choice None when nothing meets the
    budget), with the figures a caller reads most."""

    recommendation: Recommendation

    @property
    def batch_size(self) -> int:
        return self.recommendation.batch

    @property
    def model(self) -> str:
        return self.recommendation.model

    @property
    def choice(self) -> Candidate | None:
        return self.recommendation.choice

    @property
    def runner_up(self) -> Candidate | None:
        return self.recommendation.runner_up

    @property
    def tie(self) -> bool:
        return self.recommendation.tie

    @property
    def verdict(self) -> str:
        return self.recommendation.verdict

    @property
    def doubt(self) -> str:
        """Why the ranking is not confident (a busy host, a baseline that disagrees with itself), or ""."""
        return self.recommendation.doubt

    @property
    def artifact(self) -> str | None:
        return self.choice.artifact if self.choice else None

    @property
    def path(self) -> str | None:
        return self.choice.path if self.choice else None

    @property
    def speedup(self) -> float | None:
        return self.choice.speedup if self.choice else None

    @property
    def load_snippet(self) -> str:
        return self.choice.snippet if self.choice else ""


def recommend(report: Report | str | Path, **options: Any) -> Pick:
    """The artifact to ship from ``report`` (an evaluation's, or its folder) for one model and one batch size. The
    options are ``RecommendOptions``' (evaluation/reporting/options.py), as the command names them; where the report
    has several models or measured several batch sizes, name one (``model=``, ``batch_size=``): the command prints
    every one."""
    from yolo_optimize.evaluation.reporting.recommend import recommendations
    from yolo_optimize.evaluation.reporting.report import load_report

    wanted = record_of(RecommendOptions, options, "recommend()")
    if not isinstance(report, (Report, str, Path)):
        raise UserError(f"recommend(): report: must be a Report or an eval folder, got {type(report).__name__}")
    found = report if isinstance(report, Report) else load_report(Path(report))
    picks = recommendations(found, wanted)
    models = list(dict.fromkeys(pick.model for pick in picks))
    if len(models) != 1:
        raise UserError(f"the report has models {', '.join(models)}: name one with model=")
    if len(picks) != 1:
        raise UserError(f"the report measured batch sizes {list(found.settings.batch_sizes)}: name one with "
                        "batch_size=")
    return Pick(picks[0])
