"""``python -m yolo_optimize`` is the ``optimize`` command."""

from yolo_optimize.cli.main import main

main()
