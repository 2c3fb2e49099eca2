"""What a build returns: every node's result per model folder and input size, and its JSON (``optimize build
--result``), apart from the run so that the API, the CLI and the tests read a result without importing the run."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from yolo_optimize.building.dag import FAILED, NodeResult


@dataclass
class ModelBuild:
    """One model folder built at one input size: every node's result."""

    model: str
    folder: Path
    imgsz: int
    nodes: list[NodeResult] = field(default_factory=list)

    @property
    def failed(self) -> list[str]:
        return [result.node for result in self.nodes if result.status == FAILED]


@dataclass
class BuildResult:
    out: Path
    models: list[ModelBuild]
    notes: list[str] = field(default_factory=list)  # what the build says beside its nodes (a precision slower here)

    @property
    def failed(self) -> list[str]:
        """``model/node`` of every node that failed."""
        return [f"{model.model}/{node}" for model in self.models for node in model.failed]

    @property
    def ok(self) -> bool:
        return not self.failed

    def statuses(self) -> dict[str, str]:
        """node -> status; ``model/node`` when the build made several models."""
        several = len(self.models) > 1
        return {f"{model.model}/{node.node}" if several else node.node: node.status
                for model in self.models for node in model.nodes}

    def to_json(self) -> str:
        return json.dumps(asdict(self), default=str, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> BuildResult:
        """The result ``to_json`` wrote (``optimize build --result``)."""
        found = json.loads(text)
        models = [ModelBuild(m["model"], Path(m["folder"]), m["imgsz"], [NodeResult(**n) for n in m["nodes"]])
                  for m in found["models"]]
        return cls(Path(found["out"]), models, found["notes"])
