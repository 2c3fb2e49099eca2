"""The ``optimize`` command: its commands (main.py) and its console output (console.py)."""
