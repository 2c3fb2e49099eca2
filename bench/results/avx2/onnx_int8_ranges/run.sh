#!/usr/bin/env bash
# Issue 46, 2026-11-29, the 2-core AMD EPYC VM with AVX2 only. onnx-int8's activation ranges by calibration size,
# then the revision-10 file (histogram ranges from 32 images) evaluated beside openvino-int8 at b1, end to end on.
set -eu
A=../shared/assets
R=$PWD
# (run at 3d05340 as --patched /tmp/exp, this tree giving the min-max side; since 00ca905 both sides are trees)
git clone -q . /tmp/minmax && (cd /tmp/minmax && git checkout -q 3d05340)
git clone -q /tmp/minmax /tmp/exp && (cd /tmp/exp && git apply "$R/bench/results/avx2/onnx_int8_gate_check/histogram_ranges.patch")
python bench/onnx_int8_ranges.py --assets $A --minmax /tmp/minmax --histogram /tmp/exp --out /tmp/rng/out --save bench/results/avx2/onnx_int8_ranges
python bench/onnx_int8_ranges.py --assets $A --minmax /tmp/minmax --histogram /tmp/exp --out /tmp/rng/out --save bench/results/avx2/onnx_int8_ranges --sizes 24,48
# at 00ca905: the default build (64 calibration images; kept whatever it loses), its two INT8 files evaluated alone
cp -r /tmp/rng/out/base /tmp/rng/final
optimize build yolov5n --weights-dir $A/weights --targets onnx,openvino --precisions fp32,int8 \
  --parity-data $A/coco_val128 --calib-data $A/coco128 --max-map-drop 100 --out /tmp/rng/final
mkdir -p /tmp/e2e/artifacts/yolov5n/.cache
cp -r /tmp/rng/final/yolov5n/onnx-int8 /tmp/rng/final/yolov5n/openvino-int8 /tmp/e2e/artifacts/yolov5n/
cp -r /tmp/rng/final/yolov5n/.cache/load /tmp/e2e/artifacts/yolov5n/.cache/
optimize eval /tmp/e2e/artifacts --data $A/coco_val128 --batch-sizes 1 --repeats 3 --out /tmp/e2e/report
cp /tmp/e2e/report/matrix.md bench/results/avx2/onnx_int8_ranges/eval_b1_matrix.md
cp /tmp/e2e/report/results.json bench/results/avx2/onnx_int8_ranges/eval_b1_results.json
