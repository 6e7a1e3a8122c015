"""The batch plan: global batch = replicas x accumulation steps x micro-batch."""

import pytest

from tfaccel.config.batching import plan_batches, smaller_micro_batch
from tfaccel.config.recipe import recipe_from_dict
from tfaccel.errors import RecipeError, UserInputError

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


def test_plan_from_accumulation_steps():
    plan = plan_batches(global_batch_size=128, replicas=2, accumulation_steps=4)
    assert (plan.per_replica_batch_size, plan.micro_batch_size) == (64, 16)
    assert "2 replica(s) x 4 accumulation step(s) x micro-batch 16" in plan.describe()


def test_plan_from_micro_batch_size():
    plan = plan_batches(global_batch_size=96, replicas=2, micro_batch_size=12)
    assert plan.accumulation_steps == 4
    assert plan.as_dict()["global_batch_size"] == 96


def test_default_is_no_accumulation():
    plan = plan_batches(global_batch_size=10, replicas=1)
    assert (plan.accumulation_steps, plan.micro_batch_size) == (1, 10)


@pytest.mark.parametrize("kwargs, expected", [
    ({"global_batch_size": 9, "replicas": 2}, "not divisible by the 2 replicas"),
    ({"global_batch_size": 12, "replicas": 2, "accumulation_steps": 4},
     "per-replica batch 6 (global batch 12 / 2 replicas) is not divisible by "
     "accumulation_steps 4; use a global batch that is a multiple of 8"),
    ({"global_batch_size": 12, "replicas": 1, "micro_batch_size": 5},
     "micro_batch_size 5 does not divide the per-replica batch 12"),
    ({"global_batch_size": 0, "replicas": 1}, "global_batch_size must be >= 1, got 0"),
])
def test_bad_plans_name_the_numbers(kwargs, expected):
    with pytest.raises(UserInputError) as caught:
        plan_batches(**kwargs)
    assert expected in str(caught.value)


def test_auto_starts_from_the_whole_batch_or_the_accumulation_steps():
    assert plan_batches(global_batch_size=128, replicas=2,
                        micro_batch_size="auto").micro_batch_size == 64
    assert plan_batches(global_batch_size=128, replicas=2, accumulation_steps=2,
                        micro_batch_size="auto").micro_batch_size == 32


@pytest.mark.parametrize("per_replica, steps, expected", [
    (64, 1, (2, 32)), (64, 2, (4, 16)), (48, 1, (2, 24)), (12, 2, (4, 3)),
    (12, 4, (12, 1)),  # an odd micro-batch 3: half of it is 1
    (3, 1, (3, 1)), (2, 1, (2, 1)),
])
def test_smaller_micro_batch_halves_it_and_keeps_the_global_batch(per_replica, steps,
                                                                  expected):
    plan = plan_batches(global_batch_size=2 * per_replica, replicas=2,
                        accumulation_steps=steps)
    smaller = smaller_micro_batch(plan)
    assert (smaller.accumulation_steps, smaller.micro_batch_size) == expected
    assert smaller.micro_batch_size <= plan.micro_batch_size // 2
    assert (smaller.global_batch_size, smaller.per_replica_batch_size) == (
        2 * per_replica, per_replica)
    assert smaller.accumulation_steps * smaller.micro_batch_size == per_replica


def test_smaller_micro_batch_ends_at_1():
    assert smaller_micro_batch(plan_batches(global_batch_size=4, replicas=4)) is None


def test_the_key_takes_auto_and_refuses_strategies_it_cannot_retry_on():
    recipe = recipe_from_dict({"training": {"micro_batch_size": "auto"}})
    assert recipe.training.micro_batch_size == "auto"
    with pytest.raises(RecipeError, match="must be an integer or one of auto"):
        recipe_from_dict({"training": {"micro_batch_size": "half"}}, source="r.yaml")
    for strategy in ("pipeline", "parameter_server", "multi_worker"):
        with pytest.raises(RecipeError) as caught:
            recipe_from_dict({"training": {"micro_batch_size": "auto"},
                              "runtime": {"strategy": strategy}}, source="r.yaml")
        assert (f"training.micro_batch_size auto cannot be used with runtime.strategy "
                f"{strategy}") in str(caught.value)
