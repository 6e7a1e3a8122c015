"""Where a run's model came from: recorded in the run directory, checked on resume (no TF)."""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import shutil
from pathlib import Path
from typing import Optional

from tfaccel import python_refs
from tfaccel.config.recipe import DEFAULT_MODEL, Recipe
from tfaccel.errors import UserInputError
from tfaccel.training.run_dir import run_files

SOURCE_FILE = "model_source.json"
# A copy of an own model's module file, for reading (and importing when the original is gone).
COPY_DIR = "model_source"


def describe(recipe: Recipe, *, given=None) -> dict:
    """What model a run trains, with the digests that tell a changed one.

    Args:
        recipe: The run's recipe.
        given: `tfaccel.train(model=...)`: a builder callable or a built keras.Model.

    Returns:
        ``{"kind": ..., ...}``: ``registered`` (name), ``module`` (model.name
        ``module:callable``: its file and sha256), ``saved`` (model.path and its sha256),
        ``builder`` (the callable's qualified name, file and sha256) or ``keras_model``
        (the class and a digest of its weights' names, shapes and dtypes).

    Raises:
        UserInputError: `given` together with a model the recipe names, or a module or
            file that is not there.
    """
    model = recipe.model
    if given is not None:
        if model.name != DEFAULT_MODEL or model.path is not None:
            named = model.path if model.path is not None else model.name
            raise UserInputError(
                f"train(model=...) got a model and the recipe names one too ({named!r} in "
                "model.name or model.path): give one of the two.")
        if _is_keras_model(given):
            return {"kind": "keras_model", "name": _qualified_name(type(given)),
                    "weights_sha256": _weights_digest(given)}
        if not callable(given):
            raise UserInputError(f"train(model=...) takes a builder callable or a keras.Model, "
                                 f"got {type(given).__name__} {given!r}.")
        file = _source_file_of(given)
        return {"kind": "builder", "name": _qualified_name(given), "file": file,
                "sha256": python_refs.file_sha256(file) if file else None}
    if model.path is not None:
        return {"kind": "saved", "path": model.path,
                "sha256": python_refs.file_sha256(model.path)}
    if python_refs.is_reference(model.name):
        file = python_refs.locate(model.name, key="model.name")
        return {"kind": "module", "name": model.name, "file": file,
                "sha256": python_refs.file_sha256(file) if file else None,
                **({"search_dir": _import_root(model.name, file)}
                   if file and python_refs.source_file(model.name) is None else {})}
    return {"kind": "registered", "name": model.name}


def _import_root(spec: str, file: str) -> str:
    """The folder an import path's module was found in (``/a`` for ``pkg.mod`` at
    ``/a/pkg/mod.py``): a resume, whose recipe is the run directory's, looks there again."""
    depth = spec.rsplit(":", 1)[0].count(".") + 1
    root = Path(file).parent if Path(file).name != "__init__.py" else Path(file).parent.parent
    for _ in range(depth - 1):
        root = root.parent
    return str(root)


def prepare_resume(directory: Path) -> None:
    """Puts the folder the run's import-path module came from on ``sys.path`` again."""
    saved = read(directory) or {}
    if saved.get("search_dir"):
        python_refs.add_search_dirs([saved["search_dir"]])


def record(directory: Path, source: dict) -> None:
    """Writes `source` to model_source.json and copies an own model's module file beside it."""
    run_files.write_json(Path(directory) / SOURCE_FILE, source)
    file = source.get("file")
    if file and os.path.isfile(file):
        target = Path(directory) / COPY_DIR
        target.mkdir(exist_ok=True)
        shutil.copy2(file, target / os.path.basename(file))


def read(directory: Path) -> Optional[dict]:
    """The run's recorded model source, or None (a run from before it was recorded)."""
    try:
        return json.loads((Path(directory) / SOURCE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def check_same(directory: Path, current: dict) -> None:
    """Refuses to resume a run with another model than the one it started with.

    Raises:
        UserInputError: The module (or saved model) file changed since the run started, or
            another builder or model was given; the message says how to proceed.
    """
    saved = read(directory)
    if saved is None:
        return
    where = f"cannot resume {str(directory)!r}"
    if saved.get("kind") != current.get("kind") or saved.get("name") != current.get("name"):
        raise UserInputError(
            f"{where}: it was started with model {_label(saved)}, and this resume gives "
            f"{_label(current)}. A resumed run continues the same model: give the same one "
            "(train(resume=..., model=...) takes the run's builder or model again), or start "
            "a new run.")
    for key in ("sha256", "weights_sha256"):
        if saved.get(key) == current.get(key):
            continue
        file = saved.get("file") or saved.get("path")
        if key == "weights_sha256":
            what = "the given keras.Model's weights (names, shapes or dtypes)"
        else:
            what = f"the file {file!r}"
        copy = Path(directory) / COPY_DIR / os.path.basename(file) if saved.get("file") \
            else None
        keep = (f"restore it (the run's copy is {str(copy)!r})" if copy and copy.is_file()
                else "restore it")
        raise UserInputError(
            f"{where}: {what} of model {_label(saved)} changed since the run started "
            f"(sha256 {str(saved.get(key))[:12]}... then, {str(current.get(key))[:12]}... "
            f"now); its checkpoints belong to the model as it was. To continue, {keep}; to "
            "train the changed model, start a new run.")


def import_module_of(directory: Path) -> None:
    """Imports a run's own model module, so Keras finds its registered custom layers.

    A run whose module file is gone imports the run directory's copy instead.
    """
    saved = read(directory) or {}
    file = saved.get("file")
    # Not a train(model=builder)'s file: that may be the very script that trains.
    if saved.get("kind") != "module" or not file:
        return
    if not os.path.isfile(file):
        file = str(Path(directory) / COPY_DIR / os.path.basename(file))
        if not os.path.isfile(file):
            return
    python_refs.load(f"{file}:__name__", key="model source", error=UserInputError)


def _label(source: dict) -> str:
    name = source.get("name") or source.get("path")
    return f"{name!r} ({source.get('kind')})"


def _is_keras_model(value) -> bool:
    # Without importing Keras: a keras.Model's class has keras.Model among its bases.
    return any(f"{c.__module__}.{c.__qualname__}".startswith("keras.") and c.__name__ == "Model"
               for c in type(value).__mro__)


def _qualified_name(value) -> str:
    return f"{getattr(value, '__module__', '?')}.{getattr(value, '__qualname__', repr(value))}"


def _source_file_of(value) -> Optional[str]:
    try:
        file = inspect.getsourcefile(value)
    except TypeError:
        return None
    return os.path.abspath(file) if file else None


def _weights_digest(model) -> str:
    described = [(w.path, list(w.shape), str(w.dtype)) for w in model.weights]
    return hashlib.sha256(json.dumps(described).encode()).hexdigest()
