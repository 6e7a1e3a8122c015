"""Checks a recipe's keyword arguments against a Keras class's (or a callable's) signature."""

from __future__ import annotations

import inspect
from typing import Callable, Iterable

from tfaccel.errors import UserInputError, did_you_mean

_NAMED = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def accepted_arguments(target: Callable, *, skip: int = 0) -> tuple[list[str], bool]:
    """The keyword arguments `target` takes, and whether it takes any other (``**kwargs``).

    Args:
        target: A class or a function.
        skip: Leading positional parameters that are not the recipe's to give (a loss
            function's ``y_true, y_pred``).
    """
    parameters = list(inspect.signature(target).parameters.values())[skip:]
    names = [p.name for p in parameters if p.kind in _NAMED]
    return names, any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def check_arguments(target: Callable, params: dict, *, key: str, what: str,
                    given: Iterable[str] = (), skip: int = 0, strict: bool = False,
                    elsewhere: Iterable[str] = ()) -> None:
    """Checks `params` (and the arguments tfaccel adds, `given`) against `target`'s signature.

    Args:
        target: The class or function the arguments are for.
        params: The recipe's mapping of arguments (``optimizer.params`` ...).
        key: That mapping's recipe key, for messages (``optimizer.params``).
        what: The target as messages name it (``Keras optimizer 'nadam' (Nadam)``).
        given: Arguments tfaccel passes itself (so they are not reported missing).
        skip: Leading positional parameters not given by the recipe.
        strict: Check against the named parameters even when `target` has ``**kwargs``
            (Keras' classes pass theirs to a base class that takes only named ones).
        elsewhere: Arguments other recipe keys set: not offered in the message's list.

    Raises:
        UserInputError: An unknown argument (with a did-you-mean and the accepted ones), or
            a required one missing.
    """
    names, takes_any = accepted_arguments(target, skip=skip)
    offered = [name for name in names if name not in set(given) | set(elsewhere)]
    if strict or not takes_any:
        for name in params:
            if name not in names:
                raise UserInputError(
                    f"{key}.{name}: {what} has no argument {name!r}"
                    f"{did_you_mean(name, offered)}; it takes {', '.join(offered) or 'none'}.")
    parameters = list(inspect.signature(target).parameters.values())[skip:]
    missing = [p.name for p in parameters if p.kind in _NAMED and p.default is p.empty
               and p.name not in params and p.name not in given]
    if missing:
        raise UserInputError(f"{key}: {what} needs {', '.join(missing)} (got "
                             f"{', '.join(map(str, params)) or 'nothing'}).")


def call_checked(target: Callable, kwargs: dict, *, key: str, what: str):
    """``target(**kwargs)``, with the ValueError or TypeError a constructor raises on a value
    (Keras checks ranges and combinations there) turned into a message naming `key`."""
    try:
        return target(**kwargs)
    except (ValueError, TypeError) as error:
        raise UserInputError(f"{key}: {what} refused {kwargs!r}: {error}") from None
