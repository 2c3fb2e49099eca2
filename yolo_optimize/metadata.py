"""What every artifact carries so that it can be used without this package: its metadata (embedded in the file,
copied into its manifest) and the input forms a build can give it. Shared by the build side, which writes them, and
evaluation, which reads them for the files it did not build; both through ``ArtifactMetadata``, so that a key is
spelled in this module only."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, TypeVar

from yolo_optimize.families import family_named

if TYPE_CHECKING:
    from yolo_optimize.artifact import Manifest
    from yolo_optimize.families.base import Family

FLOAT_INPUT, UINT8_INPUT = "float", "uint8"
INPUT_FORMS = (FLOAT_INPUT, UINT8_INPUT)  # what every exported artifact of a build takes (optimize build --input)

R = TypeVar("R", bound="Ordered")


@dataclass(frozen=True)
class Ordered:
    """A typed record of a metadata dict that is written back with the keys it was read with, in their order (those
    set since follow): a file's embedded JSON comes out as it went in, byte for byte."""

    order: tuple[str, ...] = field(default=(), compare=False, repr=False, kw_only=True)

    @classmethod
    def from_dict(cls: type[R], data: Mapping[str, Any]) -> R:
        """The record of ``data``, whose keys are its fields' (every version wrote these parts whole)."""
        return cls(**data, order=tuple(data))

    def to_dict(self) -> dict[str, Any]:
        """The dict it was read from, or made of its fields for a new one."""
        return self.in_order({part.name: getattr(self, part.name) for part in fields(self) if part.name != "order"})

    def in_order(self, values: dict[str, Any]) -> dict[str, Any]:
        """``values`` with the keys read first, in their order, then the others: what a dict update would give."""
        return {**dict.fromkeys(key for key in self.order if key in values), **values}


@dataclass(frozen=True)
class InputSpec(Ordered):
    """The tensor an artifact takes, as its metadata tells a deployer (and the runners) how to feed it."""

    name: str
    layout: str  # NCHW, or NHWC for the prepared uint8 image
    dtype: str  # float32, float16 or uint8
    preprocess: str  # in words, for a deployer

    @property
    def prepared(self) -> bool:
        """It takes the prepared uint8 NHWC image as it is: its layout change and /255 are inside its graph."""
        return self.dtype == "uint8" and self.layout == "NHWC"

    def describe(self) -> str:
        """What a deployment feeds it, in a few words (the matrix's input column)."""
        if self.prepared:
            return "uint8 NHWC RGB, as prepared (layout and scale are in the graph)"
        return f"{self.dtype} NCHW RGB in [0, 1]"


# What a model whose metadata describes no input takes (the PyTorch baseline: the load node's facts)
FLOAT32_NCHW = InputSpec("images", "NCHW", "float32", "RGB, /255")


@dataclass(frozen=True)
class BatchRange(Ordered):
    """The batch sizes an artifact accepts."""

    min: int
    max: int | None  # None: any


@dataclass(frozen=True)
class ArtifactMetadata(Ordered):
    """An artifact's metadata as the code reads it: a typed field per key it interprets, every other key (the family's
    own facts, a stage's records) kept as it is in ``extra``. A field is None where the dict lacks its key: files
    written by earlier versions lack some (one without ``family`` is refused by evaluation:
    evaluation/measuring/discover.py), the load node's facts lack the artifact's own. ``to_dict`` writes back exactly
    the dict read, so files, manifests and cache keys stay as they were."""

    # Keys set together are written in this order after those read: keep format ... output as artifact_metadata has
    # always written them.
    family: str | None = None
    pretrained: bool | None = None
    task: str | None = None
    names: list[str] | None = None
    format: str | None = None
    precision: str | None = None
    imgsz: tuple[int, int] | None = None
    batch: BatchRange | None = None
    input: InputSpec | None = None
    output: dict[str, Any] | None = None  # the family's description for deployers; never read here
    kept_in_float: list[str] | None = None  # INT8: the ops left in float
    requires_vnni: bool | None = None  # INT8 ONNX: its 8-bit sums saturate without VNNI
    cpu_note: str | None = None
    compile_config: dict[str, Any] | None = None  # OpenVINO: what to pass to compile_model
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ArtifactMetadata:
        """The record of a metadata dict as any version wrote it (a key it lacks stays None)."""
        typed = {key: _parsed(key, value) for key, value in data.items() if key in TYPED}
        return cls(**typed, extra={key: value for key, value in data.items() if key not in TYPED}, order=tuple(data))

    @classmethod
    def of(cls, manifest: Manifest) -> ArtifactMetadata:
        """The metadata its manifest copies from the artifact."""
        return cls.from_dict(manifest.metadata)

    def to_dict(self) -> dict[str, Any]:
        """The JSON-able dict the file embeds and the manifest copies."""
        values = {key: getattr(self, key) for key in TYPED}
        written = {key: _plain(value) for key, value in values.items() if value is not None or key in self.order}
        return self.in_order({**written, **self.extra})

    def as_strings(self) -> dict[str, str]:
        """Each value as formats whose metadata is text embed it (ONNX ``metadata_props``, OpenVINO ``rt_info``,
        AOTInductor packages): strings as they are, the rest as JSON."""
        return {key: value if isinstance(value, str) else json.dumps(value) for key, value in self.to_dict().items()}

    def with_facts(self, facts: Mapping[str, Any]) -> ArtifactMetadata:
        """These facts of a stage added under their keys (one already there keeps its place, as in a dict update)."""
        return ArtifactMetadata.from_dict({**self.to_dict(), **facts})

    def with_input_dtype(self, dtype: str) -> ArtifactMetadata:
        """The same with its input in ``dtype`` (a half-precision PyTorch module takes float16)."""
        return replace(self, input=replace(self.takes, dtype=dtype))

    def model_family(self) -> Family:
        """The family the artifact was built from (evaluation refuses files that do not say)."""
        if self.family is None:
            raise ValueError("the metadata records no model family (built by an older yolo-optimize)")
        return family_named(self.family)

    @property
    def side(self) -> int:
        """The input's height and width in pixels (artifacts are square)."""
        if self.imgsz is None:
            raise ValueError("the metadata records no input size")
        return self.imgsz[0]

    @property
    def takes(self) -> InputSpec:
        """The input the artifact takes: float32 NCHW in [0, 1] where the metadata describes none (the baseline)."""
        return self.input or FLOAT32_NCHW


TYPED = tuple(part.name for part in fields(ArtifactMetadata) if part.name not in ("extra", "order"))
PARTS: dict[str, type[Ordered]] = {"batch": BatchRange, "input": InputSpec}  # typed fields holding records


def _parsed(key: str, value: Any) -> Any:
    """A JSON value as its typed field holds it."""
    if value is None:
        return None
    if key in PARTS:
        return PARTS[key].from_dict(value)
    return tuple(value) if key == "imgsz" else value


def _plain(value: Any) -> Any:
    """A typed field's value as JSON holds it."""
    if isinstance(value, Ordered):
        return value.to_dict()
    return list(value) if isinstance(value, tuple) else value


def artifact_metadata(base: ArtifactMetadata, *, target: str, precision: str, imgsz: int,
                      max_batch: int | None = None, input_form: str | None = None) -> ArtifactMetadata:
    """What a deployed file must carry to be used without this package (``input_form``: what it takes; by default
    what its parent's metadata says, else float)."""
    family = base.model_family()
    spec = input_spec(family.name, input_form) if input_form else base.input or input_spec(family.name, FLOAT_INPUT)
    return replace(base, format=target, precision=precision, imgsz=(imgsz, imgsz),
                   batch=BatchRange(min=1, max=max_batch), input=spec, output=family.output_spec(base.to_dict()))


def input_spec(family_name: str, form: str) -> InputSpec:
    """The family's input description for an artifact that takes ``form``: with ``uint8`` the prepared image as it
    is (NHWC, 0-255), its layout change and scaling inside the graph."""
    spec = InputSpec.from_dict(family_named(family_name).input_spec())
    if form == FLOAT_INPUT:
        return spec
    return replace(spec, dtype="uint8", layout="NHWC",
                   preprocess=f"{spec.preprocess.replace(', /255', '')}; uint8 NHWC as prepared: "
                              f"the NCHW layout and the /255 scaling are inside the graph")
