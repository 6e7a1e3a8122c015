"""The public API resolves from `tfaccel` and `tfaccel.data`, and docs/api.md renders it."""

import inspect

import tfaccel

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)


def test_top_level_names_resolve_to_the_implementations():
    from tfaccel.engine import accumulation, precision, sharded_dense, sharded_embedding, strategy
    from tfaccel.training.run import runner

    assert tfaccel.accumulate is accumulation.accumulate
    assert tfaccel.AccumulatingModel is accumulation.AccumulatingModel
    assert tfaccel.make_strategy is strategy.make_strategy
    assert tfaccel.set_precision is precision.set_precision
    assert tfaccel.train is runner.train
    assert tfaccel.ShardedEmbedding is sharded_embedding.ShardedEmbedding
    assert tfaccel.ShardedDense is sharded_dense.ShardedDense
    assert set(tfaccel.__all__) >= {"accumulate", "AccumulatingModel", "make_strategy",
                                    "set_precision", "train", "data"}


def test_data_builders_take_keyword_arguments_and_a_global_batch_size():
    builders = [name for name in tfaccel.data.__all__ if name.startswith("from_")]
    assert {"from_arrays", "from_image_folder", "from_timeseries", "from_csv"} <= set(builders)
    for name in builders + ["optimize"]:
        builder = getattr(tfaccel.data, name)
        parameters = inspect.signature(builder).parameters
        if name == "from_arrays":
            # The deliberate exception: fit(x, y, batch_size)'s order; the rest keyword-only.
            assert list(parameters)[:3] == ["x", "y", "batch_size"]
            assert parameters["batch_size"].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
            assert parameters["shuffle_buffer"].kind is inspect.Parameter.KEYWORD_ONLY
            continue
        if name == "from_csv":
            # make_csv_dataset(file_pattern, batch_size, ...)'s first two; the rest keyword-only.
            assert list(parameters)[:2] == ["source", "batch_size"]
            assert parameters["batch_size"].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
            assert parameters["label_name"].kind is inspect.Parameter.KEYWORD_ONLY
            continue
        assert parameters["batch_size"].kind is inspect.Parameter.KEYWORD_ONLY, name


def _rendered():
    """``{dotted path: object}`` of every ``::: path`` docs/api.md renders."""
    import importlib
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "api.md").read_text(encoding="utf-8")
    rendered = {}
    for line in text.splitlines():
        if not line.startswith("::: "):
            continue
        path = line[4:].strip()
        module_name, _, attribute = path.rpartition(".")
        while True:  # the longest importable module, then attributes (a class's method)
            try:
                target = importlib.import_module(module_name)
                break
            except ModuleNotFoundError:
                module_name, _, outer = module_name.rpartition(".")
                attribute = f"{outer}.{attribute}"
        for part in attribute.split("."):
            target = getattr(target, part)
        rendered[path] = target
    return rendered


def test_docs_api_renders_every_public_name_and_only_public_objects():
    rendered = _rendered()
    public = {f"tfaccel.{name}": getattr(tfaccel, name) for name in tfaccel.__all__
              if name not in ("__version__",) and callable(getattr(tfaccel, name))
              and not inspect.ismodule(getattr(tfaccel, name))}
    public.update({f"tfaccel.data.{name}": getattr(tfaccel.data, name)
                   for name in tfaccel.data.__all__})
    # Each rendered object is the one a public name gives (not an internal copy), with
    # the Google-style docstring mkdocstrings renders.
    for path, target in rendered.items():
        names = [name for name, obj in public.items() if obj is target]
        assert names, f"docs/api.md renders {path}, which no public name gives"
        assert inspect.getdoc(target) and "Args:" in inspect.getdoc(target) \
            or inspect.isclass(target), path
    # Every public function of `tfaccel` and every data builder is rendered.
    shown = {id(obj) for obj in rendered.values()}
    wanted = [name for name in public
              if name.count(".") == 1 or name.split(".")[-1].startswith("from_")
              or name.endswith(".optimize")]
    assert sorted(name for name in wanted if id(public[name]) not in shown) == []
    assert len(wanted) >= 12


def test_unknown_attribute_is_an_attribute_error():
    import pytest

    with pytest.raises(AttributeError, match="no_such_thing"):
        tfaccel.no_such_thing
