"""Small torch modules families wrap their models in (this file imports torch; families import it lazily)."""

from __future__ import annotations

from typing import Any

import torch


class FirstOutput(torch.nn.Module):
    """Returns only the first output of a model that returns a tuple, so every exported graph has one output.

    The wrapped model's class names and strides stay readable as attributes.
    """

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model
        self.names: Any = model.names
        self.stride: torch.Tensor = model.stride

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.model(images)[0]
