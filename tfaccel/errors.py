"""Exception types that separate a user's mistake (exit 2) from a runtime failure (exit 1)."""

import difflib
from typing import Iterable, Optional


def closest_match(word: str, choices: Iterable[str]) -> Optional[str]:
    """The choice most like `word` (for a did-you-mean in an error message), or None."""
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1)
    return close[0] if close else None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """THE did-you-mean hint: ``" (did you mean 'x'?)"`` for the closest choice, else "".

    Every error message that names an unknown value or key appends it, right after the
    value it is about.
    """
    close = closest_match(word, choices)
    return f" (did you mean {close!r}?)" if close else ""


class TfaccelError(Exception):
    """Base class of every error tfaccel raises on purpose."""


class UserInputError(TfaccelError, ValueError):
    """A mistake in what the user supplied: a recipe, a path, an argument.

    The CLI prints the message (no traceback) and exits with code 2.
    """


class RecipeError(UserInputError):
    """A recipe that is malformed, has an unknown key, or a value of the wrong type or range."""


class DataError(UserInputError):
    """Input data that is missing, empty, corrupt or truncated."""


class TrainingError(TfaccelError, RuntimeError):
    """Training failed at run time (for example a NaN loss); the CLI exits with code 1."""


class Preempted(TfaccelError):
    """Training stopped on SIGTERM/SIGINT after saving a checkpoint; `--resume` continues.

    The CLI exits with the shell's 128 + signal code. `run_dir` is the run directory as
    the user knows it (the chief's), set by the runner; None where no process knows it.
    """

    def __init__(self, message: str, *, signum: int, checkpoint: str,
                 run_dir: Optional[str] = None):
        super().__init__(message)
        self.signum = signum
        self.checkpoint = checkpoint
        self.run_dir = run_dir


class Stopped(TfaccelError):
    """A signal stopped a run before it trained (nothing saved, nothing to resume).

    Raised while the workers of a cluster wait for each other; the run directory that
    held only the recipe is removed. The CLI exits with the shell's 128 + signal code, as
    after `Preempted`.
    """

    def __init__(self, message: str, *, signum: int):
        super().__init__(message)
        self.signum = signum
