"""yolo-optimize: export, optimize and evaluate YOLO detectors and the classifiers deployed beside them."""

from yolo_optimize import runtime_env

runtime_env.configure()

__version__ = "0.1.0"
