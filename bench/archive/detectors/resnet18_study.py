"""ResNet18 (seeded random weights) at 224 and 256 x batch 16-64 x runtime x precision on this machine.

    python -m bench.archive.detectors.resnet18_study --assets ../shared/assets

The study this product was designed from benchmarks ResNet18 across runtimes at 224 and 256 with
batch 16-64. This builds ``resnet18 --random-weights --imgsz 224,256`` for TorchScript, ONNX and
OpenVINO in FP32, FP16 and BF16, evaluates everything with ``optimize eval`` (interleaved rounds, each
measurement its own process; top-1 agreement with PyTorch FP32 on real images) and prints one table:
images/s and speedup over PyTorch FP32 eager per input size, artifact and batch size. The report
folder keeps every raw sample; ``--skip-build --skip-eval`` reprints the table from it.
"""

from __future__ import annotations

from bench.harness import optimize, study_parser
from yolo_optimize.evaluation.reporting.report import load_report

BATCHES = "16,32,48,64"


def main() -> None:
    parser = study_parser(__doc__, "resnet18_study", "artifacts-resnet18", "2")
    parser.add_argument("--min-time", default="0", help="seconds per batch size (at least 5 runs are timed anyway)")
    args = parser.parse_args()
    if not args.skip_build:
        optimize("build", "resnet18", "--random-weights", "--imgsz", "224,256", "--out", str(args.out),
                 "--targets", "torchscript,onnx,openvino", "--precisions", "fp32,fp16,bf16",
                 "--batch-sizes", BATCHES, "--parity-data", str(args.assets / "coco_val128"))
    if not args.skip_eval:
        optimize("eval", str(args.out), "--data", str(args.assets / "coco_val128"), "--max-images", "64",
                 "--batch-sizes", BATCHES, "--repeats", args.repeats, "--min-time", args.min_time,
                 "--out", str(args.report))
    report = load_report(args.report)
    batches = report.settings.batch_sizes
    print(f"{report.environment['cpu']} ({', '.join(report.environment['cpu_facts']['isa'])}), "
          f"{report.environment['threads']} threads, {report.environment['date']}, "
          f"{report.settings.repeats} interleaved rounds")
    print("| imgsz | artifact | runs in | " + " | ".join(f"b{b} img/s (speedup)" for b in batches) + " | top-1 agr. |")
    print("|---|---|---|" + "---|" * len(batches) + "---|")
    for line in report.matrix:
        if line.status != "ok":
            print(f"| {line.model} | {line.artifact} | {line.status} |")
            continue
        cells = [f"{line.at(b).throughput_ips:.1f} ({line.at(b).speedup:.2f}x)" for b in batches]
        agreement = line.top1_agreement
        print(f"| {line.model.rsplit('-', 1)[1]} | {line.artifact} | {line.executed_precision} | "
              + " | ".join(cells) + f" | {'' if agreement is None else f'{agreement:.1%}'} |")


if __name__ == "__main__":
    main()
