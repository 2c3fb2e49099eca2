"""Small torch modules families wrap their models in (this file imports torch; families import it lazily)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from yolo_optimize.families.suppression import Candidates, NmsSettings


class FirstOutput(torch.nn.Module):
    """Returns only the first output of a model that returns a tuple, so every exported graph has one output.

    The wrapped model's class names and strides stay readable as attributes.
    """

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model
        self.names: Any = model.names
        self.stride: Any = model.stride

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.model(images)[0]


class Normalized(torch.nn.Module):
    """Folds the per-channel mean/std normalization into the model, so it takes RGB in [0, 1] like every artifact."""

    mean: torch.Tensor
    std: torch.Tensor

    def __init__(self, model: torch.nn.Module, mean: tuple[float, ...], std: tuple[float, ...],
                 names: list[str]) -> None:
        super().__init__()
        self.model = model
        self.names = names
        self.register_buffer("mean", torch.tensor(mean).view(1, -1, 1, 1))
        self.register_buffer("std", torch.tensor(std).view(1, -1, 1, 1))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.model((images - self.mean) / self.std)


class Uint8Input(torch.nn.Module):
    """Takes the prepared image as it is, uint8 NHWC RGB, and does the layout change and the scaling to [0, 1] inside
    the graph: a deployment hands the artifact the letterboxed image, and an INT8 graph reads it on its first
    quantization grid (1/255) without ever making a float copy."""

    levels: torch.Tensor

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model
        self.names: Any = getattr(model, "names", None)
        self.stride: Any = getattr(model, "stride", None)
        self.register_buffer("levels", torch.tensor(255.0))  # follows the model's dtype (.half())

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.model(images.permute(0, 3, 1, 2).to(self.levels.dtype) / self.levels)


class HalfBody(torch.nn.Module):
    """The model computing in a 16-bit float (bfloat16, float16) but for one submodule kept in float32 (the Detect
    head, whose box arithmetic at 640 pixels would be off by pixels in bf16's 8-bit mantissa and by half a pixel in
    fp16's 11-bit one): float32 images in, float32 out."""

    def __init__(self, model: torch.nn.Module, dtype: torch.dtype, float_module: str | None) -> None:
        super().__init__()
        self.model, self.dtype = model.to(dtype), dtype
        self.names: Any = getattr(model, "names", None)
        if float_module:
            kept = self.model.get_submodule(float_module).float()
            kept.register_forward_pre_hook(_to_float32)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.model(images.to(self.dtype) if images.is_floating_point() else images).float()


class ProductSiLU(torch.nn.Module):
    """SiLU written as x * sigmoid(x). torch.export decomposes ``nn.SiLU`` of a float16 tensor through float32 (its
    decomposition casts low precisions up), and the casts around every SiLU split yolov5n's float16 XNNPACK program
    into 100 partitions with 122 copies between them; written this way it has the FP32 program's 4 (5 with the head
    kept in float32)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(x)


def with_product_silu(model: torch.nn.Module) -> torch.nn.Module:
    """``model`` with every ``nn.SiLU`` replaced by ``ProductSiLU`` (in place)."""
    for name, child in model.named_children():
        if isinstance(child, torch.nn.SiLU):
            setattr(model, name, ProductSiLU())
        else:
            with_product_silu(child)
    return model


def _to_float32(module: torch.nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """A forward pre-hook: the module's tensor inputs (or lists of them, as a Detect head takes) in float32."""
    return tuple([_float32(a) for a in arg] if isinstance(arg, list) else _float32(arg) for arg in args)


def _float32(value: Any) -> Any:
    return value.float() if isinstance(value, torch.Tensor) and value.is_floating_point() else value


class WithNms(torch.nn.Module):
    """A detector's export form followed by NMS inside the graph (families/suppression.py): [B, max_det, 6] out."""

    def __init__(self, model: torch.nn.Module, candidates: Callable[[torch.Tensor], Candidates],
                 settings: NmsSettings, max_candidates: int) -> None:
        super().__init__()
        self.model = model
        self.candidates = candidates
        self.nms_settings = settings
        self.max_candidates = max_candidates
        self.names: Any = getattr(model, "names", None)
        self.stride: Any = getattr(model, "stride", None)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        from yolo_optimize.families.suppression import in_graph_nms

        return in_graph_nms(self.candidates(self.model(images)), self.nms_settings, self.max_candidates,
                            images.shape[-1])


def decoded_channels_last(detect: Any, levels: list[torch.Tensor]) -> tuple[torch.Tensor]:
    """YOLOv5's Detect decode in the convolutions' own layout: each level's ``[B, anchors * outputs, H, W]`` read as
    ``[B, H, W, anchors, outputs]`` (one transpose to channels last, the layout the CPU runtimes' INT8 convolutions
    write anyway, so OpenVINO's becomes no copy at all), decoded there and reshaped to ``[B, H * W * anchors,
    outputs]``. Yolov5's own head permutes every logit to ``[B, anchors, H, W, outputs]`` first: in OpenVINO's INT8
    yolov5n at 640 that transpose and the reorders around it took 4.8 of 38.6 ms, 0.7 ms here
    (bench/archive/export_graph/head_layout.py). The rows are yolov5's, in (y, x, anchor) order instead of (anchor, y,
    x); NMS and every loader read a set of candidates, in any order. ``detect``: yolov5's ``Detect`` in export mode,
    whose forward this replaces (``YoloV5.for_export``)."""
    found = []
    for i, level in enumerate(levels):
        y = detect.m[i](level)
        batch, _, ny, nx = y.shape
        y = y.permute(0, 2, 3, 1).reshape(batch, ny, nx, detect.na, detect.no).sigmoid()
        grid, anchors = _channels_last_grid(detect, i, ny, nx, y.dtype)
        xy, wh, scores = y.split((2, 2, detect.no - 4), 4)
        y = torch.cat(((xy * 2 + grid) * detect.stride[i], (wh * 2) ** 2 * anchors, scores), 4)
        found.append(y.reshape(batch, ny * nx * detect.na, detect.no))
    return (torch.cat(found, 1),)


def _channels_last_grid(detect: Any, i: int, ny: int, nx: int, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    """Level ``i``'s cell offsets ``[1, H, W, 1, 2]`` (minus half a cell, as yolov5's ``_make_grid``) and anchors in
    pixels ``[1, 1, 1, anchors, 2]``, kept on the head once made, as yolov5 keeps its own grids: a forward pass before
    an export (``Family.export_warm_up``) makes them constants of the graph. Kept per dtype and device, since a
    model may be cast or moved after a forward pass."""
    device = detect.anchors.device
    if not hasattr(detect, "channels_last_grids"):
        detect.channels_last_grids = {}
    key = (i, ny, nx, dtype, device)
    if key not in detect.channels_last_grids:
        yv, xv = torch.meshgrid(torch.arange(ny, dtype=dtype, device=device),
                                torch.arange(nx, dtype=dtype, device=device), indexing="ij")
        grid = torch.stack((xv, yv), 2).view(1, ny, nx, 1, 2) - 0.5
        anchors = (detect.anchors[i] * detect.stride[i]).to(dtype).view(1, 1, 1, detect.na, 2)
        detect.channels_last_grids[key] = grid, anchors
    found: tuple[torch.Tensor, ...] = detect.channels_last_grids[key]
    return found


class DetrInPixels(torch.nn.Module):
    """RT-DETR's [B, 300, 6] detections with its normalized centre boxes turned into corner boxes in input pixels, the
    layout every end-to-end artifact returns."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model
        self.names: Any = model.names
        self.stride: Any = model.stride

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        from yolo_optimize.families.suppression import to_corners

        found = self.model(images)
        return torch.cat([to_corners(found[..., :4]) * images.shape[-1], found[..., 4:]], -1)
