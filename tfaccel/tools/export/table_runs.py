"""A table run's model on the raw columns: the run's column plan and FeatureSpace in front of it."""

from __future__ import annotations

from pathlib import Path

import keras

from tfaccel.config.recipe import load_recipe
from tfaccel.data import table_features
from tfaccel.data.sources.csv_tables import CsvSource
from tfaccel.training.run_dir import run_files


def model_on_raw_columns(directory):
    """One Keras model taking a table run's raw columns as text, giving its model's outputs.

    The run's model.keras behind its feature_space.keras behind the column plan's
    conversion (`tfaccel.data.table_features.with_raw_columns`: missing values imputed with
    the training means and flagged, dates as calendar features, categories stripped). The
    plan is made again from the run's recipe.yaml, over its training split (the files, or
    the rows held out with its seed, must still be where the recipe names them): the same
    files give the same plan.

    Args:
        directory: A run directory of ``data.source: csv``.

    Returns:
        A `keras.Model` taking ``{column: [B] strings}`` (`table_features.keras_names` of
        the columns), float32 outputs as model.keras'.
    """

    directory = Path(directory)
    recipe = load_recipe(directory / run_files.RECIPE_FILE)
    _, _, _, _, plan = CsvSource(recipe.data, seed=recipe.seed).plan()
    space = keras.saving.load_model(directory / table_features.FEATURE_SPACE_FILE)
    model = keras.saving.load_model(directory / run_files.MODEL_FILE, compile=False)
    return table_features.with_raw_columns(model, space, plan)
