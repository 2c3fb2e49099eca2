"""Ray plumbing shared by the build and the evaluation (opt-in, ``pip install -e ".[ray]"``): which nodes do what
(``nodes.py``, no ray import) and running one of this package's functions on a chosen node (``ray_cluster.py``).
The build's executor (``ray_executor.py``) and the per-host evaluation (``evaluation/per_host.py``) use it; ray is
imported only when ``--executor ray`` asks for it. The tool connects to a cluster, never starts one.
"""
