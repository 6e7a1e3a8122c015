"""`import tfaccel` in a user's script: TensorFlow's start-up lines hidden as under the CLI."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

# Its subprocesses check start-up itself (TensorFlow's import lines, what a call imports):
# real interpreters, not forks of the warm one (tests/warm_python.py).
pytestmark = pytest.mark.cold_python

REPO = Path(__file__).resolve().parents[1]
# A user's script: tfaccel first, then TensorFlow through it (a dataset and one op).
SCRIPT = ("import tfaccel\n"
          "import tfaccel.data as tfd\n"
          "import numpy as np\n"
          "import tensorflow as tf\n"
          "batches = tfd.from_arrays(np.zeros((4, 2), 'float32'), np.zeros(4, 'int64'),\n"
          "                          batch_size=2)\n"
          "print(len(list(batches)), int(tf.reduce_sum(tf.ones([3]))))\n")
NOISE = re.compile(r"absl::InitializeLog|cudart|cuInit|cpu_feature_guard|oneDNN|"
                   r"^[IWE]\d{4} \d\d:\d\d:", re.M)


def _run(code: str, **env_changes) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k not in ("TF_CPP_MIN_LOG_LEVEL", "TFACCEL_VERBOSE")}  # a user's shell
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [
        p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env["CUDA_VISIBLE_DEVICES"] = ""
    env.update(env_changes)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=180, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def test_a_script_that_imports_tfaccel_prints_no_tensorflow_start_up_lines():
    result = _run(SCRIPT)
    assert result.stdout == "2 3\n"
    assert NOISE.findall(result.stderr) == [], result.stderr[-3000:]


def test_the_user_s_tf_cpp_min_log_level_wins():
    # What TensorFlow prints on its own on this machine (a GPU machine prints other lines,
    # or none) comes back when the user asks for it, as under the CLI.
    plain = _run("import tensorflow as tf; tf.ones([1])").stderr
    shown = _run(SCRIPT, TF_CPP_MIN_LOG_LEVEL="0").stderr
    for line in ("absl::InitializeLog", "cudart_stub", "cuInit"):
        assert (line in shown) == (line in plain), (line, shown[-2000:])
    assert _run("import os, tfaccel; print(os.environ['TF_CPP_MIN_LOG_LEVEL'])",
                TF_CPP_MIN_LOG_LEVEL="1").stdout == "1\n"


def test_verbose_after_the_import_takes_back_what_the_import_set():
    # The CLI reads --verbose after `import tfaccel` applied the quiet rule.
    code = ("import os, sys, tfaccel\n"
            "from tfaccel.quiet_import import _QuietTensorFlowFinder, quiet_tensorflow\n"
            "before = os.environ.get('TF_CPP_MIN_LOG_LEVEL')\n"
            "quiet_tensorflow(verbose_flag=True)\n"
            "print(before, os.environ.get('TF_CPP_MIN_LOG_LEVEL'),\n"
            "      any(isinstance(f, _QuietTensorFlowFinder) for f in sys.meta_path))\n")
    assert _run(code).stdout == "3 None False\n"
    assert _run(code, TF_CPP_MIN_LOG_LEVEL="2").stdout == "2 2 False\n"
