"""The Keras objects a recipe names (optimizer, schedule, loss, metrics), found, checked against their signatures and built."""
