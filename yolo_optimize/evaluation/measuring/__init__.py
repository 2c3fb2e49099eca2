"""Measuring artifacts: finding them (discover, external), the protocol (evaluator, interleave, measure,
end_to_end) and the profiles. It imports nothing of ``reporting``."""
