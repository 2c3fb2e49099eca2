"""Finding artifacts through their manifests, verified before anything loads them."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from yolo_optimize.artifact import MANIFEST, Manifest, verify_files
from yolo_optimize.errors import UserError
from yolo_optimize.evaluation.results import BASELINE_TARGET, is_baseline
from yolo_optimize.formats import PRECISIONS, formats, runtime_configurations
from yolo_optimize.metadata import ArtifactMetadata


@dataclass(frozen=True)
class FoundArtifact:
    """An artifact to measure, or the reason it cannot be."""

    folder: Path
    manifest: Manifest | None
    name: str
    model: str
    error: str = ""
    target: str = ""  # from the manifest's typed fields ("" when it is unreadable)
    precision: str = ""

    @property
    def measurable(self) -> Manifest:
        """Its manifest, asked only of a candidate that has one (one without is a row with an error, never
        measured)."""
        assert self.manifest is not None, f"{self.name} has no manifest: {self.error}"
        return self.manifest

    @property
    def metadata(self) -> ArtifactMetadata:
        """Its manifest's metadata, typed (asked only of a candidate that has a manifest)."""
        return ArtifactMetadata.of(self.measurable)


def discover(root: Path) -> list[FoundArtifact]:
    """Every artifact under ``root`` plus, per model, the PyTorch baseline; ordered baseline first."""
    if not root.is_dir():
        raise UserError(f"artifact directory not found: {root}")
    manifests = [p for p in sorted(root.rglob(MANIFEST)) if not _hidden(p.relative_to(root))]
    found = [c for c in map(_found, manifests) if c is not None]
    if not found:
        raise UserError(f"no artifacts under {root} (no {MANIFEST} found; run 'optimize build' first)")
    models = {c.model: c.folder.parent for c in found if c.manifest}
    baselines = [_baseline(model_dir / ".cache" / "load", model, _imgsz(found, model))
                 for model, model_dir in models.items()]
    unlisted = [FoundArtifact(folder, None, folder.name, model, f"no {MANIFEST}: rebuild it with optimize build")
                for model, model_dir in models.items() for folder in sorted(model_dir.iterdir())
                if folder.name in _node_names() and folder.is_dir() and not (folder / MANIFEST).exists()]
    return sorted([*baselines, *found, *unlisted], key=_order)


def with_half_baselines(candidates: list[FoundArtifact]) -> list[FoundArtifact]:
    """Each PyTorch FP32 baseline followed by the same checkpoint run in FP16: on a GPU, what users compare a
    compiled artifact against (the speedups stay over FP32)."""
    return [extra for c in candidates for extra in (c, *_half(c))]


def _half(candidate: FoundArtifact) -> list[FoundArtifact]:
    if candidate.manifest is None or not is_baseline(candidate.target, candidate.precision):
        return []
    return [replace(candidate, manifest=replace(candidate.manifest, precision="fp16"), precision="fp16",
                    name=f"{BASELINE_TARGET}-fp16")]


def with_runtime_configurations(candidates: list[FoundArtifact]) -> list[FoundArtifact]:
    """Each candidate, then once more for every row that runs its files another way (an execution provider of its
    runtime): a row of its own over the same verified files, measured by that row's runner."""
    return [configured for c in candidates for configured in (c, *_configured(c))]


def _configured(candidate: FoundArtifact) -> list[FoundArtifact]:
    if candidate.manifest is None:
        return []
    return [replace(candidate, manifest=replace(candidate.manifest, target=row.target), target=row.target,
                    name=f"{row.target}-{candidate.precision}") for row in runtime_configurations(candidate.target)]


def verified_artifact(folder: Path) -> Manifest:
    """One artifact folder's manifest, its files verified; a UserError saying what is wrong otherwise."""
    candidate = _found(folder / MANIFEST) if (folder / MANIFEST).is_file() else None
    if candidate is None:
        raise UserError(f"{folder} is not an artifact folder (no {MANIFEST} of a deployable artifact)")
    if candidate.manifest is None:
        raise UserError(f"{folder}: {candidate.error}")
    return candidate.manifest


def _hidden(relative: Path) -> bool:
    return any(part.startswith(".") for part in relative.parts)


def _found(path: Path) -> FoundArtifact | None:
    folder = path.parent
    try:
        manifest = Manifest.read(folder)
    except (OSError, ValueError, TypeError) as err:
        return FoundArtifact(folder, None, folder.name, folder.parent.name, f"unreadable manifest: {err}")
    if manifest.target is None:
        return None
    misplaced = _misplaced(folder, manifest)
    problem = misplaced or verify_files(folder, manifest) or _missing_family(manifest) or _unchecked(manifest)
    name = folder.name if misplaced else f"{manifest.target}-{manifest.precision}"
    return FoundArtifact(folder, None if problem else manifest, name, manifest.model_id, problem or "", manifest.target,
                     manifest.precision or "")


def _misplaced(folder: Path, manifest: Manifest) -> str | None:
    """A folder named for one artifact that holds another's manifest and files (one folder copied over another):
    measured under either name, the matrix would show two rows of one name and ship the wrong path."""
    if folder.name in _node_names() and folder.name != manifest.node:
        return f"holds {manifest.node}'s files, not {folder.name}'s (a copy of another folder?): run optimize build"
    return None


def _node_names() -> set[str]:
    """The names of the folders a build publishes artifacts in (``<target>-<precision>``)."""
    return {f"{target}-{precision}" for target in formats() for precision in PRECISIONS}


def _unchecked(manifest: Manifest) -> str | None:
    """Why a manifest does not vouch for its file: it records no passed parity check. A build publishes only files
    that passed, so this is a manifest edited or written by hand, whose file must not be measured and ranked as if
    checked."""
    parity = manifest.parity or {}
    if parity.get("passed") is True:
        return None
    said = "records no parity check" if not parity else "records a failed parity check"
    return f"its manifest {said}: rebuild it with optimize build"


def _missing_family(manifest: Manifest) -> str | None:
    if ArtifactMetadata.of(manifest).family is not None:
        return None
    return "built by an older yolo-optimize that did not record the model family; rebuild it"


def _imgsz(found: list[FoundArtifact], model: str) -> tuple[int, int] | None:
    """The input size most of the model's artifacts take: the baseline runs at that size."""
    sizes = [c.metadata.imgsz for c in found if c.model == model and c.manifest]
    return max(sizes, key=sizes.count)


def _baseline(load_folder: Path, model: str, imgsz: tuple[int, int] | None) -> FoundArtifact:
    name = f"{BASELINE_TARGET}-fp32"
    try:
        load = Manifest.read(load_folder)
    except (OSError, ValueError, TypeError):
        return FoundArtifact(load_folder, None, name, model, "no build record of the source checkpoint (.cache/load)",
                         BASELINE_TARGET, "fp32")
    metadata = replace(ArtifactMetadata.of(load), imgsz=imgsz).to_dict()
    manifest = replace(load, target=BASELINE_TARGET, precision="fp32", metadata=metadata)
    return FoundArtifact(load_folder, manifest, name, model, target=BASELINE_TARGET, precision="fp32")


def _order(candidate: FoundArtifact) -> tuple[str, int, int, str]:
    targets = list(formats())
    return (candidate.model, targets.index(candidate.target) if candidate.target in targets else len(targets),
            PRECISIONS.index(candidate.precision) if candidate.precision in PRECISIONS else len(PRECISIONS),
            candidate.name)
