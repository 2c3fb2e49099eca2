#!/usr/bin/env bash
# Main (144f8c3) onnx-int8 and openvino-int8 against the branch issue-46-channels-last-head's (YOLOv5's head decoded
# channels last; onnx-int8's integer head reads its product as it comes), checked out in /tmp/mainclone and /tmp/cl,
# built with the build's own recipe (onnx-int8 gated at 4 points: on AVX2 its 7-bit weights lose more than 1 on the
# gate, README), evaluated in one interleaved evaluation with --profile (the branch's files as --add rows).
set -u
A=/work/shared/assets
export XDG_CACHE_HOME=/tmp/lever/cache YOLO_OPTIMIZE_OFFLINE=1
mkdir -p /tmp/lever2
for side in main cl; do
  src=/tmp/mainclone; [ $side = cl ] && src=/tmp/cl
  start=$(date +%s)
  PYTHONPATH=$src /work/main/.venv/bin/python -m yolo_optimize build $A/weights/yolov5n.pt --targets onnx,openvino \
    --precisions int8 --max-map-drop 4 --calib-data $A/coco128 --parity-data $A/coco_val128 --out /tmp/lever/$side \
    > /tmp/lever2/build-$side.log 2>&1
  echo "$side build rc $? $(( $(date +%s) - start )) s"
done
xml=$(ls /tmp/lever/cl/yolov5n/openvino-int8/*/*.xml)
onnx=$(ls /tmp/lever/cl/yolov5n/onnx-int8/*.onnx)
start=$(date +%s)
PYTHONPATH=/tmp/mainclone /work/main/.venv/bin/python -m yolo_optimize eval /tmp/lever/main --data $A/coco_val128 \
  --out /tmp/lever2/report --batch-sizes 1,8 --repeats 3 --profile --add "yolov5=$xml" --add "yolov5=$onnx" \
  > /tmp/lever2/eval.log 2>&1
echo "eval rc $? $(( $(date +%s) - start )) s"
# then: cp /tmp/lever2/report/{results.json,matrix.md} . && python /work/main/bench/per_process.py results.json --label channels-last > per_process.txt
# and: python bench/ceiling.py --report /tmp/lever2/report --save bench/results/avx2
