"""Precision choices made for speed come from measured rates: a host where bf16 is faster and one where it is slower
give two plans, and a build asked for bf16 where it is slower says so in one line."""

from __future__ import annotations

from dataclasses import replace

from tests.building.test_dag import GATE, REQUEST, keys
from yolo_optimize.building.pipeline import plan
from yolo_optimize.limits.choices import BF16_MARGIN, bf16_evidence, float_parts_precision, slower_than_fp32_note
from yolo_optimize.limits.peaks import SCHEMA, MachineLimits, Peak


def measured(rates: dict[tuple[str, str], float | None]) -> MachineLimits:
    """Limits whose convolution ran at these GOP/s per (runtime, precision); None: bf16 emulated (no native bf16)."""
    peaks = [Peak(runtime, "conv 3x3 256->256 at 28x28", precision, gops, precision if gops else "fp32")
             for (runtime, precision), gops in rates.items()]
    return MachineLimits(SCHEMA, "2026-11-25T00:00:00+00:00", 2, {}, {}, peaks, 10.0, [10.0], "")


# The 2-core Zen 4 VM (`optimize info`, 2026-11-25) and issue 31's Intel Xeon with AVX-512 BF16 but no AMX exposed.
ZEN4 = measured({("openvino", "fp32"): 231.7, ("openvino", "bf16"): 455.2, ("torch", "fp32"): 228.7,
                 ("torch", "bf16"): 453.7})
XEON = measured({("openvino", "fp32"): 324.0, ("openvino", "bf16"): 174.0, ("torch", "fp32"): 317.0,
                 ("torch", "bf16"): 177.0})
AVX2 = measured({("openvino", "fp32"): 120.0, ("openvino", "bf16"): None, ("torch", "fp32"): 118.0,
                 ("torch", "bf16"): None})
INT8 = replace(REQUEST, targets=("aoti", "onnx", "openvino"), precisions=("fp32", "bf16", "int8"),
               calib_images=REQUEST.parity_images, gate=GATE)


def test_openvino_int8s_float_parts_are_bf16_only_where_bf16_measures_faster_and_only_its_key_changes() -> None:
    plans = {}
    for name, limits in (("zen4", ZEN4), ("xeon", XEON), ("avx2", AVX2)):
        request = replace(INT8, int8_float_precision=float_parts_precision(bf16_evidence(limits, "openvino")))
        plans[name] = request
        config = next(node.stage.config for node in plan(request) if node.name == "openvino-int8")
        assert config.float_precision == {"zen4": "bf16", "xeon": "fp32", "avx2": "fp32"}[name], name
    zen4, xeon = keys(plans["zen4"]), keys(plans["xeon"])
    assert {name for name in zen4 if zen4[name] != xeon[name]} == {"openvino-int8"}
    assert keys(plans["avx2"]) == xeon


def test_the_evidence_is_the_two_rates_compared_and_bf16_must_win_by_a_margin() -> None:
    evidence = bf16_evidence(XEON, "openvino")
    assert (evidence.bf16_gops, evidence.fp32_gops, evidence.ratio) == (174.0, 324.0, 0.54)
    assert evidence.slower and not evidence.faster
    assert evidence.describe() == "openvino bf16 174 vs fp32 324 GOP/s (0.54x)"
    assert evidence.record() == {"runtime": "openvino", "bf16_gops": 174.0, "fp32_gops": 324.0, "ratio": 0.54,
                                 "margin": BF16_MARGIN}
    barely = measured({("openvino", "fp32"): 200.0, ("openvino", "bf16"): 210.0})
    assert float_parts_precision(bf16_evidence(barely, "openvino")) == "fp32", "5% is within a host's noise"
    assert bf16_evidence(AVX2, "openvino").ratio is None and not bf16_evidence(None, "torch").slower


def test_a_build_asked_for_bf16_where_it_measures_slower_says_so_in_one_line_naming_the_figures() -> None:
    evidence = [bf16_evidence(XEON, runtime) for runtime in ("openvino", "torch")]
    note = slower_than_fp32_note(evidence, ["openvino-bf16", "aoti-bf16", "onnx-fp32"])
    assert note == ("note: bf16 measures slower than fp32 on this CPU (openvino bf16 174 vs fp32 324 GOP/s (0.54x); "
                    "torch bf16 177 vs fp32 317 GOP/s (0.56x)): openvino-bf16, aoti-bf16 built as asked; recommend "
                    "prefers a faster row of equal accuracy")
    assert slower_than_fp32_note(evidence, ["openvino-int8", "onnx-fp32"]) is None, "no bf16 artifact was asked for"
    assert slower_than_fp32_note([bf16_evidence(ZEN4, "openvino")], ["openvino-bf16"]) is None
