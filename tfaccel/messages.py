"""THE way tfaccel tells the user what it is doing: one prefixed line (Orbit's `_log`)."""

import logging
import os

logger = logging.getLogger("tfaccel")

# Set to 1 by `tfaccel --verbose` (and inherited by the processes tfaccel starts: launched
# workers, the dataset preparation): TensorFlow's, TFDS' and the converters' own output is
# shown instead of hidden. A user may set it too.
VERBOSE_ENV = "TFACCEL_VERBOSE"


def say(message: str) -> None:
    """Prints ``tfaccel: MESSAGE`` on stdout at once, and logs it at INFO.

    Stdout, flushed, because these lines are read beside Keras' own output (a terminal, a
    log file, a scheduler's output); the INFO record lets an application that configures
    logging collect them too (Python's default handler shows only warnings, so nothing is
    printed twice).
    """
    print(f"tfaccel: {message}", flush=True)
    logger.info(message)


def verbose() -> bool:
    """Whether the libraries' own output is to be shown (`VERBOSE_ENV` set, not 0)."""
    return os.environ.get(VERBOSE_ENV, "").strip() not in ("", "0")
