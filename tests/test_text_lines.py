"""from_text_lines: one example per line, files interleaved, labels per file or per line."""

import gzip
import logging

import numpy as np
import pytest

from tfaccel.data import from_text_lines
from tfaccel.errors import DataError, UserInputError


def _pairs(ds):
    out = []
    for x, y in ds:
        out += list(zip(x.numpy().tolist(), y.numpy().tolist()))
    return out


@pytest.fixture
def tsv(tmp_path):
    """Three TSV files of ``label<TAB>text`` lines (a blank line and CRLF endings included)."""
    files = []
    for f in range(3):
        lines = [f"{'pos' if (f + i) % 2 else 'neg'}\tfile{f} line{i} a\tb" for i in range(5)]
        path = tmp_path / f"part-{f}.tsv"
        path.write_bytes(("\r\n".join(lines[:2]) + "\r\n\n" + "\n".join(lines[2:]) + "\n")
                         .encode())
        files.append(path)
    return tmp_path, files


def test_first_field_labels_every_line_once(tsv):
    root, _ = tsv
    ds = from_text_lines(str(root / "part-*.tsv"), labels="first_field", batch_size=4,
                         seed=0)
    assert ds.class_names == ["neg", "pos"] and ds.num_examples == 15
    assert ds.files == [str(root / f"part-{f}.tsv") for f in range(3)]
    got = sorted(_pairs(ds))
    # The label is the text before the FIRST tab; the rest (tabs included) is the text.
    want = sorted((f"file{f} line{i} a\tb".encode(), (f + i) % 2)
                  for f in range(3) for i in range(5))
    assert got == want


def test_seeded_order_repeats_and_differs_by_seed(tsv):
    root, _ = tsv
    kwargs = dict(labels="first_field", batch_size=4)
    a = _pairs(from_text_lines(str(root / "*.tsv"), seed=1, **kwargs))
    b = _pairs(from_text_lines(str(root / "*.tsv"), seed=1, **kwargs))
    c = _pairs(from_text_lines(str(root / "*.tsv"), seed=2, **kwargs))
    assert a == b and a != c and sorted(a) == sorted(c)


def test_unshuffled_single_file_keeps_line_order(tsv):
    _, files = tsv
    ds = from_text_lines(files[0], labels="first_field", shuffle=False, batch_size=2,
                         max_length=8, label_mode="categorical")
    got = _pairs(ds)
    assert [t for t, _ in got] == [b"file0 li"] * 5
    assert [y for _, y in got] == [[1.0, 0.0], [0.0, 1.0]] * 2 + [[1.0, 0.0]]


def test_labels_per_file_and_class_names(tmp_path):
    (tmp_path / "neg.txt").write_text("bad\nawful\n")
    (tmp_path / "pos.txt").write_text("good\n")
    ds = from_text_lines([tmp_path / "neg.txt", tmp_path / "pos.txt"], labels=[0, 1],
                         class_names=["neg", "pos"], label_mode="binary", shuffle=False,
                         batch_size=8)
    assert ds.class_names == ["neg", "pos"]
    assert _pairs(ds) == [(b"bad", [0.0]), (b"good", [1.0]), (b"awful", [0.0])]
    texts = from_text_lines(tmp_path / "*.txt", batch_size=None, shuffle=False)
    assert texts.class_names is None
    assert [t.numpy() for t in texts] == [b"bad", b"good", b"awful"]


def test_header_gzip_and_latin1(tmp_path):
    path = tmp_path / "a.tsv.gz"
    with gzip.open(path, "wb") as f:
        f.write("label\ttext\nx\tcaf\xe9\ny\tna\xefve\n".encode("latin-1"))
    ds = from_text_lines(path, labels="first_field", skip_header_lines=1,
                         compression="GZIP", encoding="latin-1", shuffle=False)
    assert ds.class_names == ["x", "y"] and ds.num_examples == 2
    assert _pairs(ds) == [("café".encode(), 0), ("naïve".encode(), 1)]


def test_undecodable_file_skipped_in_one_warning(tmp_path, caplog):
    (tmp_path / "good.txt").write_text("fine\n")
    (tmp_path / "bad.txt").write_bytes(b"caf\xe9\n")
    with caplog.at_level(logging.WARNING):
        ds = from_text_lines(tmp_path / "*.txt", shuffle=False)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and str(tmp_path / "bad.txt") in warnings[0]
    assert "encoding=" in warnings[0]
    assert ds.skipped_files == [str(tmp_path / "bad.txt")] and ds.num_examples == 1
    assert np.concatenate([b.numpy() for b in ds]).tolist() == [b"fine"]


@pytest.mark.parametrize("content, kwargs, error, message", [
    (None, {}, DataError, r"Text file pattern '.*missing.txt' matches no file"),
    (b"pos\tok\nno label here\n", {"labels": "first_field"}, DataError,
     r"Line 2 of '.*a.txt' has no label"),
    (b"pos\tok\nneu\tmeh\n", {"labels": "first_field", "class_names": ["neg", "pos"]},
     DataError, r"'.*a.txt' has label\(s\) \['neu'\] not in class_names"),
    (b"\xff\xfe\n", {}, DataError, "No usable text file"),
    (b"x\n", {"labels": [0, 1]}, UserInputError, "expected 1 .* got 2"),
    (b"x\n", {"labels": "column"}, UserInputError, "labels must be None"),
    (b"x\n", {"encoding": "utf-16"}, UserInputError, "newline"),
    (b"x\tz\n", {"labels": "first_field", "label_mode": "binary"}, UserInputError,
     "exactly 2"),
])
def test_bad_input_is_named(tmp_path, content, kwargs, error, message):
    path = tmp_path / ("a.txt" if content is not None else "missing.txt")
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(error, match=message):
        from_text_lines(path, **kwargs)


def test_file_cache_keeps_every_line(tsv, tmp_path):
    root, _ = tsv
    kwargs = dict(labels="first_field", batch_size=4, seed=0, cache=str(tmp_path / "c"))
    first = sorted(_pairs(from_text_lines(str(root / "*.tsv"), **kwargs)))
    again = sorted(_pairs(from_text_lines(str(root / "*.tsv"), **kwargs)))
    assert first == again and len(first) == 15


def test_without_verify_an_unknown_label_stops_the_epoch_naming_it(tmp_path):
    import tensorflow as tf

    (tmp_path / "a.tsv").write_text("pos\tok\nneu\tmeh\n")
    ds = from_text_lines(tmp_path / "a.tsv", labels="first_field", verify=False,
                         class_names=["neg", "pos"], shuffle=False)
    assert ds.num_examples is None
    with pytest.raises(tf.errors.InvalidArgumentError, match="not in class_names.*neu"):
        list(ds)


def test_input_contexts_split_the_files_and_a_stream_resumes(tsv):
    import tensorflow as tf

    from tfaccel.data import EpochStream

    root, _ = tsv
    (root / "part-3.tsv").write_text("neg\textra line\n")
    shares = []
    for i in range(2):
        ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=i)
        ds = from_text_lines(str(root / "*.tsv"), labels="first_field", batch_size=1,
                             seed=0, input_context=ctx)
        shares.append(sorted(_pairs(ds)))
    whole = sorted(_pairs(from_text_lines(str(root / "*.tsv"), labels="first_field",
                                          batch_size=4, seed=0)))
    assert sorted(shares[0] + shares[1]) == whole and len(whole) == 16
    assert not set(shares[0]) & set(shares[1])
    # A stream's pass is the same when rebuilt, and resumes at a batch.
    kwargs = dict(labels="first_field", batch_size=4, seed=3)
    full = _pairs(from_text_lines(str(root / "*.tsv"), **kwargs,
                                  stream=EpochStream(num_passes=1)))
    resumed = _pairs(from_text_lines(str(root / "*.tsv"), **kwargs,
                                     stream=EpochStream(skip_batches=2, num_passes=1)))
    assert resumed == full[8:]


# --------------------------------------------------------------------- data.source: text_lines

WORDS = {"neg": "bad awful poor dull", "pos": "good great fine nice"}


def _line_files(root, *, files=4, lines=(30, 25, 20, 15)):
    """`files` files of ``label<TAB>text`` lines; a class's words give its label away."""
    root.mkdir(parents=True, exist_ok=True)
    for f in range(files):
        rows = []
        for i in range(lines[f]):
            label = ("neg", "pos")[(f + i) % 2]
            own = WORDS[label].split()
            rows.append(f"{label}\t" + " ".join([own[i % 4], "the", "a", own[(i + 1) % 4]]
                                                 * (1 + i % 5)))
        (root / f"part-{f}.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return str(root / "part-*.tsv")


def _lines_recipe(tmp_path, path, **data):
    import yaml

    recipe = tmp_path / "lines.yaml"
    recipe.write_text(yaml.safe_dump({
        "name": "lines", "seed": 0,
        "data": {"source": "text_lines", "path": path, "validation_fraction": 0.25,
                 "cache": "memory", "shuffle_buffer": 200, **data},
        "model": {"name": "text_cnn", "params": {"embed_dim": 8, "filters": [16]}},
        "optimizer": {"learning_rate": 0.01},
        "training": {"epochs": 4, "global_batch_size": 16},
        "runtime": {"precision": "float32", "verbose": 0, "tensorboard": False}}))
    return recipe


def test_a_text_lines_recipe_holds_out_whole_files_counts_every_line_and_learns(tmp_path):
    import json

    from click.testing import CliRunner

    from tfaccel.cli.main import main
    from tfaccel.data import splits

    pattern = _line_files(tmp_path / "lines")
    files = [str(tmp_path / "lines" / f"part-{f}.tsv") for f in range(4)]
    _, held_out = splits.held_out_files(files, 0.25, 0)  # the seeded rule: one whole file
    lines = {file: count for file, count in zip(files, (30, 25, 20, 15))}
    result = CliRunner().invoke(main, ["train", str(_lines_recipe(tmp_path, pattern)),
                                       "--run-dir", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["class_names"] == ["neg", "pos"]
    assert summary["dataset"]["validation_examples"] == sum(lines[f] for f in held_out)
    assert summary["dataset"]["train_examples"] == 90 - sum(lines[f] for f in held_out)
    # 10 words and padding and out-of-vocabulary.
    assert summary["dataset"]["text"]["vocabulary_size"] == 12
    assert summary["final_metrics"]["val_accuracy"] >= 0.9, summary["final_metrics"]


def test_a_text_lines_recipe_names_a_missing_pattern_and_a_validation_label_unseen(tmp_path):
    from click.testing import CliRunner

    from tfaccel.cli.main import main
    from tfaccel.config.recipe import DataConfig
    from tfaccel.data.from_recipe import build_datasets

    missing = str(tmp_path / "nowhere" / "*.tsv")
    result = CliRunner().invoke(main, ["validate", str(_lines_recipe(tmp_path, missing))])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert f"data.path: the text lines pattern {missing!r} matches no file" in result.output
    (tmp_path / "two").mkdir()
    (tmp_path / "two" / "a.tsv").write_text("neg\tbad day\npos\tgood day\n")
    (tmp_path / "two" / "b.tsv").write_text("meh\tso so day\n")
    config = DataConfig(source="text_lines", path=str(tmp_path / "two" / "*.tsv"),
                        validation_fraction=0.5)
    with pytest.raises(DataError, match=r"b\.tsv' has label\(s\) \['meh'\] not in "
                                        r"class_names=\['neg', 'pos'\]"):
        build_datasets(config, global_batch_size=2, num_replicas=1, seed=0,
                       deterministic=True)


def test_validation_path_is_the_same_fixed_split_for_every_seed(tmp_path):
    from tfaccel.config.recipe import DataConfig
    from tfaccel.data.from_recipe import build_datasets

    _line_files(tmp_path / "train", files=3)  # 30 + 25 + 20 lines
    _line_files(tmp_path / "test", files=1, lines=(15,))
    config = DataConfig(source="text_lines", path=str(tmp_path / "train" / "*.tsv"),
                        validation_path=str(tmp_path / "test" / "part-0.tsv"))
    seen = []
    for seed in (0, 1, 2):
        _, val, info = build_datasets(config, global_batch_size=4, num_replicas=1,
                                      seed=seed, deterministic=True)
        assert (info.train_examples, info.validation_examples) == (75, 15)
        # (token ids, label) of every validation line: batches by length reorder them.
        seen.append(sorted((tuple(int(i) for i in ids if i), int(y)) for x, ys in val
                           for ids, y in zip(x.numpy(), ys.numpy())))
    assert len(seen[0]) == 15 and seen[0] == seen[1] == seen[2]
    assert [y for _, y in seen[0]].count(1) == 7  # the file's 7 "pos" lines of 15
    overlapping = DataConfig(source="text_lines", path=str(tmp_path / "*" / "*.tsv"),
                             validation_path=str(tmp_path / "test" / "part-0.tsv"))
    with pytest.raises(DataError, match=r"part-0\.tsv' matches both data\.path and "
                                        r"data\.validation_path"):
        build_datasets(overlapping, global_batch_size=4, num_replicas=1, seed=0,
                       deterministic=True)


@pytest.mark.parametrize("data, message", [
    ({"source": "arrays", "validation_path": "t.npz"},
     "data.validation_path is read by data.source text_lines or csv or tfrecords only, not "
     "'arrays'; use data.validation_fraction"),
    ({"source": "csv", "validation_path": "t.csv", "validation_fraction": 0.2},
     "data.validation_path and data.validation_fraction both name the validation split"),
    ({"source": "text_lines", "validation_path": "t.tsv", "validation_fraction": 0.2},
     "data.validation_path and data.validation_fraction both name the validation split"),
])
def test_validation_path_is_refused_where_it_would_be_ignored(tmp_path, data, message):
    from tfaccel.config.recipe import load_recipe
    from tfaccel.errors import RecipeError

    recipe = tmp_path / "r.yaml"
    recipe.write_text(__import__("yaml").safe_dump({"data": {"path": "x", **data}}))
    with pytest.raises(RecipeError, match=message):
        load_recipe(recipe)


def test_validate_names_a_missing_validation_path_and_the_prepare_command(tmp_path):
    from click.testing import CliRunner

    from tfaccel.cli.main import main

    pattern = _line_files(tmp_path / "lines")
    recipe = _lines_recipe(tmp_path, pattern, validation_fraction=0.0,
                           validation_path="gone/test.tsv", prepare="python make_lines.py")
    result = CliRunner().invoke(main, ["validate", str(recipe)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    missing = str(tmp_path / "gone" / "test.tsv")  # resolved against the recipe's folder
    assert (f"data.validation_path: the text lines pattern {missing!r} matches no file. "
            "Prepare the data first: python make_lines.py") in result.output
    # Without data.prepare the message is the plain one; with the data there, OK.
    (tmp_path / "gone").mkdir()
    (tmp_path / "gone" / "test.tsv").write_text("neg\tbad day\n")
    result = CliRunner().invoke(main, ["validate", str(recipe)])
    assert result.exit_code == 0 and "OK" in result.output, result.output


def test_bench_and_doctor_run_on_a_text_lines_recipe(tmp_path):
    import json

    from click.testing import CliRunner

    from tfaccel.cli.main import main

    recipe = _lines_recipe(tmp_path, _line_files(tmp_path / "lines"))
    bench = CliRunner().invoke(main, ["bench", str(recipe), "--batches", "3", "--repeats",
                                      "1", "--no-epochs"])
    assert bench.exit_code == 0, bench.output
    assert "truly sequential" in bench.output and "padding" in bench.output
    doctor = CliRunner().invoke(main, ["doctor", str(recipe), "--json", "--steps", "3",
                                       "--repeats", "1"])
    assert doctor.exit_code == 0, doctor.output
    report = json.loads(doctor.output[doctor.output.index("{"):])
    assert report["verdict"] in ("compute-bound", "moderately-input-bound", "input-bound")
    assert report["pipeline_examples_per_sec"] > 0 and report["model_examples_per_sec"] > 0


def test_one_file_split_by_lines_takes_its_classes_from_the_training_lines(tmp_path):
    import dataclasses

    from tfaccel.config.recipe import DataConfig
    from tfaccel.data import splits
    from tfaccel.data.from_recipe import build_datasets

    held = splits.split_indices(30, 0.2, 7)[1].tolist()
    labels = ["a", "b"] * 15
    path = tmp_path / "one.tsv"

    def build(labels):
        path.write_text("".join(f"{label}\t{i}\n" for i, label in enumerate(labels)))
        config = dataclasses.replace(DataConfig(), source="text_lines", path=str(path),
                                     validation_fraction=0.2, validation_split_name=None,
                                     cache=None)
        return build_datasets(config, global_batch_size=4, num_replicas=1, seed=7,
                              deterministic=True, raw=True)

    _, val, info = build(labels)
    assert info.class_names == ["a", "b"] and info.validation_examples == 6
    assert sorted(int(t) for x, _ in val for t in x.numpy()) == held
    # A label only on a held-out line is not a class (it would have no training example):
    # the validation split names it.
    labels[held[0]] = "c"
    with pytest.raises(DataError, match=r"one.tsv' has label\(s\) \['c'\] not in "
                                        r"class_names=\['a', 'b'\]"):
        build(labels)
