"""What openvino-int8's Reorders after the Detect outputs are, and whether anything in the IR removes them (issue 46).

    python -m bench.archive.fastest_artifact.openvino_detect_outputs --artifacts <a build holding \
        yolov5n/openvino-int8 and openvino-fp32>
        [--repeats 5] --save bench/results/zen4

On a CPU where the build chooses bf16 float parts (``INFERENCE_PRECISION_HINT`` bf16 in the artifact's
compile_config), OpenVINO's CPU plugin keeps the graph's tail, from the outputs back to the last convolutions, in
f32, and lets those convolutions write bf16: each Detect output then passes through a Reorder that converts it to
f32 before the decode reads it. This script:

- compiles each IR at batch 1 with bf16 float parts twice, as built and with the Detect output convolutions (those
  from which an output is reached through no other convolution) marked ``disable_fp16_compression`` in their
  runtime info, OpenVINO's per-node mark for keeping a node's precision, and reads the precision each convolution
  writes in the executed graph (the FP32 IR is the control, without the low-precision passes in between);
- profiles openvino-int8 per layer, as the runner compiles it, with its float parts in bf16 (the build's choice)
  and in f32, in interleaved fresh processes, and sums the Detect convolutions, the Reorders after them, the
  decode's fused ``Subgraph``s and all layers.
"""

from __future__ import annotations

import statistics
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from bench.harness import by_name, paired_rounds, parser_for, results_folder, save
from yolo_optimize.artifact import Manifest
from yolo_optimize.families import family_named
from yolo_optimize.host.processes import in_own_process
from yolo_optimize.images import list_images
from yolo_optimize.metadata import ArtifactMetadata

MARK = "disable_fp16_compression_0"  # ov::DisableFP16Compression's key in a node's runtime info
PRECISIONS = ("bf16", "f32")


def detect_outputs(model: Any) -> list[str]:
    """The convolutions from which an output is reached through no other convolution."""
    found, seen = [], set()
    waiting = [result.input(0).get_source_output().get_node() for result in model.get_results()]
    while waiting:
        node = waiting.pop()
        if node.get_friendly_name() in seen:
            continue
        seen.add(node.get_friendly_name())
        if node.get_type_name() == "Convolution":
            found.append(node.get_friendly_name())
            continue
        waiting.extend(inputs.get_source_output().get_node() for inputs in node.inputs())
    return sorted(found)


def written_precisions(entry: Path, marked: bool) -> dict[str, str]:
    """Detect output convolution -> the precision it writes in the executed graph, compiled with bf16 float parts."""
    import openvino as ov

    core = ov.Core()
    model = core.read_model(str(entry))
    model.reshape({0: [1, *model.input(0).partial_shape[1:].to_shape()]})
    names = detect_outputs(model)
    for op in model.get_ops():
        if marked and op.get_friendly_name() in names:
            op.get_rt_info()[MARK] = ""
    compiled = core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "bf16"})
    return {op.get_friendly_name(): op.get_rt_info()["outputPrecisions"].astype(str)
            for op in compiled.get_runtime_model().get_ops() if op.get_friendly_name() in names}


def layer_sums(folder: Path, manifest: Manifest, precision: str, pixels: Path, threads: int) -> dict[str, float]:
    """One fresh process's per-layer profile of the artifact at batch 1 with its float parts in ``precision``."""
    import openvino as ov

    from yolo_optimize.runtime.runners import open_runner

    metadata = replace(ArtifactMetadata.of(manifest), compile_config={"INFERENCE_PRECISION_HINT": precision})
    names = detect_outputs(ov.Core().read_model(str(folder / str(manifest.entry))))
    with (open_runner(folder, replace(manifest, metadata=metadata.to_dict()), threads=threads) as runner,
          tempfile.TemporaryDirectory() as work):
        profile = runner.profile_layers(runner.input_of(np.load(pixels)[:1]), 20, Path(work) / "trace.json")
    sums = {"detect convolutions": 0.0, "their reorders": 0.0, "decode subgraphs": 0.0, "all layers": 0.0}
    for layer in profile.layers:  # ms per pass
        ms = layer.ms
        sums["all layers"] += ms
        if layer.name in names:
            sums["detect convolutions"] += ms
        elif layer.kind == "Reorder" and any(layer.name.startswith(name) for name in names):
            sums["their reorders"] += ms
        elif layer.kind == "Subgraph" and "chain" in layer.name:
            sums["decode subgraphs"] += ms
    return {key: round(value, 3) for key, value in sums.items()}


def main() -> None:
    parser = parser_for(__doc__)
    parser.add_argument("--artifacts", type=Path, required=True)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5, help="fresh processes per precision, in turns")
    parser.add_argument("--save", type=Path, default=results_folder("openvino_detect_outputs"))
    parser.add_argument("--data", type=Path, default=Path("../shared/assets/coco_val128"))
    args = parser.parse_args()

    int8, fp32 = args.artifacts / "yolov5n" / "openvino-int8", args.artifacts / "yolov5n" / "openvino-fp32"
    results: dict[str, Any] = {"written": {}}
    for folder in (int8, fp32):
        entry = folder / str(Manifest.read(folder).entry)
        results["written"][folder.name] = {("marked" if marked else "as built"): in_own_process(
            by_name(written_precisions), entry, marked) for marked in (False, True)}
        print(f"{folder.name}, what the Detect output convolutions write with bf16 float parts: "
              f"{results['written'][folder.name]}")
    family = family_named("yolov5")
    manifest = Manifest.read(int8)
    with tempfile.TemporaryDirectory(prefix="detect-outputs-") as work:
        pixels = Path(work) / "pixels.npy"
        np.save(pixels, np.stack([family.preprocess(path, 640).pixels for path in list_images(args.data)[:1]]))
        runs = paired_rounds(PRECISIONS, args.repeats, lambda precision: in_own_process(
            by_name(layer_sums), int8, manifest, precision, pixels, args.threads))
    rounds = dict(zip(PRECISIONS, runs))
    results["layers_ms"] = {precision: {"rounds": runs, "median": {key: round(statistics.median(
        run[key] for run in runs), 3) for key in runs[0]}} for precision, runs in rounds.items()}
    for precision in PRECISIONS:
        print(f"openvino-int8, float parts in {precision}, per pass (median of {args.repeats} processes): "
              f"{results['layers_ms'][precision]['median']}")
    save(args.save, "openvino_detect_outputs", {"settings": {k: str(v) for k, v in vars(args).items()}, **results},
         args.threads)


if __name__ == "__main__":
    main()
