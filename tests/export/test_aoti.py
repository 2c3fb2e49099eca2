"""AOTInductor packages: loadable without the model's code, as close to PyTorch as their precision allows, bound to
the CPU kind that compiled them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from yolo_optimize.artifact import Manifest
from yolo_optimize.building.parity import REFERENCE_FILE, TOLERANCES
from yolo_optimize.export.aoti import AotiCompile, AotiConfig
from yolo_optimize.host.cpu import has_native_bf16
from yolo_optimize.runtime.runners import open_runner

# A fresh interpreter where neither yolov5 nor its training-repo module names can be imported: only torch.
LOAD_WITHOUT_MODEL_CODE = """
import json, sys
for name in ("yolov5", "models", "utils", "yolo_optimize", "ultralytics"):
    sys.modules[name] = None
import numpy as np, torch
package = torch._inductor.aoti_load_package(sys.argv[1])
images = np.load(sys.argv[2])["images"]
batch = torch.from_numpy(np.ascontiguousarray(images.transpose(0, 3, 1, 2), dtype=np.float32) / 255.0)
with torch.inference_mode():
    np.save(sys.argv[3], package(batch).float().numpy())
print(json.dumps(package.get_metadata()))
"""


def aoti_precisions() -> list[str]:
    return ["fp32", "bf16"] if has_native_bf16() else ["fp32"]


@pytest.mark.parametrize("precision", aoti_precisions())
def test_a_package_runs_in_a_process_without_the_models_code_and_matches_pytorch(built_int8: Path, tmp_path: Path,
                                                                                  precision: str) -> None:
    folder = built_int8 / f"aoti-{precision}"
    manifest = Manifest.read(folder)
    reference = built_int8 / ".cache" / "reference" / REFERENCE_FILE
    result = subprocess.run([sys.executable, "-c", LOAD_WITHOUT_MODEL_CODE, str(folder / str(manifest.entry)),
                             str(reference), str(tmp_path / "out.npy")], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    metadata = json.loads(result.stdout.strip().splitlines()[-1])
    assert metadata["precision"] == precision and metadata["AOTI_DEVICE_KEY"] == "cpu"
    assert json.loads(metadata["names"])[0] == "person" and json.loads(metadata["imgsz"]) == [640, 640]
    got, want = np.load(tmp_path / "out.npy"), np.load(reference)["outputs"]
    assert got.shape == want.shape
    assert np.abs(got[..., 4:] - want[..., 4:]).max() <= TOLERANCES[precision].max_score_diff
    assert manifest.parity and manifest.parity["passed"] and manifest.parity["executed_precision"] == precision


def test_a_package_is_refused_on_a_cpu_without_the_instruction_sets_it_was_compiled_for(built_int8: Path,
                                                                                         tmp_path: Path) -> None:
    folder = shutil.copytree(built_int8 / "aoti-fp32", tmp_path / "aoti-fp32")
    manifest = Manifest.read(folder)
    cpu = {**manifest.info["built_on_cpu"], "isa": [*manifest.info["built_on_cpu"]["isa"], "amx_fp8"]}
    with pytest.raises(RuntimeError, match="compiled for CPUs with amx_fp8, which this CPU lacks: build it here"):
        with open_runner(folder, replace(manifest, info={**manifest.info, "built_on_cpu": cpu})):
            pass


def test_bf16_packages_are_built_only_where_the_cpu_computes_bf16() -> None:
    reason = AotiCompile(AotiConfig(640, "bf16")).unavailable_reason("cpu")
    assert (reason is None) == has_native_bf16(), reason
    assert AotiCompile(AotiConfig(640, "fp32")).unavailable_reason("cuda").startswith(
        "the aoti target is compiled for the CPU here (--device cpu)")


def test_the_package_is_keyed_to_the_instruction_sets_it_was_compiled_for(built_int8: Path) -> None:
    from yolo_optimize.host.cpu import cpu_facts

    assert AotiCompile(AotiConfig(640, "fp32")).environment() == {"cpu_isa": " ".join(cpu_facts()["isa"])}
    assert Manifest.read(built_int8 / "aoti-fp32").info["built_on_cpu"]["isa"] == cpu_facts()["isa"]
