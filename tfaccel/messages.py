"""THE way tfaccel tells the user what it is doing: one prefixed line (Orbit's `_log`)."""

import logging

logger = logging.getLogger("tfaccel")


def say(message: str) -> None:
    """Prints ``tfaccel: MESSAGE`` on stdout at once, and logs it at INFO.

    Stdout, flushed, because these lines are read beside Keras' own output (a terminal, a
    log file, a scheduler's output); the INFO record lets an application that configures
    logging collect them too (Python's default handler shows only warnings, so nothing is
    printed twice).
    """
    print(f"tfaccel: {message}", flush=True)
    logger.info(message)
