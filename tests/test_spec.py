"""Tests of data/tail/spec.py: the tail's two typed inputs (TailOptions, SourceStages), loud on unknown names."""

import dataclasses
import inspect

import pytest

from tfaccel.data.tail.spec import UNSET, TailOptions

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


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


def test_options_travel_whole_never_spread_into_keywords():
    # Not a mapping: `**options` fails loudly instead of passing some fields somewhere.
    options = TailOptions(seed=3, cache=None)

    def builder(**kwargs):
        return kwargs

    with pytest.raises(TypeError, match="must be a mapping"):
        builder(**options)
    with pytest.raises(TypeError):
        options["seed"]


def test_chosen_unsets_what_holds_the_tails_default_and_keeps_the_rest():
    # A front door names every keyword: a default passed by name is not a choice, so a
    # source's own default (a shard policy, uint8 for nearest) still holds; None where the
    # default is not None, 0 and False where it is not, stay chosen.
    options = TailOptions(seed=None, shard_policy=None, image_dtype="float32",
                          deterministic=True, augment_on="example", drop_remainder=False,
                          num_parallel_calls=-1, cache="memory", sequential=False)
    chosen = options.chosen()
    assert [getattr(chosen, name) for name in ("seed", "shard_policy", "image_dtype",
                                               "num_parallel_calls", "sequential")] == \
        [UNSET] * 5
    assert (chosen.deterministic, chosen.augment_on, chosen.drop_remainder, chosen.cache) \
        == (True, "example", False, "memory")
    assert TailOptions(image_dtype=None).chosen().image_dtype is None


def test_every_field_is_an_optimize_keyword_a_user_may_pass():
    from tfaccel.data.tail import assemble

    names = {field.name for field in dataclasses.fields(TailOptions)}
    assert names <= set(inspect.signature(assemble.optimize).parameters)


def test_validation_options_of_tail_options_drop_the_training_only_ones():
    from tfaccel.data.tail import assemble

    train = TailOptions(seed=1, cache="c", augment=["flip"], augment_on="batch",
                        drop_remainder=True, stream=object(), service=object())
    validation = assemble.validation_options(train)
    assert isinstance(validation, TailOptions)
    assert validation == TailOptions(seed=1, cache="c", drop_remainder=False)


def test_an_unset_field_means_optimizes_default_once_resolved():
    # The tail reads resolved options: each DEFAULTS value is optimize's keyword default,
    # so a source's `tail.build` and a user's `optimize` call agree on every unset field.
    from tfaccel.data.tail import assemble
    from tfaccel.data.tail.spec import DEFAULTS

    names = [field.name for field in dataclasses.fields(TailOptions)]
    assert sorted(DEFAULTS) == sorted(names)
    signature = inspect.signature(assemble.optimize).parameters
    assert DEFAULTS == {name: signature[name].default for name in names}
    resolved = TailOptions(seed=4).resolved()
    assert resolved.seed == 4 and resolved.augment_on == "batch"
    assert UNSET not in [getattr(resolved, name) for name in names]


def test_source_stages_name_their_decode_in_messages_and_refuse_unknown_fields():
    from tfaccel.data.tail.spec import SourceStages

    def parse(x):
        return x

    assert SourceStages().culprit == "the dataset's images"
    assert SourceStages(map_fn=parse).culprit == "the images of optimize(map_fn=parse)"
    assert SourceStages(map_fn=parse, culprit="the frames").culprit == "the frames"
    with pytest.raises(TypeError, match="random_decoder"):
        SourceStages(random_decoder=parse)


def test_the_typed_entry_runs_a_sources_own_stages():
    import numpy as np
    import tensorflow as tf

    from tfaccel.data import tail
    from tfaccel.data.tail.spec import SourceStages

    def decode(x):
        # Example 3 fails to decode: skipped with ignore_decode_errors, as a source asks.
        with tf.control_dependencies([tf.debugging.assert_none_equal(
                x, tf.constant(3, tf.int64))]):
            return x * 10

    def plus_seed(x, seed):
        return x + tf.cast(seed[1], tf.int64)  # seed[1] is the random decode's salt, 2

    dataset = tf.data.Dataset.range(6)
    batches = tail.build(dataset, batch_size=2,
                         source=SourceStages(map_fn=decode, ignore_decode_errors=True,
                                             random_decode=plus_seed),
                         options=TailOptions(deterministic=True, image_dtype=None))
    got = np.concatenate([b.numpy() for b in batches])
    assert got.tolist() == [2, 12, 22, 42, 52]
