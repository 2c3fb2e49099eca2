"""Every image a command reads is checked first: a file that is no image, a truncated one or a decompression bomb is
one line naming it, whatever Ultralytics did to PIL, never a crash."""

from __future__ import annotations

import shutil
import struct
import zlib
from pathlib import Path

import pytest

from tests.conftest import CALIB_DATA, VAL_DATA, WEIGHTS, brief, build_args, optimize
from yolo_optimize.errors import UserError
from yolo_optimize.images import checked_images


def bomb_png(path: Path, side: int = 20000) -> Path:
    """A PNG whose header claims ``side`` x ``side`` pixels (PIL refuses it on opening, before decoding)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b""))
                     + chunk(b"IEND", b""))
    return path


def test_an_unreadable_image_is_a_user_error_after_ultralytics_patched_pil(tmp_path: Path) -> None:
    """Ultralytics replaces PIL.Image.open process-wide with one that tries to install pi-heif on a file PIL cannot
    identify (ModuleNotFoundError here); the check uses PIL's own."""
    import ultralytics.utils.patches  # noqa: F401 - applies the patch, as loading any Ultralytics model does

    text = tmp_path / "notes.jpg"
    text.write_text("not an image")
    with pytest.raises(UserError, match=f"cannot read image {text}: cannot identify image file"):
        checked_images([text])


def test_a_decompression_bomb_is_a_user_error(tmp_path: Path) -> None:
    bomb = bomb_png(tmp_path / "bomb.png")
    with pytest.raises(UserError, match=f"cannot read image {bomb}: larger than .* pixels, PIL's guard"):
        checked_images([bomb])


@pytest.mark.parametrize("option", ["--calib-data", "--parity-data"])
def test_a_bad_image_in_build_data_is_one_line_exit_2_and_nothing_written(option: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    shutil.copytree(CALIB_DATA if option == "--calib-data" else VAL_DATA, data)
    bad = sorted((data / "images").rglob("*.jpg"))[2]
    bad.write_text("not an image")
    args = build_args(tmp_path / "out", "--targets", "onnx", "--precisions", "int8" if option == "--calib-data"
                      else "fp32")
    args[args.index("--parity-data") + 1] = data if option == "--parity-data" else VAL_DATA
    if option == "--calib-data":
        args += ["--calib-data", data]
    result = optimize(*args)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, brief(result)
    assert f"error: cannot read image {bad}: cannot identify image file" in result.stderr
    assert not (tmp_path / "out").exists()


def test_the_api_raises_the_user_error_for_a_bad_calibration_image(tmp_path: Path) -> None:
    import yolo_optimize as yo

    data = tmp_path / "data"
    shutil.copytree(CALIB_DATA, data)
    bomb_png(next((data / "images").iterdir()) / "bomb.png")
    with pytest.raises(yo.UserError, match="bomb.png: larger than"):
        yo.build(WEIGHTS, targets=["onnx"], precisions=["int8"], calib_data=data, parity_data=VAL_DATA,
                 out=tmp_path / "out")
    assert not (tmp_path / "out").exists()
