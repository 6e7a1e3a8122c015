"""Every worker of a multi-worker run learns the run directory the chief writes (one collective).

Only the chief writes the run directory; the others train into a scratch folder and, before
this, knew the run directory only from their own ``--run-dir`` (a worker started by hand,
by Kubeflow or by Vertex AI may have none, or another one). The chief's path, as UTF-8
codes in a fixed-size vector, is summed over the workers with the chief's first replica
alone contributing, so every worker's closing line and resume hint name the directory the
chief actually wrote.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np
import tensorflow as tf

from tfaccel.config.cluster import WorkerRole

# Longer paths than Linux's PATH_MAX are not sent (the worker then names none).
MAX_PATH_BYTES = 4096


def chief_run_dir(strategy, *, role: WorkerRole, own: Optional[Path]) -> Optional[Path]:
    """The run directory the chief writes, as every worker of `strategy` learns it.

    Args:
        strategy: The run's strategy (a MultiWorkerMirroredStrategy when `role` is
            multi-worker; otherwise `own` is returned at once, no collective).
        role: This process's `WorkerRole`.
        own: The run directory as this process knows it: the chief's real one on the chief,
            a worker's ``--run-dir`` (or None) elsewhere.

    Returns:
        The chief's run directory (absolute), or `own` alone or on a chief.
    """
    if not role.multi_worker:
        return own
    codes = np.zeros(MAX_PATH_BYTES, dtype=np.int32)
    if role.chief and own is not None:
        data = str(Path(own).resolve()).encode("utf-8")
        if len(data) <= MAX_PATH_BYTES:
            codes[:len(data)] = np.frombuffer(data, dtype=np.uint8)
    summed = _sum_from_chief(strategy, tf.constant(codes))
    if role.chief:  # its own line keeps the path as it was given
        return own
    data = bytes(int(c) for c in summed if c > 0)
    if not data:  # the chief's path did not fit: the worker names none
        return None
    return Path(data.decode("utf-8", errors="replace"))


def _sum_from_chief(strategy, codes: tf.Tensor) -> np.ndarray:
    """`codes` of global replica 0 (the chief's first device), on every worker."""

    @tf.function
    def share():
        def replica():
            context = tf.distribute.get_replica_context()
            mine = tf.where(tf.equal(context.replica_id_in_sync_group, 0), codes,
                            tf.zeros_like(codes))
            return context.all_reduce(tf.distribute.ReduceOp.SUM, mine)

        return strategy.run(replica)

    return strategy.experimental_local_results(share())[0].numpy()
