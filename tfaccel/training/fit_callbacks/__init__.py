"""The callbacks a run gives `fit` (metrics, NaN guard, checkpoints, preemption, best epoch, throughput) and its phase timings."""
