"""THE ``module:attribute`` rule: what is a reference, where its file is, its import, its digest.

A python data source (``data.path``) and an own model (``model.name``) name Python code the
same way: ``package.module:attribute`` (an import path) or ``path/to/file.py:attribute`` (a
file). Stdlib only, at the bottom of the layers, so recipe validation (TF-free), the data
layer and the model builder share one rule.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib
import importlib.machinery
import importlib.util
import inspect
import os
import sys
from typing import Iterable, Optional

from tfaccel.errors import UserInputError, did_you_mean


def is_reference(name) -> bool:
    """Whether `name` is a ``module:attribute`` reference rather than a registered name.

    Registered names never hold a colon, so the colon alone decides.
    """
    return isinstance(name, str) and ":" in name


def source_file(spec) -> Optional[str]:
    """The ``.py`` file of a ``file.py:attr`` (or ``dir/file:attr``) spec, or None.

    None means an import path ``package.module:attr``.
    """
    module = str(spec).rsplit(":", 1)[0]
    if module.endswith(".py") or "/" in module or os.sep in module:
        return module if module.endswith(".py") else module + ".py"
    return None


def _parts(spec: str, *, key: str, error) -> tuple[str, str]:
    module, _, attribute = str(spec).rpartition(":")
    if not module or not attribute.isidentifier():
        raise error(f"{key} {spec!r} must be 'module:attribute' or 'path/file.py:attribute' "
                    "(an attribute name after the last colon).")
    return module, attribute


def add_search_dirs(dirs: Iterable) -> None:
    """Appends folders to ``sys.path`` (once each), where import-path references are found.

    Appended, not prepended: an installed package of the same name still wins.
    """
    for folder in dirs:
        folder = os.path.abspath(str(folder))
        if folder not in sys.path:
            sys.path.append(folder)


def locate(spec: str, *, key: str, error=UserInputError) -> Optional[str]:
    """The file a reference's module is (or would be) loaded from, without importing it.

    Args:
        spec: ``module:attribute`` or ``file.py:attribute``.
        key: The recipe key (or argument) for messages, e.g. ``"model.name"``.
        error: The exception type to raise.

    Returns:
        The module's file, or None for a namespace package or a built-in module.

    Raises:
        `error`: A malformed spec, a missing file or a module that cannot be found.
    """
    module, _ = _parts(spec, key=key, error=error)
    file = source_file(spec)
    if file is not None:
        if not os.path.isfile(file):
            raise error(f"{key} {spec!r}: the python source file {file!r} does not exist.")
        return os.path.abspath(file)
    loaded = sys.modules.get(module)
    if loaded is not None:
        return getattr(loaded, "__file__", None)
    # Walks the dotted name with the path finder: finding `pkg.sub` this way never runs
    # `pkg/__init__.py` (importlib.util.find_spec would import the parent).
    found, locations = None, None
    for depth, part in enumerate(module.split(".")):
        name = ".".join(module.split(".")[:depth + 1])
        try:
            found = importlib.machinery.PathFinder.find_spec(name, locations)
        except (ImportError, ValueError):
            found = None
        if found is None:
            raise error(f"{key} {spec!r}: the python module {module!r} cannot be found (is it "
                        "in the recipe's folder, the working directory or on PYTHONPATH, or "
                        "did you mean a 'file.py:attribute' path?).")
        locations = found.submodule_search_locations
    return found.origin if found is not None and found.has_location else None


def load(spec: str, *, key: str, error=UserInputError):
    """Imports a reference's module and returns the attribute.

    A ``file.py`` is executed as a module named after the file (registered in
    ``sys.modules`` under that name, so pickling and Keras' registered objects find it).

    Args:
        spec: ``module:attribute`` or ``file.py:attribute``.
        key: The recipe key (or argument) for messages, e.g. ``"data.path"``.
        error: The exception type to raise.

    Returns:
        The attribute's value.

    Raises:
        `error`: Missing file or module, an import that raised (its type and message, no
            traceback), or a missing attribute (with a did-you-mean).
    """
    module_name, attribute = _parts(spec, key=key, error=error)
    file = locate(spec, key=key, error=error)
    try:
        if source_file(spec) is not None:
            module = _file_module(file, file_sha256(file))
        else:
            module = importlib.import_module(module_name)
    except Exception as err:  # the user's module may raise anything
        raise error(f"{key} {spec!r}: importing {module_name!r} failed: "
                    f"{type(err).__name__}: {err}") from None
    try:
        return getattr(module, attribute)
    except AttributeError:
        names = [n for n in vars(module) if not n.startswith("_")]
        raise error(f"{key} {spec!r}: module {module_name!r} has no attribute "
                    f"{attribute!r}{did_you_mean(attribute, names)}.") from None


# One module per file content and process: a recipe's checks and its build, and two keys
# naming the same file (model.name and training.loss, say), get the same objects (a file
# executed twice would define its classes twice); a file edited since is executed anew.
@functools.lru_cache(maxsize=None)
def _file_module(file: str, sha256: str):
    del sha256  # part of the cache key only
    name = os.path.splitext(os.path.basename(file))[0]
    module_spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules.setdefault(name, module)
    module_spec.loader.exec_module(module)
    return module


def file_sha256(path) -> str:
    """The sha256 hex digest of a file's content."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_signature(spec: str, *, key: str, error=UserInputError):
    """A stand-in for what a reference names, read from its source without importing it.

    `tfaccel validate` checks a recipe's own code with it (no import, so no TensorFlow and
    none of the module's side effects): the stand-in has the callable's name and signature
    (a class's stand-in is a class whose signature is its ``__init__``'s), so the checks
    `train` runs on the imported callable run on it unchanged. It cannot be called.

    Args:
        spec: ``module:attribute`` or ``file.py:attribute``.
        key: The recipe key for messages, e.g. ``"model.name"``.
        error: The exception type to raise.

    Returns:
        The stand-in; or None when the source does not show the signature plainly (an
        attribute assigned, imported, decorated or inherited; a module that is no
        ``.py`` file): `train` checks those when it imports them.

    Raises:
        `error`: What `load` raises for a missing file or module, a file that is not
            Python, or a missing attribute (the same message, with its did-you-mean).
    """
    module_name, attribute = _parts(spec, key=key, error=error)
    file = locate(spec, key=key, error=error)
    if not file or not file.endswith(".py"):
        return None
    try:
        with open(file, "rb") as handle:
            tree = ast.parse(handle.read(), filename=file)
    except (OSError, SyntaxError, ValueError) as err:
        raise error(f"{key} {spec!r}: importing {module_name!r} failed: "
                    f"{type(err).__name__}: {err}") from None
    found, names, starred = _top_level(tree.body)
    if attribute not in names:
        if starred:
            return None  # `from x import *` may define it
        public = [n for n in names if not n.startswith("_")]
        raise error(f"{key} {spec!r}: module {module_name!r} has no attribute "
                    f"{attribute!r}{did_you_mean(attribute, public)}.")
    node = found.get(attribute)
    if isinstance(node, ast.ClassDef):
        init = next((n for n in node.body if isinstance(n, ast.FunctionDef)
                     and n.name == "__init__"), None)
        if init is None or init.decorator_list:
            return None  # inherited (or wrapped): its base class decides
        return _stand_in_class(attribute, _signature(init.args))
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.decorator_list:
        return _stand_in_function(attribute, _signature(node.args))
    return None


def _top_level(body) -> tuple:
    """A module body's definitions: ``({name: def or class node, or None when the name is
    bound otherwise or twice}, every bound name, whether a star import is there)``."""
    found, names, starred = {}, [], False

    def bind(name, node):
        nonlocal found
        found[name] = None if name in names else node
        names.append(name)

    def walk(statements):
        nonlocal starred
        for node in statements:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bind(node.name, node)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    if alias.name == "*":
                        starred = True
                    else:
                        bind(alias.asname or alias.name.split(".")[0], None)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    for name in ast.walk(target):
                        if isinstance(name, ast.Name):
                            bind(name.id, None)
            elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
                # Either branch may run: what they bind is bound, plainly or not.
                for field in ("body", "orelse", "finalbody", "handlers"):
                    for part in getattr(node, field, []) or []:
                        walk(part.body if isinstance(part, ast.ExceptHandler) else [part])

    walk(body)
    return found, list(dict.fromkeys(names)), starred


class _SourceDefault:
    """A default the source gives a parameter; its value is not evaluated."""

    def __repr__(self) -> str:
        return "..."


_SOURCE_DEFAULT = _SourceDefault()


def _signature(arguments):
    P = inspect.Parameter
    positional = arguments.posonlyargs + arguments.args
    defaults = [P.empty] * (len(positional) - len(arguments.defaults)) \
        + [_SOURCE_DEFAULT] * len(arguments.defaults)
    parameters = [P(a.arg, P.POSITIONAL_ONLY if i < len(arguments.posonlyargs)
                    else P.POSITIONAL_OR_KEYWORD, default=d)
                  for i, (a, d) in enumerate(zip(positional, defaults))]
    if arguments.vararg is not None:
        parameters.append(P(arguments.vararg.arg, P.VAR_POSITIONAL))
    parameters += [P(a.arg, P.KEYWORD_ONLY,
                     default=P.empty if d is None else _SOURCE_DEFAULT)
                   for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults)]
    if arguments.kwarg is not None:
        parameters.append(P(arguments.kwarg.arg, P.VAR_KEYWORD))
    return inspect.Signature(parameters)


def _not_callable(*args, **kwargs):
    raise TypeError("a stand-in read from the source (python_refs.read_signature) is not "
                    "called")


def _stand_in_function(name: str, signature):
    def stand_in(*args, **kwargs):
        _not_callable()

    stand_in.__name__ = stand_in.__qualname__ = name
    stand_in.__signature__ = signature
    return stand_in


def _stand_in_class(name: str, signature):
    def __init__(self, *args, **kwargs):
        _not_callable()

    __init__.__signature__ = signature
    return type(name, (), {"__init__": __init__})
