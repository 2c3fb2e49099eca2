"""The machine a process runs on and the processes it starts: CPU flags, usable cores and memory (``cpu``), CUDA
devices (``devices``), the process-wide settings applied before any third-party import (``environment``), and the
spawned workers every build and measurement runs in (``processes``). The base layer: it imports nothing else of the
package."""
