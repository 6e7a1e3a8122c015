"""`say`: the one way tfaccel tells the person running it what it decided or noticed.

Messages go to stdout, one line each, prefixed ``tfaccel:`` and flushed at once (a run's
log is read while the run goes on, and Keras' progress lines go to stdout too, so the
order stays readable). Warnings about the caller's code stay Python warnings; this is for
what a person at a terminal or reading a scheduler's log should see. At the bottom layer
beside `tfaccel.errors`, so every layer can use it.
"""

from __future__ import annotations

PREFIX = "tfaccel: "


def say(text: str) -> None:
    """Prints one message: ``tfaccel: <text>`` on stdout, flushed.

    Args:
        text: The message without the prefix; full sentences, ending with a full stop.
    """
    print(PREFIX + text, flush=True)
