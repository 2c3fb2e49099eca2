"""Measuring artifacts and reporting what was measured: ``measuring/`` (the protocol: evaluator, interleave, measure,
end_to_end; the profiles) and ``reporting/`` (the matrix, the report and page, what to ship), which never import each
other, beside what both read (options, results, facts) and the two that run both (session, hosts).
The API's function ``yolo_optimize.evaluate`` runs them (``api.py``)."""
