"""TensorFlow-free reading of a user's data: the label rule, the one CSV reader, the column plan of a table."""
