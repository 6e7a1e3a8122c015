"""Recipes: frozen dataclasses, loading, validation, input paths and the batch plan (no TensorFlow)."""
