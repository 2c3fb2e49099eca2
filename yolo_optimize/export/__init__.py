"""Exporters: one module per deployment format."""
