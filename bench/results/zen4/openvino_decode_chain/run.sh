#!/usr/bin/env bash
# Issue 46 on Zen 4: OpenVINO's decode chain (export/decode_chain.py, since d63a79d) with and without. The build
# before it (6c7bf71, checked out in /tmp/prechain) and main (/work/main) build yolov5n 640 openvino fp32 and int8
# (gated at 4 points, as the AVX2 run); one evaluation with every file as an --add row, so that all four run alike
# (an --add IR's float parts compute in f32, int8 included), b1 and b8, 3 rounds, no accuracy (the AVX2 run found
# the same mAP50-95 with and without).
set -u
A=/work/shared/assets
export YOLO_OPTIMIZE_OFFLINE=1
for side in prechain chain; do
  src=/tmp/prechain; [ $side = chain ] && src=/work/main
  cd $src  # python -m puts the working folder first on the path
  start=$(date +%s)
  PYTHONPATH=$src /work/main/.venv/bin/python -m yolo_optimize build $A/weights/yolov5n.pt --targets openvino \
    --precisions fp32,int8 --max-map-drop 4 --calib-data $A/coco128 --parity-data $A/coco_val128 \
    --out /tmp/lever/$side > /tmp/lever/build-$side.log 2>&1
  echo "$side build rc $? $(( $(date +%s) - start )) s"
done
mkdir -p /tmp/lever/files
for side in prechain chain; do for p in fp32 int8; do
  cp -r /tmp/lever/$side/yolov5n/openvino-$p/yolov5n_openvino_model /tmp/lever/files/$side-$p
done; done
cd /tmp  # main's code for the evaluation
start=$(date +%s)
/work/main/.venv/bin/python -m yolo_optimize eval /tmp/lever/files/prechain-fp32/yolov5n.xml \
  --add yolov5=/tmp/lever/files/chain-fp32/yolov5n.xml --add yolov5=/tmp/lever/files/prechain-int8/yolov5n.xml \
  --add yolov5=/tmp/lever/files/chain-int8/yolov5n.xml --checkpoint $A/weights/yolov5n.pt --family yolov5 \
  --no-accuracy --no-end-to-end --batch-sizes 1,8 --repeats 3 --min-time 2 --out /tmp/lever/report2 > /tmp/lever/eval.log 2>&1
echo "eval rc $? $(( $(date +%s) - start )) s"
# then: cp /tmp/lever/report2/{results.json,matrix.md} bench/results/zen4/openvino_decode_chain/
