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


class Normalized(torch.nn.Module):
    """Folds the per-channel mean/std normalization into the model, so it takes RGB in [0, 1] like every artifact."""

    def __init__(self, model: torch.nn.Module, mean: tuple[float, ...], std: tuple[float, ...], names: list[str]) -> None:
        super().__init__()
        self.model = model
        self.names = names
        self.register_buffer("mean", torch.tensor(mean).view(1, -1, 1, 1))
        self.register_buffer("std", torch.tensor(std).view(1, -1, 1, 1))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.model((images - self.mean) / self.std)
