#!/usr/bin/env bash
# Issue 46: openvino-int8's float parts in bf16 (its compile_config on Zen 4) against the same IR in f32 (the IR as an
# --add row: a file this tool did not build runs with f32 float parts), one interleaved evaluation, 4 rounds.
# bench-int8-peers/ is bench/int8_peers.py's --out; /tmp/ab holds its openvino-int8 alone.
set -euo pipefail
rm -rf /tmp/ab && mkdir /tmp/ab /tmp/ab/yolov5n
cp -r bench-int8-peers/.checkpoints /tmp/ab/
cp -r bench-int8-peers/yolov5n/{openvino-int8,.store,.cache} /tmp/ab/yolov5n/
cp -r /tmp/ab/yolov5n/openvino-int8/yolov5n_openvino_model /tmp/ab/f32copy
YOLO_OPTIMIZE_OFFLINE=1 python -m yolo_optimize eval /tmp/ab --add yolov5=/tmp/ab/f32copy/yolov5n.xml --no-accuracy \
    --no-end-to-end --repeats 4 --min-time 2 --out /tmp/ab/report
cp /tmp/ab/report/{matrix.md,results.json} bench/results/zen4/openvino_int8_float_parts/
