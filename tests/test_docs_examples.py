"""Every fenced block of README.md and docs/*.md runs as written, or a visible marker skips it.

A python block runs as a fresh interpreter would run it (a fork of the warm one:
tests/warm_python.py), a bash block in bash (`tfaccel` and `python` are this interpreter's,
warm too), a yaml block is a recipe checked by `tfaccel validate`. Each page runs
in a folder of its own (a copy of `recipes/` and the small files of `_write_fixtures`, the
folders and files the examples name); a block marked `<!-- docs-test: setup -->` runs
before the page's later blocks, and a python one gives them its names. A block marked
`<!-- docs-test: skip (reason) -->` is not run; `slow` ones are marked `slow`, `heavy` ones
(the reason names the cheaper tests covering them) `heavy`.
"""

import os
import re
import shutil
import subprocess
import sys
import wave
from pathlib import Path

import numpy as np
import pytest
import warm_python
from docs_blocks import (
    KINDS,
    PAGES,
    ROOT,
    RUNNABLE,
    Block,
    all_blocks,
    blocks,
    prose_lines,
    stray_markers,
)

TIMEOUT = 600
BLOCKS = all_blocks()
RUN = [b for b in BLOCKS if b.lang in RUNNABLE and b.kind not in ("skip", "manifest")]
MANIFESTS = [b for b in BLOCKS if b.kind == "manifest"]


# ------------------------------------------------------------------- platform manifests
# TFJob's replica types, as TFConfig names their tasks (tfaccel.config.cluster).
_TFJOB_TASKS = {"Chief": "chief", "Worker": "worker", "PS": "ps", "Evaluator": "evaluator"}


@pytest.mark.parametrize("block", [pytest.param(b, id=b.name) for b in MANIFESTS])
def test_a_manifest_is_a_tfjob_whose_tasks_train_one_recipe_into_one_shared_directory(
        block):
    import yaml

    from tfaccel.config.recipe import load_recipe

    job = yaml.safe_load(block.code)
    assert (job["apiVersion"], job["kind"]) == ("kubeflow.org/v1", "TFJob")
    replicas = job["spec"]["tfReplicaSpecs"]
    assert set(replicas) <= set(_TFJOB_TASKS) and replicas["Chief"]["replicas"] == 1
    assert replicas.get("Evaluator", {}).get("replicas", 0) <= 1
    commands = set()
    for name, spec in replicas.items():
        pod = spec["template"]["spec"]
        (container,) = [c for c in pod["containers"] if c["name"] == "tensorflow"]
        command = [str(word) for word in container["command"] + container.get("args", [])]
        assert command[:2] == ["tfaccel", "train"], (name, command)
        run_dir = command[command.index("--run-dir") + 1]
        mounts = [m["mountPath"] for m in container["volumeMounts"]]
        assert any(run_dir.startswith(m.rstrip("/") + "/") for m in mounts), (name, mounts)
        assert {v["name"] for v in pod["volumes"]} >= {m["name"] for m in
                                                        container["volumeMounts"]}
        commands.add(tuple(command))
    (command,) = commands  # every task the same command: TF_CONFIG tells them apart
    recipe, overrides = command[2], [command[i + 1] for i, word in enumerate(command)
                                     if word == "--set"]
    loaded = load_recipe(ROOT / recipe, overrides)  # the recipe it names is valid
    if "PS" in replicas:
        assert loaded.runtime.strategy == "parameter_server"
    else:
        assert loaded.runtime.strategy in ("auto", "multi_worker")


# --------------------------------------------------------------------------- the markers


def test_every_block_is_run_or_skipped_with_a_reason():
    problems = []
    for block in BLOCKS:
        if not block.lang:
            problems.append(f"{block.name}: no language after ``` (python, bash, yaml, text)")
        if block.kind is not None and block.kind not in KINDS:
            problems.append(f"{block.name}: unknown marker {block.kind!r}; one of {KINDS}")
        if block.kind in ("skip", "heavy") and not block.reason:
            problems.append(f"{block.name}: a {block.kind} needs its reason: "
                            f"{block.kind} (why{'' if block.kind == 'skip' else ', what covers it'})")
        if block.lang not in RUNNABLE and block.kind != "skip":
            problems.append(f"{block.name}: a {block.lang or 'plain'} block is not run; mark "
                            "it <!-- docs-test: skip (why) -->")
    for page in PAGES:
        problems += [f"{page.name}:{line}: a docs-test marker must be the line before a "
                     "block, as <!-- docs-test: KIND (reason) -->"
                     for line in stray_markers(page)]
    assert problems == []
    assert len(RUN) >= 20  # the parser finds the blocks: most of the pages' examples run


def test_every_example_that_trains_states_the_figure_it_reaches():
    # A reader copies an example to learn from it: it must say what it reaches, and this
    # test checks that figure (test_block_runs_as_written), not only the exit code.
    silent = [b.name for b in RUN if b.trains and not b.figures]
    assert silent == []
    assert len([b for b in RUN if b.figures]) >= 6


def test_a_figure_is_read_from_a_comment_and_checked_against_the_last_value_printed():
    block = Block(ROOT / "x.md", 1, "python", "model.fit(x, y)  # reaches accuracy >= 0.9 "
                  "in 3 epochs\n# loss: reaches loss <= 0.5\n", None, None)
    assert block.trains and block.figures == [("accuracy", ">=", 0.9), ("loss", "<=", 0.5)]
    printed = "1/3 - accuracy: 0.5000 - loss: 0.9\n3/3 - accuracy: 0.9500 - loss: 0.4000\n"
    assert _figure_problems(block, printed) == []
    assert _figure_problems(block, printed.replace("0.9500", "0.8000")) == [
        "accuracy: 0.8 printed last, the page says it reaches >= 0.9"]
    assert _figure_problems(block, "") == ["accuracy: never printed", "loss: never printed"]
    # Keras prints small values in scientific notation: 2.9146e-04 is 0.00029, not 2.9146.
    assert _figure_problems(block, printed.replace("0.4000", "2.9146e-04")) == []
    assert _figure_problems(block, printed.replace("0.4000", "2.9146e+01")) == [
        "loss: 29.146 printed last, the page says it reaches <= 0.5"]


def test_the_parser_reads_markers_and_dedents_blocks(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("text\n\n<!-- docs-test: skip (needs two hosts) -->\n\n```bash\nls\n```\n"
                    "- item:\n\n  ```python\n  x = 1\n  ```\n")
    first, second = blocks(page)
    assert stray_markers(page) == []
    assert (first.line, first.lang, first.kind, first.reason, first.code) == (
        5, "bash", "skip", "needs two hosts", "ls\n")
    assert (second.lang, second.kind, second.code) == ("python", None, "x = 1\n")
    page.write_text("<!-- docs-test skip (no colon) -->\n```bash\nls\n```\n\n"
                    "<!-- docs-test: setup -->\ntext\n")
    assert stray_markers(page) == [1, 6]


# --------------------------------------------------------------------------- the pages


TABLE_ROW = re.compile(r"^\s*\|")
HTML_COMMENT = re.compile(r"^\s*<!--.*-->\s*$")  # not rendered, so it swallows nothing


def test_no_markdown_is_swallowed_by_a_table():
    # Python-Markdown ends a table only at a blank line: a paragraph or list item right
    # after the last row renders inside that row's cells.
    problems = []
    for page in PAGES:
        previous = ""
        for number, line in prose_lines(page):
            if (TABLE_ROW.match(previous) and line.strip() and not TABLE_ROW.match(line)
                    and not HTML_COMMENT.match(line)):
                problems.append(f"{page.relative_to(ROOT)}:{number}: {line.strip()[:60]!r} "
                                "follows a table row without a blank line")
            previous = line
    assert problems == []


def test_the_swallow_check_finds_a_paragraph_after_a_table(tmp_path, monkeypatch):
    page = tmp_path / "page.md"
    page.write_text("| a | b |\n|---|---|\n| 1 | 2 |\n**Next** paragraph\n")
    monkeypatch.setattr(sys.modules[__name__], "PAGES", [page])
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    with pytest.raises(AssertionError, match="page.md:4: '\\*\\*Next\\*\\* paragraph'"):
        test_no_markdown_is_swallowed_by_a_table()


def test_the_recipe_table_lists_every_shipped_recipe():
    text = (ROOT / "docs" / "recipes.md").read_text()
    listed = re.findall(r"^\| `([\w.]+\.yaml)` \|", text, flags=re.M)
    assert sorted(listed) == sorted(p.name for p in (ROOT / "recipes").glob("*.yaml"))


def test_the_documented_import_does_not_shadow_a_data_variable():
    # `from tfaccel import data` clashes with the `data` array of Keras' tutorials.
    files = PAGES + [ROOT / "recipes" / "README.md", *sorted((ROOT / "tfaccel").rglob("*.py"))]
    found = [str(p.relative_to(ROOT)) for p in files if "from tfaccel import data\n"
             in p.read_text() or "from tfaccel import data " in p.read_text()]
    assert found == []


# --------------------------------------------------------------------------- the blocks


def _png(path, rng, size=40):
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8)).save(path)


def _wav(path, rng, rate=16000, samples=4000):
    path.parent.mkdir(parents=True, exist_ok=True)
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(rng.integers(-3000, 3000, samples, dtype=np.int16).tobytes())


def _write_fixtures(folder: Path, *, shapes: Path = None) -> None:
    """The small files the pages' examples name, so that each runs as written; `shapes`
    (the first 4,000 built-in images as an image folder) is the README's photos/, whose
    example states the figure it reaches on them."""
    import tensorflow as tf

    rng = np.random.default_rng(0)
    shutil.copytree(ROOT / "recipes", folder / "recipes")
    if shapes is not None:  # read-only files, linked, not copied for every block
        (folder / "photos").symlink_to(shapes, target_is_directory=True)
    for label in ("cat", "dog") if shapes is None else ():  # photos/: two classes of noise
        for i in range(12):
            _png(folder / "photos" / label / f"{i}.png", rng)
    records = folder / "data"
    records.mkdir()
    for shard in range(2):  # data/train-*.tfrecord, GZIP, encoded images and labels
        options = tf.io.TFRecordOptions(compression_type="GZIP")
        with tf.io.TFRecordWriter(str(records / f"train-{shard}.tfrecord"), options) as out:
            for i in range(8):
                image = tf.io.encode_png(rng.integers(0, 256, (20, 20, 3), dtype=np.uint8))
                example = tf.train.Example(features=tf.train.Features(feature={
                    "image": tf.train.Feature(bytes_list=tf.train.BytesList(
                        value=[image.numpy()])),
                    "label": tf.train.Feature(int64_list=tf.train.Int64List(
                        value=[i % 2]))}))
                out.write(example.SerializeToString())
    for label in ("neg", "pos"):  # aclImdb/train/{neg,pos}/*.txt
        for i in range(10):
            path = folder / "aclImdb" / "train" / label / f"{i}.txt"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"a {label} film number {i}, {'fine' if label == 'pos' else 'dull'}")
    (folder / "reviews").mkdir()
    for name in ("train-0", "train-1", "part-0", "part-1", "part-2"):  # reviews/*.tsv
        (folder / "reviews" / f"{name}.tsv").write_text("".join(
            f"{'pos' if i % 2 else 'neg'}\ta {'fine' if i % 2 else 'dull'} film {i}\n"
            for i in range(20)))
    for label in ("down", "go"):  # speech/{down,go}/*.wav, 16-bit PCM at 16 kHz
        for i in range(6):
            _wav(folder / "speech" / label / f"{i}.wav", rng)
    hours = np.arange(400)
    (folder / "weather.csv").write_text("date,temp,pressure,humidity\n" + "".join(
        f"d{h},{10 + 5 * np.sin(h / 24):.3f},{1000 + h % 7},{50 + h % 13}\n" for h in hours))
    for shard in range(2):  # data/train-*.csv: age (one missing), city, target (age > 34)
        (records / f"train-{shard}.csv").write_text("age,city,target\n" + "".join(
            f"{'' if i == 3 else 20 + i},{('paris', 'rome', 'oslo')[i % 3]},{int(i >= 15)}\n"
            for i in range(30)))
    for shard in range(4):  # data/part-*.csv: the csv recipe's columns
        (records / f"part-{shard}.csv").write_text("row_id,zone,spend,label\n" + "".join(
            f"{shard * 100 + i},{i % 4},{rng.normal():.3f},{i % 2}\n" for i in range(40)))
    shutil.copy(ROOT / "recipes" / "data" / "regimes.csv", records / "regimes.csv")
    shutil.copy(ROOT / "recipes" / "models" / "convnet.py", folder / "convnet.py")


@pytest.fixture(scope="session")
def docs_env(tmp_path_factory, shapes_data_dir, shapes_image_folder):
    """The environment the blocks run in: this checkout's tfaccel, `tfaccel` and `python`
    commands of this interpreter, the built-in dataset prepared once."""
    bin_dir = tmp_path_factory.mktemp("bin")
    # PYTHONPATH: this checkout first, as tests/conftest.py set it for the session.
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
               TFDS_DATA_DIR=shapes_data_dir, TF_CPP_MIN_LOG_LEVEL="2", MPLBACKEND="Agg")
    # Each `python`/`tfaccel` a block runs is a fork of a warm interpreter (TensorFlow
    # imported once: tests/warm_python.py), or a real one with TFACCEL_TESTS_COLD=1.
    python, env = warm_python.command_and_env([sys.executable], env, at_once=True)
    python = " ".join(f'"{word}"' for word in python)
    for name, command in (("tfaccel", f'exec {python} -m tfaccel.cli "$@"'),
                          ("python", f'exec {python} "$@"'),
                          ("python3", f'exec {python} "$@"')):
        (bin_dir / name).write_text(f"#!/bin/sh\n{command}\n")
        (bin_dir / name).chmod(0o755)
    return {"env": env, "pages": {}, "root": tmp_path_factory.mktemp("docs"),
            "shapes": shapes_image_folder}


def _run(block, folder: Path, env: dict, setup_code: str = ""):
    if block.lang == "python":
        script = folder / f"example_{block.line}.py"
        script.write_text(setup_code + block.code)
        command = [sys.executable, script.name]
    elif block.lang == "bash":
        command = ["bash", "-e", "-o", "pipefail", "-c", block.code]
    else:  # yaml: a recipe, checked as `tfaccel validate` checks one
        recipe = folder / f"recipe_{block.line}.yaml"
        recipe.write_text(block.code)
        command = [sys.executable, "-m", "tfaccel.cli", "validate", recipe.name]
    result = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True,
                            timeout=TIMEOUT)
    assert result.returncode == 0, (
        f"{block.name} ({block.lang}) exited {result.returncode}:\n{block.code}\n"
        f"--- stdout\n{result.stdout[-3000:]}\n--- stderr\n{result.stderr[-3000:]}")
    return result


def _page_folder(block, docs_env):
    """The block's page folder, with the page's setup blocks before `block` run once."""
    pages = docs_env["pages"]
    if block.page not in pages:
        folder = docs_env["root"] / block.page.stem
        folder.mkdir()
        _write_fixtures(folder, shapes=docs_env["shapes"] if block.page.name == "README.md"
                        else None)
        pages[block.page] = {"folder": folder, "done": set()}
    state = pages[block.page]
    setup_code = ""
    for earlier in blocks(block.page):
        if earlier.line >= block.line:
            break
        if earlier.kind != "setup":
            continue
        if earlier.lang == "python":
            setup_code += earlier.code + "\n"
        elif earlier.line not in state["done"]:
            _run(earlier, state["folder"], docs_env["env"])
            state["done"].add(earlier.line)
    return state["folder"], setup_code


@pytest.mark.parametrize("block", [pytest.param(b, id=b.name, marks=(
    [getattr(pytest.mark, b.kind)] if b.kind in ("slow", "heavy") else [])) for b in RUN])
def test_block_runs_as_written(block, docs_env):
    folder, setup_code = _page_folder(block, docs_env)
    if block.line in docs_env["pages"][block.page]["done"]:
        return  # a setup block a later block of the page ran already (and checked)
    if block.kind != "setup":
        # A copy of the page's folder of its own: one block's files (an export folder, a
        # run) do not collide with another's.
        own = folder.parent / f"{folder.name}-{block.line}"
        shutil.copytree(folder, own, symlinks=True)
        folder = own
    result = _run(block, folder, docs_env["env"], setup_code)
    if block.kind == "setup":
        docs_env["pages"][block.page]["done"].add(block.line)
    problems = _figure_problems(block, result.stdout + result.stderr)
    assert problems == [], f"{block.name}: {problems}\n{result.stdout[-3000:]}"


def _figure_problems(block, printed: str) -> list:
    """Where the block's stated figures and the last values it printed disagree."""
    problems = []
    for metric, op, value in block.figures:
        # Keras prints small values as 2.9146e-04: the exponent is part of the number.
        found = re.findall(rf"(?<![\w.]){metric}: ([0-9.]+(?:e[-+][0-9]+)?)", printed)
        if not found:
            problems.append(f"{metric}: never printed")
            continue
        last = float(found[-1].rstrip("."))
        if not (last >= value if op == ">=" else last <= value):
            problems.append(f"{metric}: {last:g} printed last, the page says it reaches "
                            f"{op} {value:g}")
    return problems
