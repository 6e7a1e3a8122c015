"""Numbers the registry's defaults, its checks and the image builders share; no TensorFlow."""

# keras.applications refuse inputs smaller than this (imagenet_utils.obtain_input_shape).
APPLICATION_MIN_SIZE = 32
# BatchNorm moving-average momentum of our own builders (Keras' default is 0.99). Validation
# uses the moving statistics; after the ~100 steps of a short run, 0.99 leaves them 37% at
# their initial values and resnet_small's validation accuracy at 0.27 while its batch-stat
# accuracy was 0.52 (and 0.85 vs 0.99 once it learned). 0.9 forgets the start in ~40 steps.
BN_MOMENTUM = 0.9
# Hidden stacks a table run's mlp averages (model.params.members) unless its recipe says,
# by task: an ensemble inside one model for the classification tasks, one stack for
# regression. Chosen by 5-fold cross-validation on the training files of the small real
# tables (benchmarks/real_data/table_defaults_cv.py; docs/performance.md): 5 stacks ranked
# breast_cancer's held-out rows better than 1 (AUC, log loss) and predicted diabetes'
# worse (MAE, RMSE; 10 stacks no better than 5 on either).
TABLE_MEMBERS = {"classification": 5, "binary": 5, "multi_label": 5, "regression": 1}
