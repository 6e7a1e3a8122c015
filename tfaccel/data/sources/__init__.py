"""One module per source a pipeline reads, each a builder (`from_*`) and its recipe `Source`."""
