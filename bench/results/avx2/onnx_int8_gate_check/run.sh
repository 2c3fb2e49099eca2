#!/usr/bin/env bash
# Issue 46 (and 43's held-out gate): is onnx-int8's refusal on an AVX2 CPU the gate's doing or the file's, and do
# OpenVINO's activation ranges help it? 2026-11-28, the 2-core AMD EPYC VM with AVX2 only. Reuses the build of
# bench/int8_peers.py (main at c6fe141's code: yolov5n at 640, --calib-data coco128, onnx-int8 kept at
# --max-map-drop 4 in /tmp/peers; its gate record equals the refused build's, the calibration being deterministic).
set -u
A=/work/shared/assets
D=$(cd "$(dirname "$0")" && pwd)
# 1. the two gate records (route, drop, interval, the 64 held-out images)
python - <<'PY'
import json
out = {}
for label, path in (("main (c6fe141 code), onnx-int8, gated at 4 to be kept", "/tmp/peers/yolov5n/onnx-int8/manifest.json"),
                    ("main, openvino-int8", "/tmp/peers/yolov5n/openvino-int8/manifest.json")):
    g = json.load(open(path))["info"]["gate"]
    out[label] = {k: g[k] for k in ("route", "drop_points", "drop_90ci_points", "fp32_score", "score", "gate_images", "held_out")}
    out[label]["gated_images"] = g["images"]["gated"]
print(json.dumps(out, indent=1))
PY
# > gates.json
# 2. the evaluator on the same 64 held-out images (symlinks to coco128's images and labels in /tmp/gate64)
optimize eval /tmp/gateeval --data /tmp/gate64 --batch-sizes 1 --repeats 1 --min-time 0 --no-end-to-end --out /tmp/gateeval_report
cp /tmp/gateeval_report/matrix.md "$D/gate_images_eval_matrix.md"
# 3. onnx-int8 with NNCF's histogram activation ranges (openvino-int8's), then with its full BiasCorrection too,
#    each patch applied to a clone of main in /tmp/exp, built beside the cached onnx-fp32
for variant in histogram_ranges histogram_ranges_full_bias_correction; do
  (cd /tmp/exp && git checkout -q . && git apply "$D/$variant.patch")
  PYTHONPATH=/tmp/exp optimize build $A/weights/yolov5n.pt --targets onnx --precisions int8 --calib-data $A/coco128 \
    --parity-data $A/coco_val128 --out /tmp/expout --result "$D/${variant}_build.json"
done
# 4. the histogram variant kept at --max-map-drop 4 (beside a copy of the peers' onnx-fp32), evaluated on all of
#    coco_val128 beside main's onnx-int8 (an --add row), 3 interleaved rounds, b1 and b8
(cd /tmp/exp && git checkout -q . && git apply "$D/histogram_ranges.patch")
PYTHONPATH=/tmp/exp optimize build $A/weights/yolov5n.pt --targets onnx --precisions int8 --calib-data $A/coco128 \
  --parity-data $A/coco_val128 --out /tmp/expout2 --max-map-drop 4 --result "$D/histogram_ranges_kept_at_4_build.json"
cp /tmp/peers/yolov5n/onnx-int8/yolov5n.onnx /tmp/mainint8/yolov5n.onnx
optimize eval /tmp/expout2 --data $A/coco_val128 --batch-sizes 1,8 --repeats 3 --no-end-to-end \
  --add yolov5=/tmp/mainint8/yolov5n.onnx --out /tmp/histeval
cp /tmp/histeval/matrix.md "$D/histogram_ranges_coco_val128_matrix.md"
cp /tmp/histeval/results.json "$D/histogram_ranges_coco_val128_results.json"
