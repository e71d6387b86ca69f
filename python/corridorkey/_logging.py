"""Where the engine's log lines go: logging.getLogger("corridorkey") unless a handler is set."""

from __future__ import annotations

import atexit
import logging
from typing import Callable, Optional

from . import _corridorkey

_LEVELS = (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR)  # the engine's 0..3
logger = logging.getLogger("corridorkey")


def _to_logging(level: int, message: str) -> None:
    logger.log(_LEVELS[level] if 0 <= level < len(_LEVELS) else logging.INFO, message)


def set_log_handler(handler: Optional[Callable[[int, str], None]]) -> None:
    """Sends the engine's log lines to handler(level, message) instead of the "corridorkey"
    logger; level is a logging level (logging.INFO ...). None restores the logger. The
    handler is called from whichever thread logs, with the GIL held; an exception it raises
    is reported as unraisable and the line is dropped, never the engine's work."""
    if handler is None:
        _corridorkey._set_log_target(_to_logging)
        return
    if not callable(handler):
        raise TypeError(f"set_log_handler: {handler!r} is not callable (level, message), nor None")

    def call(level: int, message: str) -> None:
        handler(_LEVELS[level] if 0 <= level < len(_LEVELS) else logging.INFO, message)

    _corridorkey._set_log_target(call)


set_log_handler(None)
# At exit: engine calls still running in daemon threads finish before the interpreter goes
# (new ones are refused, jobs cancelled); lines logged from then on go to stderr.
atexit.register(_corridorkey._close_for_exit)
