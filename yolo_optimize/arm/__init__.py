"""The ARM side: an artifact run on an emulated ARM core's own code path (cores.py names the cores, side.py the
prepared aarch64 environment, prepare.py makes it, emulator.py runs in it, worker.py is what runs there, runs.py
hands an artifact over and reads back what it gave). What the build makes of it is building/arm_checks.py."""
