"""The public API named in the design card resolves from `tfaccel` and `tfaccel.data`."""

import inspect

import tfaccel


def test_top_level_names_resolve_to_the_implementations():
    from tfaccel.engine import accumulation, precision, strategy
    from tfaccel.training import run as runner

    assert tfaccel.accumulate is accumulation.accumulate
    assert tfaccel.AccumulatingModel is accumulation.AccumulatingModel
    assert tfaccel.make_strategy is strategy.make_strategy
    assert tfaccel.set_precision is precision.set_precision
    assert tfaccel.train is runner.train
    assert set(tfaccel.__all__) >= {"accumulate", "AccumulatingModel", "make_strategy",
                                    "set_precision", "train", "data"}


def test_data_builders_take_keyword_arguments_and_a_global_batch_size():
    for name in ("from_arrays", "from_image_folder", "from_tfrecords", "from_tfds",
                 "from_python", "optimize"):
        builder = getattr(tfaccel.data, name)
        parameters = inspect.signature(builder).parameters
        assert parameters["batch_size"].kind is inspect.Parameter.KEYWORD_ONLY, name
        assert builder.__doc__, name


def test_unknown_attribute_is_an_attribute_error():
    import pytest

    with pytest.raises(AttributeError, match="no_such_thing"):
        tfaccel.no_such_thing  # noqa: B018
