"""TensorFlow-free reading of a user's data: the label rule (and, next, the one CSV reader)."""
