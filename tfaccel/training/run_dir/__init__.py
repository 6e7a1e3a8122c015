"""The run directory and what outlives a run: its files, checkpoints, the state they hold, resuming, and the data and model it recorded."""
