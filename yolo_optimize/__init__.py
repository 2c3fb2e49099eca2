"""yolo-optimize: export, optimize and evaluate YOLOv5 detectors."""

from yolo_optimize import runtime_env

runtime_env.configure()

__version__ = "0.1.0"
