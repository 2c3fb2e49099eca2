"""Evaluation: runners for every format, measurement, accuracy and reports."""
