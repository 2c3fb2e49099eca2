"""``optimize build`` as a function: checked options in, one DAG per model and input size run, typed results out.

The CLI shows its progress live; the Python API passes a callback or nothing. Everything the user got
wrong is found before anything is written (a ``UserError``: ``option_checks.py``, then ``build_requests.py``); a
node that fails does not stop the others.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from yolo_optimize.building.build_requests import VERDICTS, requests_for
from yolo_optimize.building.build_result import BuildResult, ModelBuild
from yolo_optimize.building.dag import NodeResult
from yolo_optimize.building.executor import Executor, LocalExecutor
from yolo_optimize.building.option_checks import check_options
from yolo_optimize.building.options import BuildOptions
from yolo_optimize.building.request import BuildRequest
from yolo_optimize.building.scheduling import Build
from yolo_optimize.declaring import LOCAL
from yolo_optimize.errors import UserError
from yolo_optimize.files import write_atomically
from yolo_optimize.limits.choices import slower_than_fp32_note

OnEvent = Callable[[str, NodeResult | None], None]  # (node, None) when it starts, (node, result) when it ends


def run_build(options: BuildOptions, on_event: OnEvent | None = None,
              on_model: Callable[[BuildRequest, list[str]], Any] | None = None) -> BuildResult:
    """Build every request of ``options``; ``on_model(request, nodes)`` returns a context the model's nodes are built
    in (the CLI's live table, whose ``event`` then receives the nodes' events). On a cluster every model (input size)
    builds at once and ``on_event`` receives ``<model>/<node>`` instead."""
    check_options(options)
    executor = executor_for(options)
    try:
        return _run_build(options, executor, on_event, on_model)
    finally:
        executor.close()


def _run_build(options: BuildOptions, executor: Executor, on_event: OnEvent | None,
               on_model: Callable[[BuildRequest, list[str]], Any] | None) -> BuildResult:
    from yolo_optimize.building.pipeline import plan
    from yolo_optimize.checkpoint import check_loads

    requests, host = requests_for(options, executor)
    asked = [f"{target}-{precision}" for target in options.targets for precision in options.precisions]
    notes = [note] if (note := slower_than_fp32_note(list(host.bf16), asked)) else []
    dags = []
    for request in requests:
        dag = Build(plan(request), request.source, options.out / request.source.model_id, device=request.device,
                    executor=executor, force=options.force, verify=options.verify, contents=request.contents)
        if "load" in dag.pending():
            executor.before_nodes(check_loads, request.source)  # a bad checkpoint stops here, nothing written
        dags.append((request, dag))
    if executor.models_at_once and len(dags) > 1:
        with ThreadPoolExecutor(len(dags)) as threads:
            built = list(threads.map(lambda item: _built(item[0], item[1], options, _Quiet(on_event, item[0])), dags))
    else:
        built = [_built(request, dag, options, on_model(request, dag.order) if on_model else _Quiet(on_event))
                 for request, dag in dags]
    result = BuildResult(options.out, built, notes)
    if options.result is not None:
        write_atomically(options.result, result.to_json())
    return result


def _built(request: BuildRequest, dag: Build, options: BuildOptions, display: Any) -> ModelBuild:
    from yolo_optimize.checkpoint import remember_family

    with display:
        results = dag.run(display.event)
    remember_family(request.source, options.out / VERDICTS)
    return ModelBuild(request.source.model_id, dag.model_dir, request.imgsz, results)


class _Quiet:
    """The nodes' events to a callback (or nowhere): the API's display; with ``request``, node names carry the model."""

    def __init__(self, on_event: OnEvent | None, request: BuildRequest | None = None) -> None:
        self.on_event = on_event
        self.prefix = f"{request.source.model_id}/" if request else ""

    def __enter__(self) -> _Quiet:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def event(self, node: str, result: NodeResult | None) -> None:
        if self.on_event:
            self.on_event(self.prefix + node, result)


def executor_for(options: BuildOptions) -> Executor:
    """This machine's worker processes, or a Ray cluster's nodes (``--executor ray``: every building node must see
    --out and the inputs at the driver's paths)."""
    if options.executor == LOCAL:
        if options.on or options.ray_address:
            raise UserError("--on and --ray-address go with --executor ray")
        return LocalExecutor(options.jobs, options.threads)
    if options.threads:
        raise UserError("--threads shares this machine's CPUs: with --executor ray each node builds on its own")
    from yolo_optimize.building.ray_executor import RayExecutor

    executor = RayExecutor(options.ray_address or "auto", options.on)
    weights = Path(options.model) if Path(options.model).suffix == ".pt" else None
    executor.check_shared(options.out, {"the checkpoint": weights, "--calib-data": options.calib_data,
                                        "--gate-data": options.gate_data, "--parity-data": options.parity_data,
                                        "--weights-dir": options.weights_dir})
    return executor
