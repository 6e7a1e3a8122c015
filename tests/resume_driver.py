"""Runs resume scenarios in a fresh process (op determinism is process-wide) and prints JSON.

Usage: python resume_driver.py '{"workdir": ..., "overrides": [...], "stop_at": N}'

1. trains the recipe uninterrupted into workdir/full, unless "reference" names the run
   directory of that same uninterrupted run made before (read only: its model.keras and
   metrics.jsonl are compared);
2. trains it again into workdir/cut, sending SIGTERM to itself after `stop_at` optimizer
   steps (the runner checkpoints at the next step boundary and raises Preempted);
3. resumes workdir/cut and prints how far the two runs' final weights and per-epoch
   metrics are apart.
"""

import json
import os
import signal
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main():
    args = json.loads(sys.argv[1])
    import keras
    import numpy as np

    from tfaccel.errors import Preempted
    from tfaccel.training.run.runner import train

    class SignalAt(keras.callbacks.Callback):
        def __init__(self, step):
            super().__init__()
            self.step, self.seen = step, 0

        def on_train_batch_end(self, batch, logs=None):
            self.seen += 1
            if self.seen == self.step:
                os.kill(os.getpid(), signal.SIGTERM)

    recipe, overrides = args["recipe"], args["overrides"]
    if args.get("reference"):
        full_dir = args["reference"]
        with open(os.path.join(full_dir, "metrics.jsonl")) as stream:
            full_epochs = [json.loads(line) for line in stream]
    else:
        full = train(recipe, overrides, run_dir=os.path.join(args["workdir"], "full"))
        full_dir, full_epochs = full.run_dir, full.epochs
    cut_dir = os.path.join(args["workdir"], "cut")
    report = {}
    try:
        train(recipe, overrides, run_dir=cut_dir, callbacks=[SignalAt(args["stop_at"])])
        report["preempted"] = False
    except Preempted as error:
        report["preempted"] = True
        report["signum"] = error.signum
        report["checkpoint"] = os.path.basename(error.checkpoint)
        report["run_dir"] = error.run_dir
    with open(os.path.join(cut_dir, "summary.json")) as stream:
        report["status_after_stop"] = json.load(stream)["status"]
    resumed = train(resume=cut_dir)
    a = keras.saving.load_model(os.path.join(full_dir, "model.keras"), compile=False)
    b = keras.saving.load_model(os.path.join(resumed.run_dir, "model.keras"), compile=False)
    report["weights_max_diff"] = max(float(np.max(np.abs(x - y)))
                                     for x, y in zip(a.get_weights(), b.get_weights()))
    report["epochs_full"] = full_epochs
    report["epochs_resumed"] = resumed.epochs
    with open(os.path.join(cut_dir, "metrics.jsonl")) as stream:
        report["metrics_lines"] = [json.loads(line) for line in stream]
    print("RESULT " + json.dumps(report, default=float))


if __name__ == "__main__":
    main()
