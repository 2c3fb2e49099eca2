"""The build side: options, the plan from the format table, the DAG and its cache, where nodes run, parity and the
INT8 gate (the API's ``yolo_optimize.build`` function runs it)."""
