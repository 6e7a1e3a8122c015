"""Imports a recipe's ``module:callable`` (optimizer, schedule, loss, metric) by its spec."""

from __future__ import annotations

from tfaccel import python_refs
from tfaccel.errors import UserInputError


def import_callable(spec: str, *, key: str):
    """The callable a ``module:callable`` or ``path/file.py:callable`` spec names.

    The one rule of `tfaccel.python_refs` (as a python data source's and an own model's):
    a file path is the recipe's (resolved against its folder when the recipe was loaded);
    an import path is found in the recipe's folder, the working directory or ``sys.path``.

    Args:
        spec: ``package.module:name`` or ``path/to/file.py:name``.
        key: The recipe key holding the spec, for messages.

    Returns:
        The callable.

    Raises:
        UserInputError: The file or module is missing, fails to import, or has no such
            callable; the message names `key` and `spec`.
    """
    found = python_refs.load(spec, key=key)
    if not callable(found):
        raise UserInputError(f"{key} {spec!r}: {found!r} (a {type(found).__name__}) is not "
                             "callable.")
    return found
