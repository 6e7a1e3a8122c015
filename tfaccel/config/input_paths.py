"""TensorFlow-free check that a recipe's input paths exist, naming the key and the path."""

from __future__ import annotations

import glob
import os

from tfaccel import python_refs
from tfaccel.config import sources
from tfaccel.config.keras_names import callable_specs
from tfaccel.errors import RecipeError


def check_input_paths(recipe, *, source: str = "recipe") -> None:
    """Checks that the data a recipe reads is there, before any TensorFlow is imported.

    The image, text or audio folder is a folder, the TFRecord, CSV or text lines pattern
    matches at least one file, the arrays file (or the time series CSV file) exists, the
    python source's file (or module) can be found, and data.validation_path's pattern
    matches a file; so can an own model's module (model.name ``module:callable``) and a
    saved model (model.path), and the module of every other ``module:callable`` (optimizer,
    schedule, loss, metrics). A missing data path's message ends with the recipe's
    data.prepare command when it has one. Remote paths (``gs://...``) are left to
    TensorFlow, and a TFDS data_dir to TFDS (which creates it when it prepares a dataset,
    and says how to prepare one that is missing).

    Args:
        recipe: A validated `Recipe` (paths already resolved against the recipe's folder).
        source: The recipe's name for messages (its file path).

    Raises:
        RecipeError: A path is missing; the message names the key and the path.
    """
    _check_model_paths(recipe.model, source=source)
    _check_callable_paths(recipe, source=source)
    try:
        _check_data_paths(recipe.data, source=source)
    except RecipeError as error:
        if not recipe.data.prepare:
            raise
        # The recipe says how its data is made (real data is never shipped): say it too.
        raise RecipeError(f"{error} Prepare the data first: {recipe.data.prepare}") from None


def _check_data_paths(data, *, source: str) -> None:
    # Which keys are paths, and of what kind, is the source table's (config/sources.py).
    entry = sources.entry(data.source)
    for key, kind in sources.path_keys(entry):
        path = getattr(data, key)
        if not path or is_remote(path):
            continue
        where = f"{source}: data.{key}: the {entry.noun}"
        if kind == "folder":
            if not os.path.exists(path):
                raise RecipeError(f"{where} {path!r} does not exist.")
            if not os.path.isdir(path):
                raise RecipeError(f"{where} {path!r} is not a folder.")
        elif kind == "glob" and not glob.glob(path):
            raise RecipeError(f"{where} {path!r} matches no file.")
        elif kind == "file" and not os.path.isfile(path):
            raise RecipeError(f"{where} {path!r} does not exist.")
        elif kind == "callable":
            _check_python_source(path, source=source)


def _check_model_paths(model, *, source: str) -> None:
    # Found, not imported: importing a model module would import Keras (and TensorFlow).
    if python_refs.is_reference(model.name):
        try:
            python_refs.locate(model.name, key="model.name", error=RecipeError)
        except RecipeError as error:
            raise RecipeError(f"{source}: {error}") from None
    if model.path and not is_remote(model.path) and not os.path.isfile(model.path):
        raise RecipeError(f"{source}: model.path: the saved model {model.path!r} does not "
                          "exist.")


def _check_callable_paths(recipe, *, source: str) -> None:
    # The optimizer's, schedule's, loss's and metrics' module:callable, found (not imported)
    # as model.name's is: a missing file is named before TensorFlow starts.
    for key, spec in callable_specs(recipe):
        if key == "model.name":
            continue  # _check_model_paths
        try:
            python_refs.locate(spec, key=key, error=RecipeError)
        except RecipeError as error:
            raise RecipeError(f"{source}: {error}") from None


def _check_python_source(spec: str, *, source: str) -> None:
    try:
        python_refs.locate(spec, key="data.path", error=RecipeError)
    except RecipeError as error:
        raise RecipeError(f"{source}: {error}") from None


def is_remote(path: str) -> bool:
    """THE remote-path rule: a URL such as ``gs://bucket/...`` is TensorFlow's to resolve."""
    return "://" in str(path)


def is_file_cache(cache) -> bool:
    """THE file-cache rule: whether a cache setting names files on disk.

    None, empty, False, True and "memory" do not; anything else is a path prefix.
    """
    return cache not in (None, False, True, "", "memory")
