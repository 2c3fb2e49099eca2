"""Exceptions that the CLI turns into one clear line."""


class UserError(Exception):
    """Bad input from the user: printed as one line, exit code 2, nothing written."""


class StageSkipped(Exception):
    """A stage that cannot run in this environment (no CUDA device, TensorRT absent)."""
