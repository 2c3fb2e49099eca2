# 2026-11-29, the 2-core AMD EPYC VM with AVX2 only; A=../shared/assets
# the default build's INT8 files (64 calibration images, gate at 4 points so that onnx-int8 is published on AVX2)
optimize build $A/weights/yolov5n.pt --targets onnx,openvino --precisions fp32,int8 --calib-data $A/coco128 \
  --max-map-drop 4 --parity-data $A/coco_val128 --out /tmp/spin/artifacts
# at 35cc035 (the runner still spinning): spinning against sleeping, onnx-int8 and onnx-fp32
python bench/ort_spinning.py --artifacts /tmp/spin/artifacts/yolov5n --data $A/coco_val128 \
  --save bench/results/avx2 --repeats 5 --seconds 4                      # ort_spinning-20261129T031913.json
# with force_spinning_stop as a third variant, onnx-int8 only
python bench/ort_spinning.py --artifacts /tmp/spin/artifacts/yolov5n --data $A/coco_val128 \
  --save bench/results/avx2 --repeats 5 --seconds 4 --rows onnx-int8    # ort_spinning-20261129T032434.json
# at 9aedd35 (the runner's threads sleeping): the two INT8 files evaluated at b1 beside the baseline
mkdir -p /tmp/e2e/artifacts/yolov5n/.cache
cp -r /tmp/spin/artifacts/yolov5n/onnx-int8 /tmp/spin/artifacts/yolov5n/openvino-int8 /tmp/e2e/artifacts/yolov5n/
cp -r /tmp/spin/artifacts/yolov5n/.cache/load /tmp/e2e/artifacts/yolov5n/.cache/
optimize eval /tmp/e2e/artifacts --data $A/coco_val128 --batch-sizes 1 --repeats 3 --out /tmp/e2e/report
cp /tmp/e2e/report/matrix.md bench/results/avx2/ort_spinning/eval_b1_matrix.md
cp /tmp/e2e/report/results.json bench/results/avx2/ort_spinning/eval_b1_results.json
