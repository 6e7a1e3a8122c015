"""THE call of a user's own model builder: its signature checked against model.params, then
what it returns checked against the data."""

import inspect

from tfaccel.errors import UserInputError, did_you_mean
from tfaccel.models.model_checks import check_model_fits

# What a builder is always called with; `model.params` adds the rest.
_BUILDER_ARGUMENTS = ("input_shape", "num_classes")
# What a builder is also told when its signature names them: the task of the labels and
# the width of the output its last layer must have.
_TASK_ARGUMENTS = ("task", "num_outputs")


def builder_arguments(builder):
    """The names a model builder is called with beyond model.params: ``input_shape`` and
    ``num_classes`` always, ``task`` and ``num_outputs`` when its signature names them."""
    try:
        named = inspect.signature(builder).parameters
    except (TypeError, ValueError):
        return _BUILDER_ARGUMENTS
    return _BUILDER_ARGUMENTS + tuple(a for a in _TASK_ARGUMENTS if a in named)


def check_builder_params(builder, params, *, where):
    """Checks `params` against a model builder's signature, before it is called.

    Args:
      builder: The callable (``model.name: module:callable``, or `tfaccel.train(model=...)`).
      params: ``model.params``.
      where: How messages name the builder, e.g. ``"model.name 'convnet.py:build'"``.

    Raises:
      UserInputError: The builder takes no ``input_shape=``/``num_classes=``, a parameter it
        does not take (with a did-you-mean), one the data sets, or a required one missing.
    """
    try:
        signature = inspect.signature(builder)
    except (TypeError, ValueError):
        return  # a callable without a signature (a C function): its call says what is wrong
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    named = {n: p for n, p in signature.parameters.items() if p.kind in kinds}
    open_keywords = any(p.kind is inspect.Parameter.VAR_KEYWORD
                        for p in signature.parameters.values())
    from_data = _BUILDER_ARGUMENTS + _TASK_ARGUMENTS
    taken = sorted(set(params) & set(from_data))
    if taken:
        raise UserInputError(f"{where}: model.params {taken[0]!r} is set from the data; "
                             "leave it out of model.params.")
    missing = [a for a in _BUILDER_ARGUMENTS if a not in named and not open_keywords]
    if missing:
        raise UserInputError(f"{where}: the builder {builder.__name__}{signature} must take "
                             f"{missing[0]}= (it is called with input_shape=, num_classes= "
                             "and model.params, and with task= and num_outputs= when it "
                             "names them).")
    own = sorted(set(named) - set(from_data))
    unknown = [] if open_keywords else sorted(set(params) - set(named))
    if unknown:
        key = unknown[0]
        raise UserInputError(f"Unknown parameter {key!r}{did_you_mean(key, own)} for {where}. "
                             f"Known parameters: {', '.join(own) or '(none)'}.")
    required = [n for n in own if named[n].default is inspect.Parameter.empty
                and n not in params]
    if required:
        raise UserInputError(f"{where}: the builder needs parameter {required[0]!r}, which "
                             "has no default: set it in model.params.")


def build_own_model(builder, *, where, input_shape, num_classes, params,
                   task="classification", num_outputs=None):
    """Calls a user's model builder and checks what it returns fits the data.

    The builder is called with ``input_shape=``, ``num_classes=`` and ``model.params``,
    and with ``task=`` and ``num_outputs=`` when its signature names them (a builder
    written before tasks keeps working). ``num_classes`` is the number of classes
    (classification; 2 for binary), of labels (multi_label) or of targets (regression);
    ``num_outputs`` is the width the model's last layer must have: the classes, 1 for
    binary (one sigmoid), the labels, the targets.

    Args:
      builder: A callable ``builder(*, input_shape, num_classes, [task, num_outputs,]
        **params)``.
      where: How messages name it (the recipe key and value, or the builder's name).
      input_shape: One example's shape, as the data reports it.
      num_classes: The data's classes (labels, targets: see above).
      params: ``model.params``, passed as keyword arguments.
      task: classification, binary, multi_label or regression.
      num_outputs: The output width (None: num_classes).

    Returns:
      The `keras.Model` the builder returned.

    Raises:
      UserInputError: A parameter the builder does not take, a builder that raised (its
        exception's type and message), or a result that is no keras.Model or does not fit
        the data's inputs and labels.
    """
    check_builder_params(builder, params, where=where)
    shape = tuple(input_shape)
    width = num_classes if num_outputs is None else num_outputs
    told = {"input_shape": shape, "num_classes": num_classes, "task": task,
            "num_outputs": width}
    told = {name: told[name] for name in builder_arguments(builder)}
    try:
        model = builder(**told, **params)
    except Exception as error:  # the user's code may raise anything
        raise UserInputError(
            f"{where} raised {type(error).__name__}: {error} (called with "
            + ", ".join(f"{k}={v!r}" for k, v in {**told, **params}.items()) + ").") from None
    check_model_fits(model, where=where, input_shape=shape, num_classes=num_classes,
                     task=task, num_outputs=width)
    return model
