"""Exceptions that the CLI turns into one clear line."""

from __future__ import annotations

from typing import Any


class UserError(Exception):
    """Bad input from the user: printed as one line, exit code 2, nothing written."""


class StageSkipped(Exception):
    """A stage that cannot run in this environment (no CUDA device, TensorRT absent)."""


class BuildFailed(Exception):
    """The API's word for a build in which a node failed (the command exits 1): ``result`` (a
    ``build_result.BuildResult``, not imported here: every layer imports this module) holds every node's result, the
    message names each failed node and why."""

    def __init__(self, result: Any) -> None:
        self.result = result
        reasons = {f"{model.model}/{node.node}": node.reason for model in result.models for node in model.nodes
                   if node.node in model.failed}
        said = "; ".join(f"{name}: {why}" for name, why in reasons.items())
        super().__init__(f"{len(reasons)} node(s) failed: {said}")
