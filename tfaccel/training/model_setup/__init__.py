"""What `fit` is handed: the model built and compiled, the training input, steps per call."""
