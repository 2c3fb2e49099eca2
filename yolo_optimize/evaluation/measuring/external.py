"""Model files this tool did not build, measured beside its artifacts (``optimize eval DIR --add FILE``).

A user's ``yolov5n.onnx`` from yolov5's export.py, an Ultralytics OpenVINO export, a teammate's IR:
what our build records in a manifest is read from the file instead. Its format from its name (``.onnx``,
an OpenVINO ``.xml`` or a folder holding one, ``.torchscript`` TorchScript, ``.pt2`` AOTInductor),
its precision from its contents (quantizers: int8; half-precision weights: fp16; else fp32), its input
size from its input shape (or ``--imgsz`` when the shape is dynamic), its model family from ``--family``
or its own prefix (``--add ultralytics=yolo11n_openvino_model``),
its class names from the file's own metadata where it has them (yolov5 and Ultralytics exports write
them). Its bytes are hashed (sha256 in results.json) and the row is labelled external. It joins the
model of the same family and input size under DIR, so the same PyTorch baseline, images and rounds
measure it; a file of no such model gets its own group, whose baseline is ``--checkpoint`` when given.
"""

from __future__ import annotations

import ast
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from yolo_optimize.artifact import Manifest, hash_files
from yolo_optimize.errors import UserError
from yolo_optimize.evaluation.measuring.discover import FoundArtifact
from yolo_optimize.evaluation.results import BASELINE_TARGET
from yolo_optimize.families import family_named
from yolo_optimize.formats import foreign_files_help, foreign_suffixes, format_named
from yolo_optimize.metadata import FLOAT_INPUT, UINT8_INPUT, ArtifactMetadata, input_spec

EXTERNAL = "external"


@dataclass(frozen=True)
class ExternalFile:
    path: Path  # the file (an OpenVINO IR: its .xml)
    target: str
    precision: str
    imgsz: int
    input_form: str
    names: list[str] | None


def inspect_entries(entries: tuple[str, ...], family: str | None, imgsz: int | None) -> list[tuple[ExternalFile, str]]:
    """Every ``[FAMILY=]PATH`` entry read (a UserError for one this tool cannot run), with its family."""
    found: list[tuple[ExternalFile, str]] = []
    for entry in entries:
        path, named = split_entry(entry, family)
        item = inspect_file(path, imgsz)  # a file this tool cannot run is refused before its family is asked for
        its_family = checked_family(entry, named)
        if any(item.path.resolve() == seen.path.resolve() for seen, _ in found):
            raise UserError(f"--add {entry}: {item.path} is already added (each file is measured once)")
        found.append((item, its_family))
    return found


def external_artifacts(inspected: list[tuple[ExternalFile, str]],
                        models: dict[str, tuple[str | None, list[int]]]) -> list[FoundArtifact]:
    """One candidate per inspected file, in the model group of ``models`` (name -> (family, imgsz)) it belongs to."""
    labels = file_labels([item.path for item, _ in inspected])
    return [_found(item, family, _group(item, family, models), label)
            for (item, family), label in zip(inspected, labels)]


def file_labels(paths: list[Path]) -> list[str]:
    """Each file's name in its row: its stem, after as many of its folders as tell it from the other files (exports
    are often all ``best.onnx``), so no two rows, profiles or report entries share a name."""
    parts = [path.resolve().with_suffix("").parts[1:] for path in paths]
    labels = ["-".join(part[-_telling_depth(part, parts[:index] + parts[index + 1:]):])
              for index, part in enumerate(parts)]
    if len(set(labels)) < len(labels):  # names holding '-' joined into the same text
        return [f"{part[-1]}-{index}" for index, part in enumerate(parts, 1)]
    return labels


def _telling_depth(part: tuple[str, ...], others: list[tuple[str, ...]]) -> int:
    """How many trailing path parts of ``part`` no other file shares."""
    return next((depth for depth in range(1, len(part)) if all(other[-depth:] != part[-depth:] for other in others)),
                len(part))


def split_entry(entry: str, default: str | None) -> tuple[Path, str | None]:
    """``ultralytics=path`` -> (path, ultralytics); a bare path takes ``default``; a missing path is refused."""
    name, _, rest = entry.partition("=")
    path, family = (Path(rest), name) if rest and "/" not in name else (Path(entry), default)
    if not path.exists():
        raise UserError(f"--add {entry}: no such file or folder")
    return path, family


def checked_family(entry: str, family: str | None) -> str:
    """The family an entry's file is decoded as: named, and one this tool knows."""
    if family is None:
        raise UserError(f"--add {entry}: which model family? pass --family (yolov5, yolov7, ultralytics, torchvision) "
                        f"or --add FAMILY={entry}: the file does not say which decode its output needs")
    try:
        family_named(family)
    except ValueError:
        raise UserError(f"--add {entry}: unknown model family {family!r} (yolov5, yolov7, ultralytics, torchvision)") \
            from None
    return family


def inspect_file(path: Path, imgsz: int | None) -> ExternalFile:
    """What the file is, read from it; a UserError for a file this tool cannot run."""
    path = _entry(path)
    target = foreign_suffixes().get(path.suffix.lower())
    if target is None:
        raise UserError(f"--add {path}: not a model file this tool runs ({foreign_files_help()})")
    reader = {"onnx": _onnx_facts, "openvino": _openvino_facts, "ncnn": _ncnn_facts,
              "executorch": _sidecar_facts}.get(target, _torch_facts)
    precision, shape, dtype, names = reader(path)
    input_form = UINT8_INPUT if dtype == "uint8" else FLOAT_INPUT
    sizes = shape[1:3] if input_form == UINT8_INPUT else shape[2:4]
    size = imgsz or (sizes[0] if len(sizes) == 2 and sizes[0] == sizes[1] and sizes[0] > 0 else None)
    if size is None:
        raise UserError(f"--add {path}: its input size is not fixed in the file ({shape}): pass --imgsz")
    return ExternalFile(path, target, precision, int(size), input_form, names)


def _entry(path: Path) -> Path:
    if not path.exists():
        raise UserError(f"--add {path}: no such file or folder")
    if path.is_dir():
        found = model_files(path)
        if len(found) != 1:
            raise UserError(f"--add {path}: a folder must hold exactly one model file ({foreign_files_help()}; "
                            f"{len(found)} found)")
        return found[0]
    return path


def model_files(folder: Path) -> list[Path]:
    """The model files directly in ``folder`` (an OpenVINO .xml, an NCNN .param, an ExecuTorch .pte...): an
    exported model's folder holds exactly one."""
    suffixes = foreign_suffixes()
    return sorted(path for path in folder.iterdir() if path.is_file() and path.suffix.lower() in suffixes)


def _onnx_facts(path: Path) -> tuple[str, list[int], str, list[str] | None]:
    import onnx

    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as err:  # noqa: BLE001 - any parse failure means the same thing here
        raise UserError(f"--add {path}: not a readable ONNX model ({type(err).__name__})") from None
    kinds = {node.op_type for node in model.graph.node}
    halves = any(t.data_type == onnx.TensorProto.FLOAT16 for t in model.graph.initializer)
    precision = "int8" if kinds & {"QuantizeLinear", "QLinearConv", "ConvInteger"} else "fp16" if halves else "fp32"
    tensor = model.graph.input[0].type.tensor_type
    shape = [d.dim_value if d.HasField("dim_value") else -1 for d in tensor.shape.dim]
    dtype = "uint8" if tensor.elem_type == onnx.TensorProto.UINT8 else "float32"
    return precision, shape, dtype, _names({p.key: p.value for p in model.metadata_props}.get("names"))


def _openvino_facts(path: Path) -> tuple[str, list[int], str, list[str] | None]:
    import openvino as ov

    try:
        model = ov.Core().read_model(str(path))
    except Exception as err:  # noqa: BLE001 - OpenVINO raises plain exceptions of several kinds for a bad IR
        raise UserError(f"--add {path}: not a readable OpenVINO IR ({type(err).__name__})") from None
    ops = model.get_ordered_ops()
    kinds = {op.get_type_name() for op in ops}
    halves = any(op.get_type_name() == "Constant" and op.get_element_type() == ov.Type.f16 for op in ops)
    precision = "int8" if "FakeQuantize" in kinds else "fp16" if halves else "fp32"
    port = model.input(0)
    shape = [d.get_length() if d.is_static else -1 for d in port.get_partial_shape()]
    dtype = "uint8" if port.get_element_type() == ov.Type.u8 else "float32"
    names = None
    for section in (["model_info", "names"], ["framework", "names"]):
        if model.has_rt_info(section):
            names = _names(model.get_rt_info(section).astype(str))
    return precision, shape, dtype, names


def _torch_facts(path: Path) -> tuple[str, list[int], str, list[str] | None]:
    return "fp32", [-1], "float32", None  # a TorchScript or AOTInductor file does not say: fp32, --imgsz needed


def _ncnn_facts(path: Path) -> tuple[str, list[int], str, list[str] | None]:
    """An NCNN .param whose text and .bin look whole (``files_problem``: NCNN itself would crash the row or fail it
    with an IndexError), then what the metadata beside it says."""
    from yolo_optimize.runtime.runners.ncnn import files_problem

    problem = files_problem(path)
    if problem:
        raise UserError(f"--add {path}: {problem}")
    return _sidecar_facts(path)


def _sidecar_facts(path: Path) -> tuple[str, list[int], str, list[str] | None]:
    """An NCNN or ExecuTorch file says nothing of itself: what the metadata beside it says (Ultralytics'
    metadata.yaml, this tool's metadata.json or <stem>.json), else fp32 and --imgsz needed."""
    import yaml

    found = [beside for beside in (path.parent / "metadata.yaml", path.parent / "metadata.json",
                                   path.with_suffix(".json")) if beside.is_file()]
    data = yaml.safe_load(found[0].read_text()) if found else None  # JSON is YAML
    if not isinstance(data, dict):
        return "fp32", [-1], "float32", None
    size = data.get("imgsz")
    shape = [1, 3, *size] if isinstance(size, list) and len(size) == 2 else [-1]
    precision = data.get("precision") or ("fp16" if data.get("half") else "fp32")
    return str(precision), shape, "float32", _names_of(data.get("names"))


def _names(text: str | None) -> list[str] | None:
    """Class names as yolov5 (a dict's repr), Ultralytics (the same) or this tool (a JSON list) write them."""
    if not text:
        return None
    for parse in (json.loads, ast.literal_eval):
        try:
            names = _names_of(parse(text))
        except (ValueError, SyntaxError):
            continue
        if names is not None:
            return names
    return None


def _names_of(value: Any) -> list[str] | None:
    """Class names from a parsed {index: name} dict or a list of names; None from anything else."""
    if isinstance(value, dict):
        return [str(value[key]) for key in sorted(value, key=int)]
    if isinstance(value, list):
        return [str(name) for name in value]
    return None


def _group(item: ExternalFile, family: str, models: dict[str, tuple[str | None, list[int]]]) -> str:
    """The model under DIR of the same family and input size, else a group named after the file."""
    same = [name for name, (their_family, sizes) in models.items() if their_family == family and item.imgsz in sizes]
    return same[0] if len(same) == 1 else f"{item.path.stem}-{EXTERNAL}"


def _found(item: ExternalFile, family: str, model: str, label: str) -> FoundArtifact:
    """The file as a measurable candidate named after ``label``, its manifest made from what was read."""
    folder = item.path.parent
    relative = item.path.relative_to(folder).as_posix()
    companions = [item.path.with_suffix(suffix) for suffix in format_named(item.target).companions]
    files = {name: facts for name, facts in hash_files(folder).items()
             if name in {relative, *(c.relative_to(folder).as_posix() for c in companions)}}
    metadata = ArtifactMetadata(family=family, pretrained=True, task=family_named(family).task, names=item.names or [],
                                precision=item.precision, imgsz=(item.imgsz, item.imgsz),
                                input=input_spec(family, item.input_form), extra={"producer": EXTERNAL})
    name = f"{item.target}-{item.precision}-{EXTERNAL}-{label}"
    manifest = Manifest(node=name, stage=EXTERNAL, model_id=model, target=item.target, precision=item.precision,
                        entry=relative, cache_key="", parents={}, params={}, tool_versions={},
                        metadata=metadata.to_dict(), files=files,
                        info={EXTERNAL: {**asdict(item), "path": str(item.path.resolve()),
                                         "sha256": files[relative]["sha256"]}})
    return FoundArtifact(folder, manifest, name, model, target=item.target, precision=item.precision)


def checkpoint_baseline(checkpoint: Path, model: str, imgsz: int) -> FoundArtifact:
    """The PyTorch FP32 baseline of an external group, from the checkpoint the user names (``--checkpoint``)."""
    from yolo_optimize.checkpoint import resolve_source

    source = resolve_source(str(checkpoint))
    recorded = {**asdict(source), "checkpoint": str(source.checkpoint)}
    metadata = ArtifactMetadata(family=source.family, pretrained=source.pretrained,
                                task=family_named(source.family).task, names=[], imgsz=(imgsz, imgsz))
    manifest = Manifest(node="load", stage="load", model_id=model, target=BASELINE_TARGET, precision="fp32", entry=None,
                        cache_key="", parents={}, params={}, tool_versions={}, metadata=metadata.to_dict(),
                        info={"source": recorded})
    return FoundArtifact(checkpoint.parent, manifest, f"{BASELINE_TARGET}-fp32", model, target=BASELINE_TARGET,
                     precision="fp32")


def external_record(manifest: Manifest) -> dict[str, Any] | None:
    """What results.json keeps of an external row (its path, what was read from it, its sha256); None for ours."""
    return manifest.info.get(EXTERNAL)
