"""Labelled text-lines files and one short text run on them, for the text export tests."""

import numpy as np

import tfaccel

WORDS = {"neg": "bad awful poor dull", "pos": "good great fine nice"}


def texts(n, seed):
    """`n` ``(label, text)`` rows, the labels alternating; a class's words give it away."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        label = ("neg", "pos")[i % 2]
        words = WORDS[label].split() + ["the", "a", "day"]
        rows.append((label, " ".join(rng.choice(words, rng.integers(2, 14)))))
    return rows


def train_text_run(root, *, max_length, tokenizer="text_vectorization"):
    """One short run (text_lines: 4 files of 40 lines, one held out; text_cnn, 2 epochs).

    Returns:
        The run directory, ``root/run``.
    """
    for f in range(4):
        (root / f"part-{f}.tsv").write_text(
            "".join(f"{label}\t{text}\n" for label, text in texts(40, seed=f)))
    run_dir = root / "run"
    tfaccel.train({
        "name": "text-export", "seed": 0,
        "data": {"source": "text_lines", "path": str(root / "part-*.tsv"),
                 "validation_fraction": 0.25, "shuffle_buffer": 200,
                 "text": {"max_length": max_length, "tokenizer": tokenizer}},
        "model": {"name": "text_cnn", "params": {"embed_dim": 8, "filters": [16]}},
        "optimizer": {"learning_rate": 0.01},
        "training": {"epochs": 2, "global_batch_size": 16},
        "runtime": {"precision": "float32", "verbose": 0, "tensorboard": False}},
        run_dir=str(run_dir))
    return run_dir


def ids_as_trained(run_dir, batch, *, max_length, tokenizer="text_vectorization"):
    """Token ids of the strings `batch` as the run's pipeline made them: its tokenizer
    rebuilt from vocabulary.txt, then its cut."""
    import tensorflow as tf

    from tfaccel.data import text_vectors

    layer = text_vectors.load_vectorizer(run_dir, tokenizer=tokenizer)
    return text_vectors.vectorize(tf.data.Dataset.from_tensors(batch), layer,
                                  max_length=max_length).get_single_element().numpy()
