"""``optimize arm-setup``: make, once, the ARM side that --check-on runs on (arm/prepare.py)."""

from __future__ import annotations

import click

from yolo_optimize.cli.exit_codes import user_errors


@click.command(name="arm-setup")
@user_errors
def arm_setup() -> None:
    """Prepare the emulated ARM cores --check-on runs on (root, once): QEMU's user-mode emulator and debootstrap
    from apt, an arm64 Debian 12 under $YOLO_OPTIMIZE_ARM_HOME (default /var/cache/yolo-optimize/arm) and a venv
    there of the aarch64 wheels of this machine's numpy, OpenCV, ONNX Runtime and NCNN. What exists is kept."""
    from yolo_optimize.arm.prepare import prepare
    from yolo_optimize.arm.side import ArmSide

    prepare(ArmSide.configured(), lambda text: click.echo(text, err=True))
