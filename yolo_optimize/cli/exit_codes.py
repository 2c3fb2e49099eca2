"""How the ``optimize`` commands end: bad input one line on stderr and exit 2, a failure one line and exit 1 (its
traceback kept in a file), Ctrl-C exit 130 with the clean-up protected from a second press, click's own refusals
said the same way. Every command shares these, so a caller (a script, CI) reads one convention."""

from __future__ import annotations

import functools
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any, NoReturn

import click

from yolo_optimize.errors import UserError


def user_errors(command: Callable[..., Any]) -> Callable[..., Any]:
    """Bad input becomes one line on stderr and exit code 2; a failure while working one line and exit code 1, its
    class first (``out of memory``, ``disk full``, else ``crashed``, the traceback kept in a file it names)."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, _interrupted_once)
        try:
            return command(*args, **kwargs)
        except UserError as err:
            click.echo(f"error: {err}", err=True)
            sys.exit(2)
        except KeyboardInterrupt:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the clean-up short
            raise
        except Exception as err:  # noqa: BLE001 - one line for the user, the traceback for a bug report
            click.echo(f"error: {_failure_line(err)}", err=True)
            sys.exit(1)

    return wrapper


def _interrupted_once(signum: int, frame: Any) -> None:
    """The first Ctrl-C interrupts the work; every later one is ignored from that moment, so a second press (a
    terminal's double Ctrl-C) cannot land in the clean-up that stops the measuring processes and cut it short."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def _failure_line(err: Exception) -> str:
    from yolo_optimize.host.environment import scratch_dir
    from yolo_optimize.host.processes import classified, one_line, resource_shortage

    if resource_shortage(err):
        return classified(err)
    log = scratch_dir() / f"crash-{os.getpid()}.log"
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("".join(traceback.format_exception(err)))
    except OSError:
        return f"crashed: {type(err).__name__}: {one_line(err)}"
    return f"crashed: {type(err).__name__}: {one_line(err)} (traceback: {log})"


class OneLineErrors(click.Group):
    """Click's own refusals (a value out of range, an unknown option) said like every other bad input: one line on
    stderr naming the option, exit 2, instead of click's usage block."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        try:
            code = super().main(*args, **{**kwargs, "standalone_mode": False})
        except click.ClickException as err:
            click.echo(f"error: {err.format_message()}", err=True)
            sys.exit(err.exit_code)
        except click.Abort:
            click.echo("interrupted", err=True)
            sys.exit(130)
        sys.exit(code if isinstance(code, int) else 0)


def stop_interrupted(message: str) -> NoReturn:
    """A command's work was interrupted by Ctrl-C and cleaned up: ``message`` (what was kept) on stderr, exit 130;
    a second Ctrl-C is ignored from here on, so it cannot cut that clean-up short."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    click.echo(message, err=True)
    sys.exit(130)
