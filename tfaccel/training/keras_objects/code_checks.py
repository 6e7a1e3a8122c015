"""`tfaccel validate`'s checks of a recipe's callables and their params, without importing them (no TF)."""

from __future__ import annotations

from tfaccel import python_refs
from tfaccel.config.recipe import Recipe
from tfaccel.models.own_builder import check_builder_params
from tfaccel.training.keras_objects.losses import check_loss_and_metrics
from tfaccel.training.keras_objects.optimizers import check_optimizer


def check_own_code(recipe: Recipe) -> None:
    """Checks the recipe's ``module:callable`` names, Keras' classes and their params as
    `train` does.

    The model builder (``model.name``) and its ``model.params``, an own optimizer,
    schedule, loss or metric and their params: each callable is found in its module's
    source (`python_refs.read_signature`) and checked by the functions `train` runs on the
    imported callable, so both say the same for the same mistake. A callable whose source
    does not show its signature plainly (assigned, imported, decorated, inherited) is left
    to `train`, which imports it. Keras' own optimizer, schedule, loss and metric classes
    are checked the same way against their signatures recorded in
    `tfaccel.config.keras_signatures` (``optimizer.params.betta_1`` of Adam).

    Args:
        recipe: The loaded recipe (file paths resolved against its folder).

    Raises:
        UserInputError: A missing module or file, a misspelt callable (with a
            did-you-mean), an unknown parameter (with a did-you-mean) or a required one
            missing; the message is `train`'s.
    """

    model = recipe.model
    if model.path is None and python_refs.is_reference(model.name):
        builder = python_refs.read_signature(model.name, key="model.name")
        if builder is not None:
            check_builder_params(builder, dict(model.params),
                                 where=f"model.name {model.name!r}")
    check_optimizer(recipe.optimizer, load=python_refs.read_signature)
    check_loss_and_metrics(recipe.training, load=python_refs.read_signature)
