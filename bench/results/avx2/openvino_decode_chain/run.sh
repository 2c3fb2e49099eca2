#!/usr/bin/env bash
# Main (6c7bf71) openvino-fp32 and openvino-int8 against the branch issue-46-openvino-decode-chain's (the IR's head
# decode as one elementwise chain, optimize/decode_chain.py), checked out in /tmp/mainclone and /tmp/chain, built
# with the build's own recipe (gated at 4 points, as the earlier lever runs), evaluated in one interleaved
# evaluation with --profile (the branch's files as --add rows).
set -u
A=/work/shared/assets
export XDG_CACHE_HOME=/tmp/lever/cache YOLO_OPTIMIZE_OFFLINE=1
rm -rf /tmp/lever/main /tmp/lever/chain /tmp/lever3 && mkdir -p /tmp/lever3
for side in main chain; do
  src=/tmp/mainclone; [ $side = chain ] && src=/tmp/chain
  start=$(date +%s)
  PYTHONPATH=$src /work/main/.venv/bin/python -m yolo_optimize build $A/weights/yolov5n.pt --targets openvino \
    --precisions fp32,int8 --max-map-drop 4 --calib-data $A/coco128 --parity-data $A/coco_val128 \
    --out /tmp/lever/$side > /tmp/lever3/build-$side.log 2>&1
  echo "$side build rc $? $(( $(date +%s) - start )) s"
done
fp32=$(ls /tmp/lever/chain/yolov5n/openvino-fp32/*/*.xml)
int8=$(ls /tmp/lever/chain/yolov5n/openvino-int8/*/*.xml)
start=$(date +%s)
PYTHONPATH=/tmp/mainclone /work/main/.venv/bin/python -m yolo_optimize eval /tmp/lever/main --data $A/coco_val128 \
  --out /tmp/lever3/report --batch-sizes 1,8 --repeats 3 --profile --add "yolov5=$fp32" --add "yolov5=$int8" \
  > /tmp/lever3/eval.log 2>&1
echo "eval rc $? $(( $(date +%s) - start )) s"
# then: cp /tmp/lever3/report/{results.json,matrix.md} . && python /work/main/bench/per_process.py results.json --label chain > per_process.txt
# and: python bench/ceiling.py --report /tmp/lever3/report --save bench/results/avx2
