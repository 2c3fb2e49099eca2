"""What every artifact carries so that it can be used without this package: its metadata (embedded in the file,
copied into its manifest) and the input forms a build can give it. Shared by the build side, which writes them, and
evaluation, which reads them for the files it did not build."""

from __future__ import annotations

from typing import Any

from yolo_optimize.families import family_named

FLOAT_INPUT, UINT8_INPUT = "float", "uint8"
INPUT_FORMS = (FLOAT_INPUT, UINT8_INPUT)  # what every exported artifact of a build takes (optimize build --input)


def artifact_metadata(base: dict[str, Any], *, target: str, precision: str, imgsz: int,
                      max_batch: int | None = None, input_form: str | None = None) -> dict[str, Any]:
    """What a deployed file must carry to be used without this package (``input_form``: what it takes; by default
    what its parent's metadata says, else float)."""
    family = family_named(base["family"])
    return {
        **base,
        "format": target,
        "precision": precision,
        "imgsz": [imgsz, imgsz],
        "batch": {"min": 1, "max": max_batch},  # max None: any batch size
        "input": input_spec(family.name, input_form) if input_form else base.get("input") or family.input_spec(),
        "output": family.output_spec(base),
    }


def input_spec(family_name: str, form: str) -> dict[str, Any]:
    """The family's input description for an artifact that takes ``form``: with ``uint8`` the prepared image as it
    is (NHWC, 0-255), its layout change and scaling inside the graph."""
    spec = family_named(family_name).input_spec()
    if form == FLOAT_INPUT:
        return spec
    return {**spec, "dtype": "uint8", "layout": "NHWC",
            "preprocess": f"{spec['preprocess'].replace(', /255', '')}; uint8 NHWC as prepared: "
                          f"the NCHW layout and the /255 scaling are inside the graph"}
