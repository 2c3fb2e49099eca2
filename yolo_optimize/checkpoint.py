"""Find and load models of any family: official names, checkpoint paths, or random weights.

Checkpoints are loaded with ``torch.load(weights_only=True)``. Before anything is
unpickled, the classes the pickle would import are read with ``pickletools``: each must
be one of PyTorch's or one its family allows (``families/``), and together they name the
family. Those classes, under their training-repo names too, are the only ones the loader
accepts.
"""

from __future__ import annotations

import hashlib
import os
import pickletools
import urllib.request
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from yolo_optimize.errors import UserError
from yolo_optimize.families import (
    all_families,
    family_for_checkpoint,
    family_for_config,
    family_for_model,
    family_named,
    names_hint,
)
from yolo_optimize.families.base import RANDOM_SEED, Family
from yolo_optimize.families.detection import Detector
from yolo_optimize.families.nms import FOLDER as NMS_FOLDER
from yolo_optimize.families.nms import SUFFIX, with_nms
from yolo_optimize.families.suppression import NmsSettings
from yolo_optimize.files import file_sha256, write_atomically
from yolo_optimize.host.environment import user_cache_dir

if TYPE_CHECKING:
    import torch

    from yolo_optimize.artifact import Manifest

WEIGHTS_ENV = "YOLO_OPTIMIZE_WEIGHTS"
OFFLINE_ENV = "YOLO_OPTIMIZE_OFFLINE"
_PLAIN_GLOBALS = ("__builtin__.set", "builtins.set", "collections.OrderedDict")
_TORCH_MODULES = ("torch", "torch._utils")


@dataclass(frozen=True)
class ModelSource:
    """Where a model comes from; ``identity`` changes whenever its weights could."""

    model_id: str  # artifact folder and file stem
    family: str  # families.family_named(family) owns everything model-specific
    architecture: str  # config name for random weights, checkpoint stem otherwise
    checkpoint: Path | None  # None: random weights from the family's config
    pretrained: bool
    identity: str
    nms: NmsSettings | None = None  # NMS inside every artifact (optimize build --nms): family is "<family>+nms"
    recognized_as: str = ""  # a checkpoint's own family where --head or --nms made ``family`` another


def resolve_source(model: str, *, random_weights: bool = False, weights_dir: Path | None = None,
                   verdicts: Path | None = None, head: str = "", nms: NmsSettings | None = None) -> ModelSource:
    """Turn the CLI's MODEL argument into a source; a checkpoint's family is read from its pickle, unpickling nothing
    (or from ``verdicts``, where an earlier build into the same folder remembered it: see remember_family). ``head``
    and ``nms`` choose what its artifacts return (``with_output``)."""
    return with_output(_model_source(model, random_weights, weights_dir, verdicts), head, nms)


def _model_source(model: str, random_weights: bool, weights_dir: Path | None, verdicts: Path | None) -> ModelSource:
    path = Path(model)
    if model.endswith((".yaml", ".yml")):
        return _config_source(path)
    if model.endswith(".pt") or path.exists():
        if random_weights:
            raise UserError("--random-weights takes a model name (e.g. yolov5n, yolo11n), not a checkpoint path")
        return _checkpoint_source(path, verdicts)
    name = model.lower()
    family = family_for_model(name)
    if family is None:
        raise UserError(f"unknown model {model!r}: use {names_hint()}, or a path to a .pt")
    if random_weights:
        return _random_source(family, name)
    return _checkpoint_source(find_weights(name, weights_dir, family), verdicts)


def with_output(source: ModelSource, head: str, nms: NmsSettings | None) -> ModelSource:
    """``source`` built with ``head`` (one of its family's ``heads``; "" for its default) and with NMS inside the
    graph where ``nms`` is given: each makes another family (the one that decodes such artifacts) and another folder
    (``<model>-<head>``, ``<model>-nms``). A head or NMS the model cannot have is a UserError naming what it can."""
    family = family_named(source.family)
    name = source.architecture if source.checkpoint is None else source.model_id
    changed = replace(source, recognized_as=source.family)
    if head and head != _default_head(family):
        if head not in family.heads:
            kinds = f"its heads are {', '.join(family.heads)}" if family.heads else "it has one head"
            raise UserError(f"--head {head}: {name} has no such head ({kinds}); YOLO26 and YOLOv10 have two "
                            f"(one-to-one, the default, and one-to-many)")
        changed = replace(changed, family=family.heads[head], model_id=f"{source.model_id}-{head}")
    if nms is not None:
        family = family_named(changed.family)
        if not isinstance(family, Detector) or not family.needs_nms:
            why = "it is a classifier" if not isinstance(family, Detector) else \
                f"its head returns final detections ({family.output_spec({})['head']})"
            raise UserError(f"--nms: {name} has no NMS to put inside the artifact: {why}"
                            + ("; build it with --head one-to-many to have one" if family.heads else ""))
        changed = replace(changed, family=changed.family + SUFFIX, model_id=changed.model_id + NMS_FOLDER,
                          nms=nms.resolved(family.map_iou))
    return changed if changed.family != source.family else source


def _default_head(family: Family) -> str:
    """The head a family's models are built with when none is asked (its own name among its heads)."""
    return next((head for head, made in family.heads.items() if made == family.name), "")


def weights_search_path(weights_dir: Path | None) -> list[Path]:
    """Directories searched for ``<name>.pt``, in order."""
    dirs = [weights_dir] if weights_dir else []
    if os.environ.get(WEIGHTS_ENV):
        dirs.append(Path(os.environ[WEIGHTS_ENV]))
    dirs.append(user_cache_dir() / "weights")
    return dirs


def find_weights(name: str, weights_dir: Path | None, family: Family) -> Path:
    """Search the weights path, then download the family's official release into the cache dir."""
    dirs = weights_search_path(weights_dir)
    for directory in dirs:
        if (directory / f"{name}.pt").is_file():
            return (directory / f"{name}.pt").resolve()
    where = ", ".join(str(d) for d in dirs)
    if os.environ.get(OFFLINE_ENV, "").lower() in ("1", "true"):
        raise UserError(f"{name}.pt not found in {where}; offline ({OFFLINE_ENV}=1): put the file there "
                        f"or pass --weights-dir")
    if family.release_url is None:
        raise UserError(f"{name}.pt not found in {where} and {family.name} publishes no weights to download: "
                        f"put the file there, pass --weights-dir, or use --random-weights")
    try:
        return _download(family.release_url.format(name=name), name, dirs[-1])
    except OSError as err:
        raise UserError(f"{name}.pt not found in {where} and the download failed ({err}); put the file "
                        f"in one of those directories or pass --weights-dir") from None


def _download(url: str, name: str, cache_dir: Path) -> Path:
    target = cache_dir / f"{name}.pt"
    with urllib.request.urlopen(url, timeout=20) as response:
        write_atomically(target, response.read())
    return target


def _checkpoint_source(path: Path, verdicts: Path | None) -> ModelSource:
    if path.is_dir():
        raise UserError(f"{path} is a folder: name the checkpoint file (a .pt) in it")
    if not path.is_file():
        raise UserError(f"checkpoint not found: {path}")
    identity = file_sha256(path)
    return ModelSource(model_id=path.stem, family=_recognized(path, identity, verdicts).name, architecture=path.stem,
                       checkpoint=path.resolve(), pretrained=True, identity=identity)


def _recognized(path: Path, identity: str, verdicts: Path | None) -> Family:
    """The family whose classes the checkpoint's pickle names, every global it imports allowed (else a UserError).

    The class names are checked against the families' sources, nothing imported (``Family.may_name``); loading
    checks them again on the imported classes. Telling an Ultralytics checkpoint's family still loads its model
    (seconds), so a build remembers the verdict in its output folder, per checkpoint (its sha256) and per installed
    versions of those packages, and a cached rebuild does not pay again. It is kept there, not in a shared cache:
    the folder is the user's own, and nothing is written to $HOME.
    """
    import json

    record = _verdict_record(verdicts, identity) if verdicts else None
    try:
        saved = json.loads(record.read_text()) if record else {}
        if saved["identity"] == identity and saved["versions"] == _family_tool_versions():
            return family_named(saved["family"])
    except (OSError, ValueError, KeyError):
        pass
    pickled = pickle_globals(path)
    _refuse_foreign(pickled, path)
    family = family_for_checkpoint(pickled, path)
    if family.family_told_by_model:
        return family_named(family.family_of_model(_checkpoint_model(path, family)))
    return family


def remember_family(source: ModelSource, verdicts: Path) -> None:
    """After a build: keep the checkpoint's family verdict under ``verdicts`` for the next build into that folder."""
    import json

    if source.checkpoint is None or not source.pretrained:
        return
    write_atomically(_verdict_record(verdicts, source.identity),
                     json.dumps({"identity": source.identity, "family": source.recognized_as or source.family,
                                 "versions": _family_tool_versions()}))


def _verdict_record(verdicts: Path, identity: str) -> Path:
    return verdicts / f"{identity[:32]}.json"


def _family_tool_versions() -> dict[str, str]:
    from yolo_optimize.versions import tool_versions

    return tool_versions(tuple(sorted({tool for family in all_families() for tool in family.tools})))


def _config_source(path: Path) -> ModelSource:
    """A user's model YAML: its family's architecture with seeded random weights (parsed here, never evaluated)."""
    import yaml

    if not path.is_file():
        raise UserError(f"model config not found: {path}")
    try:
        config = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise UserError(f"{path} is not valid YAML: {str(err).splitlines()[0]}") from None
    if not isinstance(config, dict):
        raise UserError(f"{path} is not a model config (no mapping at its top)")
    family = family_for_config(config, path)
    return replace(_random_source(family, str(path.resolve())), model_id=f"{path.stem}-random")


def _random_source(family: Family, name: str) -> ModelSource:
    identity = hashlib.sha256(family.config_bytes(name) + f"seed={RANDOM_SEED}".encode()).hexdigest()
    return ModelSource(model_id=f"{name}-random", family=family.name, architecture=name, checkpoint=None,
                       pretrained=False, identity=identity)


def load_model(source: ModelSource) -> torch.nn.Module:
    """The model in the form every artifact is exported from (its family's ``for_export``)."""
    import torch

    family = family_named(source.family)
    with torch.no_grad():
        if source.checkpoint is None:
            model = family.for_export(family.random_model(source.architecture))
        else:
            model = family.for_export(_checkpoint_model(source.checkpoint, family))
    return model if source.nms is None else with_nms(model, family, source.nms)


def check_loads(source: ModelSource) -> None:
    """Loads the model and drops it: a checkpoint that cannot be built is refused in one line before a build writes
    anything. Run in a build's worker (``Executor.before_nodes``), so no model crosses processes."""
    load_model(source)


def _checkpoint_model(path: Path, family: Family) -> torch.nn.Module:
    import torch

    pickled = pickle_globals(path)
    _refuse_foreign(pickled, path)
    try:
        with torch.serialization.safe_globals(_allowed_globals(pickled, family)):
            checkpoint: Any = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - any unpickling failure means the same thing to the user
        raise UserError(f"{path} was refused: {_load_failure(err)} (nothing in it was run)") from None
    return family.model_from_checkpoint(checkpoint, path)


def pickle_globals(path: Path) -> list[str]:
    """Every ``module.name`` the checkpoint's pickle imports, read without unpickling anything."""
    try:
        with zipfile.ZipFile(path) as archive:
            pickled = next(n for n in archive.namelist() if n.endswith("/data.pkl") or n == "data.pkl")
            ops = list(pickletools.genops(archive.read(pickled)))
    except (zipfile.BadZipFile, StopIteration, ValueError, OSError, EOFError):
        raise UserError(f"{path} is not a PyTorch checkpoint (not a torch.save archive with a data.pkl)") from None
    found, strings = [], []
    for op, arg, _ in ops:
        if op.name == "GLOBAL":
            found.append(str(arg).replace(" ", "."))
        elif isinstance(arg, str):
            strings.append(arg)
        elif op.name == "STACK_GLOBAL":  # module and name were pushed as strings (or fetched from the memo)
            found.append(".".join(strings[-2:]) if len(strings) >= 2 else "<a computed name>")
    return found


def _refuse_foreign(pickled: list[str], path: Path) -> None:
    """Refuse, before unpickling, a checkpoint importing anything neither PyTorch nor a family allows."""
    foreign = sorted({name for name in pickled if not _torch_name(name)
                      and not any(f.may_name(name) for f in all_families())})
    if not foreign:
        return
    for family in all_families():
        if family.module_prefixes and all(family.installed_name(n).startswith(family.module_prefixes) for n in foreign):
            from importlib.metadata import version

            installed = ", ".join(f"{tool} {version(tool)}" for tool in family.tools)
            raise UserError(f"{path} was refused before loading: its classes {', '.join(foreign)} are not in the "
                            f"installed {installed} (made by a newer version? nothing in it was run)")
    raise UserError(f"{path} was refused before loading: its pickle would import {', '.join(foreign)}, which is "
                    f"not a class of PyTorch or of a supported model family (nothing in it was run)")


def _torch_name(name: str) -> bool:
    """torch's own tensors, storages and layers, and the plain containers a checkpoint holds."""
    module, _, _ = name.rpartition(".")
    return name in _PLAIN_GLOBALS or module in _TORCH_MODULES or module.startswith("torch.nn.modules.")


def _load_failure(err: Exception) -> str:
    """What torch's weights-only loader refused, without its advice to load unsafely."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    detail = next((line for line in lines if "Unsupported" in line or "WeightsUnpickler error" in line),
                  lines[0] if lines else type(err).__name__)
    detail = detail.split("WeightsUnpickler error:", 1)[-1].strip()
    return f"the safe loader refused its contents ({detail.split('. ')[0][:160]})"


def _allowed_globals(pickled: list[str], family: Family) -> list[Any]:
    """The classes this checkpoint names that PyTorch or its family allows, each under its pickled name too."""
    import importlib

    import torch

    allowed: list[Any] = [set]
    for name in set(pickled):
        module_name, _, class_name = name.rpartition(".")
        if module_name.startswith("torch.nn.modules."):
            found = getattr(importlib.import_module(module_name), class_name, None)
            if isinstance(found, type) and issubclass(found, torch.nn.Module):
                allowed.append(found)
        elif (found := family.allowed_class(name)) is not None:
            allowed += [found, (found, name)]
    return allowed


def recorded_source(load: Manifest) -> ModelSource:
    """The source the build's load node recorded (the baseline's manifest), checked to be the same bytes."""
    if "source" not in load.info:
        raise RuntimeError("the build record has no source checkpoint; rebuild with 'optimize build --force'")
    recorded = dict(load.info["source"])
    checkpoint = Path(recorded["checkpoint"]) if recorded["checkpoint"] else None
    if checkpoint is not None and (not checkpoint.is_file() or file_sha256(checkpoint) != recorded["identity"]):
        raise RuntimeError(f"the checkpoint the artifacts were built from is gone or changed: {checkpoint}")
    nms = NmsSettings(**recorded["nms"]) if recorded.get("nms") else None
    return ModelSource(**{**recorded, "checkpoint": checkpoint, "nms": nms})
