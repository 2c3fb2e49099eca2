# 2026-12-07, the 2-core AMD EPYC Zen 4 VM (avx2, avx512_bf16, avx512_vnni), from the repository root.
# The artifacts are bench/preparation.py's build (yolov5n, default build's onnx and openvino FP32/INT8, and its
# --input uint8 onnx-fp32, openvino fp32/int8), INT8 calibrated on coco128 and gated at the default 1.0 point.
YOLO_OPTIMIZE_OFFLINE=1 python -m yolo_optimize eval <those artifacts> --data ../shared/assets/coco_val128 \
    --batch-sizes 1 --repeats 3 --out bench/results/zen4/idle_threads/eval_b1
