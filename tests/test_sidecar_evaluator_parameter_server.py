"""The evaluator task on a parameter-server run's checkpoints (variables.npz, tables sharded
over the servers): the model evaluated holds the chief's weights; no cluster needed."""

import json

import numpy as np
from launch_helpers import write_blobs

from tfaccel.training.run import coordinator_loop
from tfaccel.training.run import sidecar_evaluator as evaluator
from tfaccel.training.run_dir import checkpoints as ckpt


def _save(model, folder, *, servers):
    """A checkpoint as the parameter-server chief writes it (model, then optimizer)."""
    import keras

    optimizer = keras.optimizers.Adam(1e-3)
    optimizer.build(model.trainable_variables)
    return coordinator_loop._save(folder, model=model, optimizer=optimizer, step=8,
                                  steps_per_epoch=4, records=[], partial=[], keep=2,
                                  servers=servers)


def _embedding_model(seed):
    import keras

    keras.utils.set_random_seed(seed)
    ids = keras.Input((5,), dtype="int32")
    x = keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(64, 8)(ids))
    x = keras.layers.Dense(64)(x)  # an 8x64 kernel (2 KiB): sharded like the table
    return keras.Model(ids, keras.layers.Dense(3)(x))


def test_sharded_tables_and_kernels_come_back_whole_into_the_evaluated_model(tmp_path):
    from tfaccel.engine.layer_sharding import shard_layers, unshard_layers
    from tfaccel.engine.sharded_dense import ShardedDense
    from tfaccel.engine.sharded_embedding import ShardedEmbedding

    # The chief's copy: its 64x8 table and 8x64 kernel (2 KiB each) in 2 shards of >= 512
    # bytes, then trained.
    chief = shard_layers(_embedding_model(0), min_shard_bytes=512, max_shards=2)
    assert sum(isinstance(layer, ShardedEmbedding) for layer in chief.layers) == 1
    assert sum(isinstance(layer, ShardedDense) for layer in chief.layers) == 1
    rng = np.random.default_rng(1)
    for variable in chief.variables:
        variable.assign(rng.normal(size=variable.shape).astype(variable.dtype))
    path = _save(chief, tmp_path, servers=2)
    checkpoint, _ = ckpt.latest_checkpoint(tmp_path)
    assert checkpoint.path == path and checkpoint.state["parameter_servers"] == 2
    fresh = _embedding_model(7)  # another initialisation, as an evaluator's
    evaluator.restore_parameter_server_weights(fresh, checkpoint, min_shard_bytes=512)
    expected = unshard_layers(chief).get_weights()
    got = fresh.get_weights()
    assert [w.shape for w in got] == [(64, 8), (8, 64), (64,), (64, 3), (3,)]
    for a, b in zip(got, expected, strict=True):
        np.testing.assert_array_equal(a, b)  # copied values, no arithmetic


def test_a_checkpoint_of_another_model_is_refused_by_name(tmp_path):
    import keras
    import pytest

    from tfaccel.errors import UserInputError

    _save(_embedding_model(0), tmp_path, servers=1)
    checkpoint, _ = ckpt.latest_checkpoint(tmp_path)
    other = keras.Sequential([keras.Input((5,)), keras.layers.Dense(4)])
    with pytest.raises(UserInputError, match=r"variable 0 has shape \(64, 8\) but the "
                                             r"recipe's model's .* has \(5, 4\)"):
        evaluator.restore_parameter_server_weights(other, checkpoint, min_shard_bytes=None)


def test_an_evaluator_evaluates_a_parameter_server_runs_checkpoint(tmp_path):
    # The chief's model trained here on one device, saved as the parameter-server chief
    # saves; the evaluator's record equals evaluating that model on the validation split.
    from tfaccel.config.recipe import recipe_from_dict
    from tfaccel.training.model_setup.model_build import build_model
    from tfaccel.training.run.session import open_session

    blobs = write_blobs(tmp_path)
    recipe = {"name": "ps-tiny", "data": {"source": "arrays", "path": str(blobs),
                                          "validation_split_name": "test"},
              "model": {"name": "mlp", "params": {"hidden_units": [16],
                                                  "normalization": "none", "dropout": 0.0}},
              "optimizer": {"name": "adam", "learning_rate": 3e-2},
              "training": {"epochs": 1, "global_batch_size": 100},
              "runtime": {"strategy": "parameter_server", "precision": "float32"}}
    run_dir = tmp_path / "run"
    local = recipe_from_dict({**recipe, "runtime": {"precision": "float32"}})
    with open_session(local) as session:
        data = session.build_data()
        trained, model = build_model(local, strategy=session.strategy, plan=session.plan,
                                     data=data)
        trained.fit(data.make_stream(0), steps_per_epoch=data.steps_per_epoch, epochs=1,
                    verbose=0)
        expected = trained.evaluate(data.validation, return_dict=True, verbose=0)
        (run_dir / "checkpoints").mkdir(parents=True)
        _save(model, run_dir / "checkpoints", servers=1)
    (run_dir / "summary.json").write_text(json.dumps({"status": "completed"}))
    result = evaluator.evaluate_alongside(recipe, run_dir=run_dir, poll_seconds=0.01)
    (record,) = result.records
    assert (record["checkpoint"], record["global_step"]) == ("step-0000008", 8)
    assert abs(record["val_loss"] - expected["loss"]) < 1e-5, (record, expected)
    assert abs(record["val_accuracy"] - expected["accuracy"]) < 1e-6
    assert expected["accuracy"] > 0.7  # it trained: not the untrained model's figures
    lines = (run_dir / "evaluation" / "metrics.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["val_loss"] == record["val_loss"]
