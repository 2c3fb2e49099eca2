"""The Python API: the README's example end to end on real artifacts, typed results, silent by default with a callback
to hook, and the caller's process left as it was (importing the package changes nothing)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import VAL_DATA, WEIGHTS

IMPORT_ONLY = """
import json, os, sys
before = dict(os.environ)
import yolo_optimize
after_package = dict(os.environ) == before
import yolo_optimize.api
heavy = [name for name in ("torch", "onnxruntime", "openvino", "nncf", "cv2", "yolov5", "ultralytics")
         if name in sys.modules]
print(json.dumps({"package": after_package, "api": dict(os.environ) == before, "heavy": heavy,
                  "telemetry_stub": "openvino_telemetry" in sys.modules}))
"""


def test_importing_the_package_and_its_api_changes_nothing_and_imports_no_runtime() -> None:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("YOLO", "MPLCONFIGDIR", "ORT_", "NNCF"))}
    result = subprocess.run([sys.executable, "-c", IMPORT_ONLY], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    found = json.loads(result.stdout)
    assert found == {"package": True, "api": True, "heavy": [], "telemetry_stub": False}


NAMES = """
import inspect, json
import yolo_optimize as yo
found = {"before": [inspect.isfunction(getattr(yo, name)) for name in ("build", "evaluate", "recommend")]}
import yolo_optimize.api
import yolo_optimize.building as building
import yolo_optimize.evaluation as evaluation
found["parts"] = [inspect.ismodule(part) and hasattr(part, "__path__") for part in (building, evaluation)]
found["after"] = [inspect.isfunction(getattr(yo, name)) for name in ("build", "evaluate", "recommend")]
print(json.dumps(found))
"""


def test_the_api_functions_and_the_subpackages_never_take_each_others_names() -> None:
    """``yo.build``/``yo.evaluate`` stay functions after every subpackage is imported, and the subpackages stay
    packages: no name of the package is bound twice (issue 47; the order of imports cannot change it)."""
    result = subprocess.run([sys.executable, "-c", NAMES], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout) == {"before": [True] * 3, "parts": [True] * 2, "after": [True] * 3}


def test_bad_input_raises_the_user_error_the_package_exports(tmp_path: Path) -> None:
    import yolo_optimize as yo
    from yolo_optimize.errors import UserError

    assert yo.UserError is UserError
    with pytest.raises(yo.UserError, match="unknown model 'yolo27n'"):
        yo.build("yolo27n", random_weights=True, out=tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_the_readme_example_builds_evaluates_and_recommends_with_typed_results(built: Path, tmp_path: Path) -> None:
    """yo.build on a copy of the session build (every node cached: the same parameters), yo.evaluate, yo.recommend:
    typed results, progress only through the callback, and os.environ the same before and after."""
    import yolo_optimize as yo
    from yolo_optimize.building.build_result import BuildResult
    from yolo_optimize.evaluation.results import Report

    out = tmp_path / "artifacts"
    shutil.copytree(built.parent, out)
    for other in ("torchscript-fp32", "onnx-fp16", "openvino-fp16"):  # only what this build asks for is evaluated
        shutil.rmtree(out / "yolov5n" / other)
    before, events = dict(os.environ), []
    build = yo.build(WEIGHTS, targets=["onnx", "openvino"], precisions=["fp32"], parity_data=VAL_DATA, out=out,
                     progress=lambda text, done, total: events.append(text))
    assert isinstance(build, BuildResult) and build.ok and build.out == out
    statuses = {result.node: result.status for result in build.models[0].nodes}
    assert statuses["onnx-fp32"] == statuses["openvino-fp32"] == "cached" and events
    report = yo.evaluate(build.out, data=VAL_DATA, batch_sizes=[1], max_images=8, min_time=0, repeats=1,
                         end_to_end=False)
    assert isinstance(report, Report) and {row.name for row in report.rows} >= {"pytorch-fp32", "onnx-fp32"}
    best = yo.recommend(report, max_map_drop=1.0, batch_size=1)
    assert best.artifact in {row.name for row in report.rows} and best.speedup and best.speedup > 0
    assert best.path and "import" in best.load_snippet and best.model == "yolov5n"
    assert dict(os.environ) == before


def test_the_api_refuses_bad_input_in_one_sentence_naming_it(tmp_path: Path) -> None:
    import yolo_optimize as yo
    from yolo_optimize.errors import UserError

    with pytest.raises(UserError, match="build\\(\\): unknown key 'batch_size'"):
        yo.build("yolov5n", batch_size=2)
    with pytest.raises(UserError, match="build\\(\\): jobs: must be an integer >= 1, got 0"):
        yo.build("yolov5n", jobs=0)
    with pytest.raises(UserError, match="evaluate\\(\\): unknown key 'batch_size'"):
        yo.evaluate(tmp_path, batch_size=2)
    with pytest.raises(UserError, match="evaluate\\(\\): mode: must be one of auto, latency, throughput, got 'fast'"):
        yo.evaluate(tmp_path, mode="fast")
    with pytest.raises(UserError, match="evaluate\\(\\): repeats: must be an integer >= 1, got 'x'"):
        yo.evaluate(tmp_path, repeats="x")  # type: ignore[arg-type]  # the wrong type on purpose
    with pytest.raises(UserError, match="evaluate\\(\\): batch_sizes: "):
        yo.evaluate(tmp_path, batch_sizes=[0])
    with pytest.raises(UserError, match=f"{tmp_path / 'g5'} holds no readable results.json"):
        yo.recommend(tmp_path / "g5")
    with pytest.raises(UserError, match="recommend\\(\\): by: must be one of inference, e2e, got 'g5'"):
        yo.recommend(tmp_path, by="g5")
    with pytest.raises(UserError, match="recommend\\(\\): max_latency_ms: must be a finite number > 0, got -1"):
        yo.recommend(tmp_path, max_latency_ms=-1)
    with pytest.raises(UserError, match="recommend\\(\\): max_map_drop: must be a finite number >= 0, got nan"):
        yo.recommend(tmp_path, max_map_drop=float("nan"))
    with pytest.raises(UserError, match="recommend\\(\\): max_latency_ms: must be a finite number > 0, got nan"):
        yo.recommend(tmp_path, max_latency_ms=float("nan"))
    with pytest.raises(UserError, match="recommend\\(\\): report: must be a Report or an eval folder, got dict"):
        yo.recommend({})  # type: ignore[arg-type]  # the wrong type on purpose


README_SHAPED = """
import yolo_optimize as yo

build = yo.build({weights!r}, targets=["onnx"], precisions=["fp32"], imgsz=[320], batch_sizes=[1], out={out!r},
                 parity_data={data!r})
report = yo.evaluate(build.out, data={data!r}, batch_sizes=[1], max_images=4, min_time=0, repeats=1,
                     end_to_end=False)
best = yo.recommend(report, max_map_drop=1.0, batch_size=1)
print("shipping", best.artifact, best.speedup)
"""


@pytest.mark.slow
def test_the_readme_example_runs_unguarded_as_a_script_from_stdin_and_with_c(tmp_path: Path) -> None:
    """The README's example as users paste it (no ``if __name__ == "__main__"``), with a small build: saved to a file
    and run, piped to ``python -``, and given to ``python -c``. The workers never import the caller's main (spawn
    would run the whole script again in each, or fail to import ``<stdin>``). The first run builds in workers; every
    run evaluates in measuring processes."""
    script = tmp_path / "example.py"
    script.write_text(README_SHAPED.format(weights=str(WEIGHTS), out=str(tmp_path / "artifacts"), data=str(VAL_DATA)))
    env = {**os.environ, "YOLO_OPTIMIZE_OFFLINE": "1"}
    runs = {"file": ([script], None), "stdin": (["-"], script.read_text()), "-c": (["-c", script.read_text()], None)}
    for how, (args, stdin) in runs.items():
        result = subprocess.run([sys.executable, *args], input=stdin, capture_output=True, text=True, env=env,
                                cwd=tmp_path, timeout=600)
        assert result.returncode == 0, f"{how}: {result.stderr[-3000:]}"
        assert result.stdout.startswith("shipping "), f"{how}: {result.stdout}"
        assert "bootstrapping phase" not in result.stderr and "Traceback" not in result.stderr, how


def test_a_build_with_a_failed_node_raises_build_failed_with_every_result(built: Path, tmp_path: Path) -> None:
    """No exporter writes opset 99 (on a copy of the session build: the rest is cached): the API raises instead of
    returning a result that looks like a success."""
    import yolo_optimize as yo
    from yolo_optimize.errors import BuildFailed

    shutil.copytree(built.parent, tmp_path, dirs_exist_ok=True)
    with pytest.raises(BuildFailed, match=r"^1 node\(s\) failed: yolov5n/onnx-export: ") as failed:
        yo.build(WEIGHTS, targets=["onnx"], precisions=["fp32"], opset=99, out=tmp_path, parity_data=VAL_DATA)
    statuses = {result.node: result.status for result in failed.value.result.models[0].nodes}
    assert statuses["onnx-export"] == "failed" and statuses["onnx-fp32"] == "skipped" and statuses["load"] == "cached"
