"""The family interface: everything that differs between model families, behind one typed boundary.

Exporters, passes, runners, the DAG and the evaluator call these methods and never ask
which family they hold. A family knows its model names, recognizes its checkpoints from
the classes their pickle would import (read before anything is unpickled), loads them
with an allow-list, builds random-weight models from its configs, preprocesses images
and decodes raw outputs the way its own repository does, and says which graph nodes
INT8 must keep in float.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

if TYPE_CHECKING:
    import torch

RANDOM_SEED = 0


def package_dir(package: str) -> Path:
    """Where an installed package's files (configs, sample images) are, found without importing it."""
    spec = importlib.util.find_spec(package)
    assert spec and spec.origin, f"{package} is not installed"
    return Path(spec.origin).parent


@cache
def source_names(module: str) -> frozenset[str]:
    """The names an installed module binds at its top level (classes, functions, assignments, imports, and what its
    ``import *`` of a module of the same package brings), read from its source without importing it: empty where
    no source is found. Why: importing a family's package to check a checkpoint's class names costs seconds
    (yolov5: 13 s on a 2-core host, torch included) in a process that may need nothing else of it."""
    source = _module_source(module)
    if source is None:
        return frozenset()
    names: set[str] = set()
    for statement in ast.parse(source.read_bytes()).body:
        if isinstance(statement, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(statement.name)
        elif isinstance(statement, ast.Assign | ast.AnnAssign):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(statement, ast.Import | ast.ImportFrom):
            names.update(_imported(statement, module))
    return frozenset(names)


def _imported(statement: ast.Import | ast.ImportFrom, module: str) -> set[str]:
    """The names an import statement binds; a star import of a module of the same package, that module's public
    names."""
    if isinstance(statement, ast.Import):
        return {alias.asname or alias.name.partition(".")[0] for alias in statement.names}
    if any(alias.name == "*" for alias in statement.names):
        relative = "." * statement.level + (statement.module or "")
        origin = importlib.util.resolve_name(relative, module.rpartition(".")[0])
        same_package = origin.partition(".")[0] == module.partition(".")[0] and origin != module
        return {n for n in source_names(origin) if not n.startswith("_")} if same_package else set()
    return {alias.asname or alias.name for alias in statement.names}


def _module_source(module: str) -> Path | None:
    """The source file of an installed module, found from its top-level package's folder (nothing imported)."""
    top, _, rest = module.partition(".")
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    if not rest:
        return Path(spec.origin)
    if not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations)), *rest.split("."))
    return next((file for file in (path.with_suffix(".py"), path / "__init__.py") if file.is_file()), None)


@dataclass(frozen=True)
class Preprocessed:
    """One image as the model takes it (uint8 HWC RGB) and what maps its predictions back to the original."""

    pixels: np.ndarray
    original_shape: tuple[int, int]  # (h, w)
    ratio: float
    pad: tuple[float, float]  # (x, y)


SCORE_QUANTILE = 0.999  # of the absolute score differences: what a sound INT8 file keeps small (building/parity.py)


@dataclass
class ParityStats:
    """How far an artifact's outputs are from the reference's, summed over the batches compared."""

    box_diff: float | None = 0.0  # largest absolute difference of box coordinates, in input pixels (None: no boxes)
    score_diff: float = 0.0  # largest absolute difference of scores/probabilities
    matched: int = 0  # predictions that agree after the family's decode (detections, or top-1 classes)
    total: int = 0
    score_diff_quantile: float = 0.0  # the SCORE_QUANTILE of the absolute score differences (largest of the batches)

    @classmethod
    def of_scores(cls, box_diff: float | None, got: np.ndarray, want: np.ndarray, matched: int,
                  total: int) -> ParityStats:
        """The statistics of one batch's scores (``got`` against ``want``) beside its box difference and agreement."""
        difference = np.abs(got - want)
        return cls(box_diff, float(difference.max()), matched, total,
                   float(np.quantile(difference, SCORE_QUANTILE)))

    @property
    def agreement(self) -> float:
        return self.matched / self.total if self.total else 1.0

    def merged(self, other: ParityStats) -> ParityStats:
        boxes = None if self.box_diff is None or other.box_diff is None else max(self.box_diff, other.box_diff)
        return ParityStats(boxes, max(self.score_diff, other.score_diff), self.matched + other.matched,
                           self.total + other.total, max(self.score_diff_quantile, other.score_diff_quantile))


class Family(ABC):
    """One model family. Subclasses are stateless; ``families.family_named`` returns the shared instance."""

    name: ClassVar[str]
    task: ClassVar[str]  # "detect" or "classify": which metric and which evaluation columns apply
    tools: ClassVar[tuple[str, ...]]  # distributions whose versions enter the load node's cache key
    # Training-repo module prefixes of pickled classes -> the installed package's (e.g. "models." -> "yolov5.models.")
    module_aliases: ClassVar[dict[str, str]] = {}
    # Module prefixes (after aliasing) whose torch.nn.Module subclasses a checkpoint of this family may contain
    module_prefixes: ClassVar[tuple[str, ...]] = ()
    # Plain classes (not modules) a checkpoint may also contain, as importable "module.Class" names
    extra_classes: ClassVar[tuple[str, ...]] = ()
    default_imgsz: ClassVar[int]
    names_hint: ClassVar[str]  # the model names it builds, in a few words, for error messages
    agreement_of: ClassVar[str]  # what parity's agreement counts, for the manifest and messages
    release_url: ClassVar[str | None] = None  # where official weights of a model name are downloaded from ({name})
    # One forward pass before torch.export (AOTInductor), so that the head's cached grids become constants; False where
    # the head keys that cache by the whole input shape, batch included (Ultralytics' Detect): the pass would pin the
    # exported program's batch to the example's
    export_warm_up: ClassVar[bool] = True
    # The revision of the graph ``for_export`` makes, where the family rewrites the model's own (YOLOv5's head): it
    # enters every node's key, so files exported from an older form are built again; 0 keeps the keys as they were
    graph_revision: ClassVar[int] = 0
    # The heads a model of this family can be built with (optimize build --head) -> the family each makes (whose
    # output and decoding it has); empty where there is one
    heads: ClassVar[dict[str, str]] = {}
    # Whether the loaded model of a checkpoint this family recognizes says which family decodes it
    # (``family_of_model``), where the pickled classes cannot tell (a YOLO26 from a YOLO11 checkpoint)
    family_told_by_model: ClassVar[bool] = False
    recognized_by: ClassVar[str] = ""  # the family that recognizes this one's checkpoints, where another does

    def violations(self, output: np.ndarray, facts: dict[str, Any]) -> int:
        """How many of ``output``'s predictions break a guarantee of the family's own, whatever the reference shows
        (``facts``: the artifact's metadata, its family's facts among them): none for most; parity fails on any."""
        return 0

    @abstractmethod
    def model_names(self) -> tuple[str, ...]:
        """Names ``optimize build NAME`` accepts for this family."""

    @abstractmethod
    def recognizes(self, pickled: list[str]) -> bool:
        """Whether a checkpoint whose pickle imports these ``module.Class`` names is one of ours."""

    def family_of_model(self, model: torch.nn.Module) -> str:
        """The name of the family that decodes this loaded checkpoint's model (``family_told_by_model``)."""
        return self.name

    def recognizes_config(self, config: dict[str, Any]) -> bool:
        """Whether a model YAML the user gives (parsed, never evaluated) is one of this family's configs."""
        return False

    @abstractmethod
    def config_bytes(self, name: str) -> bytes:
        """The architecture definition of ``name``; with the seed, the identity of its random-weight model."""

    @abstractmethod
    def random_model(self, name: str) -> torch.nn.Module:
        """``name`` (a model name, or a config path for families that take one) with weights seeded by RANDOM_SEED."""

    @abstractmethod
    def model_from_checkpoint(self, checkpoint: Any, path: Path) -> torch.nn.Module:
        """The model inside an already safely unpickled checkpoint (a UserError if there is none)."""

    @abstractmethod
    def for_export(self, model: torch.nn.Module) -> torch.nn.Module:
        """FP32, fused, eval mode, returning one tensor (not a tuple): the form every artifact is exported from."""

    @abstractmethod
    def embedded_facts(self, model: torch.nn.Module) -> dict[str, Any]:
        """Facts every artifact embeds (class names, strides...), JSON-able."""

    @abstractmethod
    def output_spec(self, facts: dict[str, Any]) -> dict[str, Any]:
        """The artifact's output: name, shape and layout, for users loading it without this package."""

    @abstractmethod
    def input_spec(self) -> dict[str, Any]:
        """The artifact's input: name, layout, dtype and how to preprocess."""

    def preprocess(self, path: Path, imgsz: int) -> Preprocessed:
        """One image file as this family's own repository feeds it to the model."""
        return self.prepare(self.read_image(path), imgsz)

    @abstractmethod
    def read_image(self, path: Path) -> Any:
        """The image file decoded by the library the family's repository uses (a UserError when unreadable)."""

    @abstractmethod
    def prepare(self, image: Any, imgsz: int) -> Preprocessed:
        """A decoded image resized and laid out as the model takes it (reading and preparing are timed apart)."""

    @abstractmethod
    def postprocess(self, raw: np.ndarray) -> list[np.ndarray]:
        """Raw output -> what a deployment keeps per image (detectors: NMS at their usual 0.25 confidence)."""

    def kept_on_device(self, raw: torch.Tensor, side: int) -> list[np.ndarray]:
        """``postprocess`` of an output still on its device (a GPU) for ``side``-pixel inputs, on the host: families
        whose post-processing runs on torch tensors do it there and copy back only what they keep."""
        return self.postprocess(raw.float().cpu().numpy())

    @abstractmethod
    def sample_images(self) -> Path:
        """Images shipped with the family's package, for parity when the user gives none."""

    @abstractmethod
    def compare(self, got: np.ndarray, want: np.ndarray) -> ParityStats:
        """Raw outputs of an artifact against the reference's for the same batch."""

    @abstractmethod
    def predictions(self, raw: np.ndarray) -> list[np.ndarray]:
        """Raw outputs -> per image what the task metric scores (detections, or the top classes)."""

    @abstractmethod
    def agreement(self, got: list[np.ndarray], want: list[np.ndarray]) -> tuple[int, int]:
        """Of two models' ``predictions`` on the same images, how many agree (``agreement_of``) and out of how many."""

    def float_module(self, model: torch.nn.Module) -> str | None:
        """The qualified name of the submodule of an exported PyTorch model that reduced precisions (INT8, BF16, FP16)
        keep in float32; None: none. The family's one word on it, in no format's terms: each export records which
        of its own ops came from that module, and each format's pass decides how much of it its kernels need in
        float (optimize/int8_onnx.py ``float_nodes``)."""
        return None

    def installed_name(self, pickled: str) -> str:
        """A pickled ``module.Class`` under the installed package's module name."""
        for prefix, installed in self.module_aliases.items():
            if pickled.startswith(prefix):
                return installed + pickled[len(prefix):]
        return pickled

    def may_name(self, pickled: str) -> bool:
        """Whether a checkpoint of this family may name this class, as far as the installed package's source tells
        (``source_names``, nothing imported): what planning a build checks. Loading checks again on the imported
        class (``allowed_class``)."""
        name = self.installed_name(pickled)
        module_name, _, class_name = name.rpartition(".")
        return self._ours(name) and class_name in source_names(module_name)

    def _ours(self, name: str) -> bool:
        """Whether an installed ``module.Class`` name is under this family's modules or one of its plain classes."""
        return name in self.extra_classes or name.rpartition(".")[0].startswith(self.module_prefixes)

    def allowed_class(self, pickled: str) -> Any | None:
        """The class a pickled name refers to when a checkpoint of this family may contain it, else None."""
        import torch

        name = self.installed_name(pickled)
        module_name, _, class_name = name.rpartition(".")
        if not self._ours(name):
            return None
        try:
            found = getattr(importlib.import_module(module_name), class_name)
        except (ImportError, AttributeError):
            return None
        is_module = isinstance(found, type) and issubclass(found, torch.nn.Module)
        return found if is_module or name in self.extra_classes else None
