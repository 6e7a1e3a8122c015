"""Training a recipe: the run (run/), the callbacks fit gets, the model set up, the run directory,
the recipe's Keras objects and the helpers of a run among several processes."""
