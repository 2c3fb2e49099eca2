"""OpenVINO IR converted from the deployable ONNX, its head's split decode made one elementwise chain
(export/decode_chain.py: OpenVINO fuses that into one kernel, where it copies every output value twice for the
split and the concatenation); metadata in the IR's ``rt_info``.

OpenVINO names each op after the ONNX node it came from (``node_conv2d_57``, or ``node_conv2d_57/WithoutBiases`` for
a part of one), so the ONNX file's float part (export/onnx.py) is recorded here in OpenVINO's names."""

from __future__ import annotations

import importlib.util
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from yolo_optimize.building.stage import (
    FLOAT_PART,
    REFERENCE,
    SOURCE,
    Stage,
    StageContext,
    StageOutput,
    recorded_float_part,
)
from yolo_optimize.formats import format_named
from yolo_optimize.metadata import ArtifactMetadata
from yolo_optimize.runtime.runners.openvino import EXECUTION_HINTS

if TYPE_CHECKING:
    from yolo_optimize.building.request import BuildRequest

RT_INFO_SECTION = "model_info"
@dataclass(frozen=True)
class OpenVinoConfig:
    precision: str  # fp16: weights compressed to FP16 in the IR


class OpenVinoExport(Stage):
    name = "openvino"
    inputs = (SOURCE, REFERENCE)
    revision = 4  # 2: the execution hint is in the metadata; 3: the float part recorded; 4: the decode chained
    tools = ("openvino",)
    target = "openvino"

    @classmethod
    def planned(cls, request: BuildRequest, precision: str) -> OpenVinoExport:
        return cls(OpenVinoConfig(precision))

    def unavailable_reason(self, device: str) -> str | None:
        """A GPU host may lack OpenVINO (it computes on CPUs): the other targets are still built."""
        return None if importlib.util.find_spec("openvino") else "openvino is not installed here"

    def run(self, ctx: StageContext) -> StageOutput:
        import openvino as ov

        model = converted_with_chained_decode(ctx.entry(SOURCE))
        metadata = replace(ArtifactMetadata.of(ctx.manifest(SOURCE)), format=self.target,
                           precision=self.config.precision,
                           compile_config={"INFERENCE_PRECISION_HINT": EXECUTION_HINTS[self.config.precision]})
        embed_metadata(model, metadata)
        entry = format_named(self.target).entry_for(ctx.source.model_id)
        (ctx.out_dir / entry).parent.mkdir()
        float_part = ops_of_nodes(model, recorded_float_part(ctx.manifest(SOURCE)))
        ov.save_model(model, str(ctx.out_dir / entry), compress_to_fp16=self.config.precision == "fp16")
        return StageOutput(entry=entry, metadata=metadata.to_dict(), info={FLOAT_PART: float_part})


def converted_with_chained_decode(source: Path) -> Any:
    """OpenVINO's model of the ONNX file ``source``, its split decodes chained (the file itself is left as it is:
    ONNX Runtime reads it, and runs a chain slower than the split)."""
    import onnx
    import openvino as ov

    from yolo_optimize.export.decode_chain import chain_decodes

    model, rewritten = chain_decodes(onnx.load(str(source)))
    if not rewritten:
        return ov.convert_model(str(source))
    with tempfile.TemporaryDirectory(prefix="openvino-source-") as scratch:
        chained = Path(scratch) / source.name
        onnx.save(model, str(chained), save_as_external_data=False)
        return ov.convert_model(str(chained))


def ops_of_nodes(model: Any, nodes: list[str]) -> list[str]:
    """The friendly names of the ops OpenVINO made from the ONNX ``nodes``."""
    wanted = set(nodes)
    return [op.get_friendly_name() for op in model.get_ordered_ops()
            if op.get_friendly_name().split("/")[0] in wanted]


def embed_metadata(model: Any, metadata: ArtifactMetadata) -> None:
    """Metadata into the IR's rt_info (JSON values), so plain OpenVINO can read it back."""
    for key, value in metadata.as_strings().items():
        model.set_rt_info(value, [RT_INFO_SECTION, key])
