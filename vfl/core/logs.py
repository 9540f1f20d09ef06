"""Logging: one logger per module (``logging.getLogger(__name__)``), one stderr handler per
package of this project, lines shaped ``vfl: warning: ...``.

Diagnostics go through these loggers; progress bars (tqdm) and the final result printed by the
CLI do not. ``setup_logging`` sets the level (``vfl --log-level debug``, ``-v``, ``-q``).
"""

from __future__ import annotations

import logging
import sys

from vfl.core.errors import ConfigError

PACKAGES = ("vfl", "parties", "strategies", "simulations")
LEVELS = ("debug", "info", "warning", "error", "critical")
DEFAULT_LEVEL = "warning"


class _StderrHandler(logging.Handler):
    """Writes to the *current* ``sys.stderr`` (pytest's capsys and redirects see it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
        except Exception:  # pragma: no cover - logging must never raise
            self.handleError(record)


class _Formatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        where = f"{record.name}: " if record.levelno < logging.WARNING else ""
        return f"vfl: {record.levelname.lower()}: {where}{record.getMessage()}"


def _install() -> None:
    for pkg in PACKAGES:
        logger = logging.getLogger(pkg)
        if not any(isinstance(h, _StderrHandler) for h in logger.handlers):
            handler = _StderrHandler()
            handler.setFormatter(_Formatter())
            logger.addHandler(handler)
            logger.propagate = False
            if logger.level == logging.NOTSET:
                logger.setLevel(DEFAULT_LEVEL.upper())


def get_logger(name: str) -> logging.Logger:
    """The module's logger, with the project's stderr handler installed once."""
    _install()
    return logging.getLogger(name)


def level_from_flags(*, log_level: str | None, verbose: int, quiet: int) -> str:
    """``--log-level`` wins; else each ``-v`` lowers the level one step from warning, each ``-q`` raises it."""
    if log_level:
        return log_level
    i = LEVELS.index(DEFAULT_LEVEL) - verbose + quiet
    return LEVELS[max(0, min(len(LEVELS) - 1, i))]


def setup_logging(level: str = DEFAULT_LEVEL) -> None:
    """Set every project logger to ``level`` (one of ``LEVELS``)."""
    if level not in LEVELS:
        raise ConfigError("--log-level", f"got {level!r}; allowed: {', '.join(LEVELS)}")
    _install()
    for pkg in PACKAGES:
        logging.getLogger(pkg).setLevel(level.upper())
