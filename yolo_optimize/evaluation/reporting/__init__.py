"""Reporting measurements: the matrix, the roofline and figures, the report files and page, comparisons and what to
ship. It imports nothing of ``measuring``."""
