"""Main's INT8 rows against the channels-last head's (--add rows) in one evaluation's results.json: per process
(round), the ratio of main's latency to the channels-last head's, at the median and at the 10% quantile of every
sample (> 1: the channels-last head is faster). Usage: python per_process.py results.json > per_process.txt"""
import json
import sys

import numpy as np

rows = {row["name"]: row for row in json.load(open(sys.argv[1]))["rows"]}
for base in ("onnx-int8", "openvino-int8"):
    ours = next(name for name in rows if name.startswith(base + "-external"))
    for index, batch in enumerate((1, 8)):
        ratios = []
        for process in range(3):
            a, b = (rows[name]["measurements"][process]["batches"][index]["latency"]["samples_ms"]
                    for name in (base, ours))
            ratios.append((np.median(a) / np.median(b), np.quantile(a, 0.1) / np.quantile(b, 0.1)))
        print(f"{base} b{batch}: main/channels-last per process p50 " + ", ".join(f"{p:.3f}" for p, _ in ratios)
              + " | q10 " + ", ".join(f"{q:.3f}" for _, q in ratios))
