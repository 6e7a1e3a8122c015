"""Exception types that separate a user's mistake (exit 2) from a runtime failure (exit 1)."""


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
