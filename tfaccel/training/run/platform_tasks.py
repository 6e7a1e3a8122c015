"""`tfaccel train` in a TF_CONFIG task that does not run the training loop.

A platform (Kubeflow's TFJob, Vertex AI) starts every task of a job with the same command
and its own TF_CONFIG. The chief and the workers of a MultiWorkerMirroredStrategy cluster,
and the chief of a parameter-server one, train (`tfaccel.training.run`); a parameter-server
cluster's ps and worker tasks serve the chief (TensorFlow's server, until the chief is
gone); an evaluator evaluates the chief's checkpoints (`sidecar_evaluator`).
"""

from __future__ import annotations

from typing import Optional, Sequence

from tfaccel.config import cluster
from tfaccel.config.recipe import Recipe, load_recipe, recipe_from_dict
from tfaccel.engine.ps_cluster import serve_task
from tfaccel.messages import say
from tfaccel.training.run.sidecar_evaluator import evaluate_alongside


def run_other_task(recipe_or_path, overrides: Sequence[str] = (), *, run_dir=None,
                   resume=None, model=None) -> Optional[object]:
    """Runs this process's task when TF_CONFIG makes it one that does not train.

    Returns:
        None when this process trains (no TF_CONFIG, a chief or a worker of a
        MultiWorkerMirroredStrategy cluster, a parameter-server chief); an evaluator's
        `EvaluationResult`. A serving task does not return: it exits 0 once its chief is gone.

    Raises:
        UserInputError: TF_CONFIG is malformed, or the recipe does not fit its cluster.
    """
    task = cluster.cluster_task()
    if task.kind == cluster.EVALUATOR:
        return evaluate_alongside(recipe_or_path, () if resume is not None and
                                  recipe_or_path is None else overrides,
                                  run_dir=run_dir if run_dir is not None else resume,
                                  model=model)
    if task.kind != cluster.SERVING:
        return None
    if recipe_or_path is not None:  # a resume names no recipe: the chief checks its own
        recipe = _recipe(recipe_or_path, overrides, own_model=model is not None)
        cluster.check_strategy_for_cluster(task, recipe.runtime.strategy)

    say(f"{task.job} {task.index} of a parameter-server cluster: serving the chief at "
        f"{task.chief_address}, which runs the training loop and writes the run directory.")
    serve_task()
    return None  # not reached: serve_task ends the process


def _recipe(recipe_or_path, overrides, *, own_model: bool) -> Recipe:
    if isinstance(recipe_or_path, Recipe):
        return recipe_or_path
    if isinstance(recipe_or_path, dict):
        return recipe_from_dict(recipe_or_path, overrides=overrides, own_model=own_model)
    return load_recipe(recipe_or_path, overrides, own_model=own_model)
