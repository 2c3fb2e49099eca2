#!/usr/bin/env bash
# Main (c6fe141) onnx-int8 and openvino-int8 against the branch issue-46-chain-head's at 3b98ff7, checked out in /tmp/chain (chain head; onnx-int8's integer head follows the chain),
# built with the build's own recipe (onnx-int8 gated at 4 points: on AVX2 its 7-bit weights lose 3.05 on the gate, README), evaluated in one interleaved evaluation (the branch's files as --add rows).
set -u
A=/work/shared/assets
export XDG_CACHE_HOME=/tmp/lever/cache YOLO_OPTIMIZE_OFFLINE=1
for side in main chain; do
  src=/work/main; [ $side = chain ] && src=/tmp/chain
  start=$(date +%s)
  PYTHONPATH=$src /work/main/.venv/bin/optimize build $A/weights/yolov5n.pt --targets onnx,openvino --precisions int8 --max-map-drop 4 \
    --calib-data $A/coco128 --parity-data $A/coco_val128 --out /tmp/lever/$side > /tmp/lever2/build-$side.log 2>&1
  echo "$side build rc $? $(( $(date +%s) - start )) s"
done
xml=$(ls /tmp/lever/chain/yolov5n/openvino-int8/*/*.xml)
onnx=$(ls /tmp/lever/chain/yolov5n/onnx-int8/*.onnx)
start=$(date +%s)
PYTHONPATH=/work/main /work/main/.venv/bin/optimize eval /tmp/lever/main --data $A/coco_val128 --out /tmp/lever2/report \
  --batch-sizes 1,8 --repeats 3 --add "yolov5=$xml" --add "yolov5=$onnx" > /tmp/lever2/eval.log 2>&1
echo "eval rc $? $(( $(date +%s) - start )) s"
# then: cp /tmp/lever2/report/{results.json,matrix.md} . && python /work/main/bench/per_process.py results.json --label chain > per_process.txt
