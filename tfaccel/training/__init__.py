"""Training a recipe: the run, its checkpoints, resume state, callbacks and run directory."""
