"""Imports a recipe's ``module:callable`` (optimizer, schedule, loss, metric) by its spec."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os

from tfaccel.config import input_paths
from tfaccel.errors import UserInputError


def import_callable(spec: str, *, key: str):
    """The callable a ``module:callable`` or ``path/file.py:callable`` spec names.

    A file path is the recipe's (resolved against its folder when the recipe was loaded);
    an import path is imported from ``sys.path``, as the python data source does.

    Args:
        spec: ``package.module:name`` or ``path/to/file.py:name``.
        key: The recipe key holding the spec, for messages.

    Returns:
        The callable.

    Raises:
        UserInputError: The file or module is missing, fails to import, or has no such
            callable; the message names `key` and `spec`.
    """
    module_name, _, attribute = spec.rpartition(":")
    file = input_paths.python_source_file(spec)
    if file is not None and not os.path.isfile(file):
        raise UserInputError(f"{key}: the file {file!r} of {spec!r} does not exist.")
    try:
        module = _module(module_name, file)
    except ImportError as error:
        raise UserInputError(f"{key}: cannot import {module_name!r} of {spec!r}: {error} (is "
                             "it on PYTHONPATH, or did you mean a file.py:name path?).") from None
    found = getattr(module, attribute, None)
    if not callable(found):
        what = "nothing" if found is None else f"a {type(found).__name__}"
        raise UserInputError(f"{key}: {module_name!r} has no callable {attribute!r} (found "
                             f"{what}) for {spec!r}.")
    return found


# One module per file and process: a recipe's checks and its build, and two keys naming the
# same file, get the same objects (a file executed twice would define its classes twice).
@functools.lru_cache(maxsize=None)
def _module(module_name: str, file):
    if file is None:
        return importlib.import_module(module_name)
    module_spec = importlib.util.spec_from_file_location(
        os.path.splitext(os.path.basename(file))[0], file)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module
