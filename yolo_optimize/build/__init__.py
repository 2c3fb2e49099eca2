"""The build side: options, the plan from the format table, the DAG and its cache, where nodes run, parity.
The Python API's ``yolo_optimize.build`` is the function of that name (``yolo_optimize/__init__.py``)."""
