"""Tests of data/tail/spec.py: the tail's options as one frozen object, loud on unknown names."""

import dataclasses
import inspect

import pytest

from tfaccel.data.tail.spec import UNSET, TailOptions


def test_an_unknown_option_fails_at_construction_naming_it():
    with pytest.raises(TypeError, match="shufle_buffer"):
        TailOptions(shufle_buffer=8)


def test_options_are_never_changed_a_variant_is_a_replace():
    options = TailOptions(cache="memory", augment=["flip"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.cache = None
    variant = dataclasses.replace(options, cache=None)
    assert (variant.cache, options.cache) == (None, "memory")
    assert variant.without(["augment"]).augment is UNSET and variant.augment == ["flip"]


def test_only_set_fields_spread_into_a_builder_call():
    # An unset field is not passed (the builder's default holds); None is passed as None.
    options = TailOptions(seed=3, cache=None)

    def builder(**kwargs):
        return kwargs

    assert builder(**options) == {"seed": 3, "cache": None}
    assert dict(options) == {"seed": 3, "cache": None} and len(options) == 2
    assert options.get("augment", "absent") == "absent" and "cache" in options
    with pytest.raises(KeyError, match="augment"):
        options["augment"]
    with pytest.raises(KeyError, match="items"):  # a method is not an option
        options["items"]


def test_every_field_is_an_optimize_keyword_a_user_may_pass():
    from tfaccel.data.tail import assemble

    names = {field.name for field in dataclasses.fields(TailOptions)}
    public = set(assemble.public_options(assemble.optimize))
    assert names <= public, names - public
    assert names <= set(inspect.signature(assemble.optimize).parameters)


def test_validation_options_of_tail_options_drop_the_training_only_ones():
    from tfaccel.data.tail import assemble

    train = TailOptions(seed=1, cache="c", augment=["flip"], augment_on="batch",
                        drop_remainder=True, stream=object(), service=object())
    validation = assemble.validation_options(train)
    assert isinstance(validation, TailOptions)
    assert dict(validation) == {"seed": 1, "cache": "c", "drop_remainder": False}
    # A builder's own keywords (a dict) give a dict, as before.
    assert assemble.validation_options({"seed": 1, "augment": ["flip"]}) == {
        "seed": 1, "drop_remainder": False}
