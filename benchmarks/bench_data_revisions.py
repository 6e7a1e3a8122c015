"""Two checkouts of tfaccel side by side on every file source: build and epoch time ratios.

"Nothing gets slower" across a refactor is a claim about two revisions of the same code,
which cannot live in one process. This script generates one data set per source, then runs
the same probe (build the source with its public call, read 3 epochs, keep the best) under
each checkout in turn, alternated round by round, and prints after/before ratios: the
median over rounds of each round's pair.

    git worktree add /tmp/before <old commit>
    python benchmarks/bench_data_revisions.py --before /tmp/before [--after .] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import wave
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import describe_cpu  # benchmarks/ is not a package

SOURCES = ("image_folder", "text_folder", "audio_folder", "csv", "text_lines", "tfrecords",
           "timeseries_csv")

# The probe: run under each checkout (PYTHONPATH), with the data folder and the source name.
PROBE = r'''
import json, os, sys, time
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tfaccel.data as tfd
root, which = sys.argv[1], sys.argv[2]
calls = {
    "image_folder": lambda: tfd.from_image_folder(f"{root}/images", batch_size=64,
                                                  image_size=(32, 32), seed=0),
    "text_folder": lambda: tfd.from_text_folder(f"{root}/texts", batch_size=64, seed=0),
    "audio_folder": lambda: tfd.from_audio_folder(f"{root}/audio", batch_size=32, seed=0,
                                                  output_sequence_length=4000),
    "csv": lambda: tfd.from_csv(f"{root}/csv/*.csv", batch_size=256, label_name="label",
                                seed=0),
    "text_lines": lambda: tfd.from_text_lines(f"{root}/lines/*.tsv", labels="first_field",
                                              batch_size=256, seed=0),
    "tfrecords": lambda: tfd.from_tfrecords(
        f"{root}/records/*.tfrecord", batch_size=256, seed=0, shuffle_buffer=1000,
        features={"x": {"dtype": "float32", "shape": [8]}, "label": {"dtype": "int64"}}),
    "timeseries_csv": lambda: tfd.from_timeseries_csv(
        f"{root}/series.csv", sequence_length=32, targets="y", batch_size=128, seed=0,
        shuffle=True),
}
started = time.perf_counter()
dataset = calls[which]()
if isinstance(dataset, tuple):
    dataset = dataset[0]
build = time.perf_counter() - started
epochs = []
for _ in range(3):
    started = time.perf_counter()
    for _ in dataset:
        pass
    epochs.append(time.perf_counter() - started)
print(json.dumps({"build": build, "epoch": min(epochs)}))
'''


def _write_wav(path: Path, samples: np.ndarray, rate: int = 8000) -> None:
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes((samples * 32000).astype("<i2").tobytes())


def make_data(root: Path, *, scale: int) -> None:
    """One small data set per source under `root` (`scale` multiplies the counts)."""
    import tensorflow as tf

    rng = np.random.default_rng(0)
    for c in range(4):
        for kind in ("images", "texts", "audio"):
            (root / kind / f"class{c}").mkdir(parents=True, exist_ok=True)
        for i in range(250 * scale):
            pixels = rng.integers(0, 255, (32, 32, 3), dtype=np.uint8)
            (root / "images" / f"class{c}" / f"{i}.png").write_bytes(
                tf.io.encode_png(pixels).numpy())
            words = " ".join(f"w{w}" for w in rng.integers(0, 500, 30))
            (root / "texts" / f"class{c}" / f"{i}.txt").write_text(words)
        for i in range(40 * scale):
            _write_wav(root / "audio" / f"class{c}" / f"{i}.wav",
                       rng.uniform(-1, 1, int(rng.integers(2000, 6000))))
    for kind in ("csv", "lines", "records"):
        (root / kind).mkdir(parents=True, exist_ok=True)
    for f in range(8):
        x = rng.normal(size=(2500 * scale, 8)).astype(np.float32)
        y = rng.integers(0, 4, len(x))
        rows = "\n".join(",".join(f"{v:.5f}" for v in row) + f",{label}"
                         for row, label in zip(x, y))
        header = ",".join(f"x{j}" for j in range(8)) + ",label\n"
        (root / "csv" / f"p{f}.csv").write_text(header + rows + "\n")
        (root / "lines" / f"p{f}.tsv").write_text(
            "\n".join(f"c{label}\t" + " ".join(f"w{w}" for w in rng.integers(0, 500, 20))
                      for label in y) + "\n")
        with tf.io.TFRecordWriter(str(root / "records" / f"p{f}.tfrecord")) as writer:
            for row, label in zip(x, y):
                example = tf.train.Example(features=tf.train.Features(feature={
                    "x": tf.train.Feature(float_list=tf.train.FloatList(value=row)),
                    "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label]))}))
                writer.write(example.SerializeToString())
    series = rng.normal(size=(20000 * scale, 4))
    (root / "series.csv").write_text(
        "a,b,c,y\n" + "\n".join(",".join(f"{v:.5f}" for v in row) for row in series) + "\n")


def probe(checkout: Path, root: Path, which: str) -> dict:
    """The probe's figures for `which` under `checkout`."""
    env = dict(os.environ, PYTHONPATH=str(checkout), TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([sys.executable, "-c", PROBE, str(root), which], env=env,
                          capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"the probe of {which} under {checkout} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="the old checkout")
    parser.add_argument("--after", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scale", type=int, default=1, help="multiplies the data's size")
    parser.add_argument("--sources", nargs="+", default=list(SOURCES), choices=SOURCES)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tfaccel-revisions-") as folder:
        root = Path(folder)
        make_data(root, scale=args.scale)
        ratios = {which: {"build": [], "epoch": []} for which in args.sources}
        for round_ in range(args.rounds):
            for which in args.sources:
                # Alternate which side goes first, so a warming disk cache favours neither.
                order = ("before", "after") if round_ % 2 == 0 else ("after", "before")
                got = {side: probe(getattr(args, side), root, which) for side in order}
                for key in ("build", "epoch"):
                    ratios[which][key].append(got["after"][key] / got["before"][key])
    print(f"CPU: {describe_cpu()}; {args.rounds} alternated rounds, medians of after/before "
          f"(below 1.0: the after checkout is faster)")
    print(f"before: {args.before}\nafter:  {args.after}\n")
    print(f"{'source':<16}{'build':>10}{'epoch':>10}{'epoch spread':>18}")
    for which in args.sources:
        build = statistics.median(ratios[which]["build"])
        epoch = statistics.median(ratios[which]["epoch"])
        spread = f"{min(ratios[which]['epoch']):.2f}-{max(ratios[which]['epoch']):.2f}"
        print(f"{which:<16}{build:>10.2f}{epoch:>10.2f}{spread:>18}")


if __name__ == "__main__":
    main()
