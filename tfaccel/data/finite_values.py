"""THE finite-values rule: NaN and infinite numeric features are refused, named the same way by every source."""

from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from tfaccel.errors import DataError

# Why every source refuses NaN and infinite features (the one wording of that rule).
NON_FINITE_REFUSED = (
    "NaN and infinite features are refused: TensorFlow 2.21's fused MatMul+BiasAdd+Relu "
    "turns a NaN input into 0 on some CPUs (seen on an AMD EPYC with avx512_bf16), so the "
    "model would train on zeros with a finite loss and nothing would say so")
_FIX = "Fill or drop them first (e.g. numpy.nan_to_num, or a mask feature and a fill value)."


def first_non_finite(array) -> Optional[Tuple[tuple, float, int]]:
    """``(index, value, count)`` of a floating-point array's first NaN or infinite value.

    None when the array is not floating-point or every value is finite.
    """
    array = np.asarray(array)
    if not np.issubdtype(array.dtype, np.floating):
        return None
    bad = ~np.isfinite(array)
    if not bad.any():
        return None
    index = tuple(int(i) for i in np.argwhere(bad)[0])
    return index, float(array[index]), int(bad.sum())


def is_non_finite_number(text: str) -> bool:
    """Whether `text` reads as a float that is NaN or infinite ("nan", "-inf", "1e999").

    Python's float() reads what CsvDataset and numpy read ("nan", "inf", "infinity", any
    case, surrounding spaces); a float32 overflow such as "1e40" is checked by the caller.
    """
    try:
        return not np.isfinite(float(text))
    except (ValueError, OverflowError):
        return False


def refusal(where: str, value, *, count: Optional[int] = None, fix: str = _FIX) -> DataError:
    """THE message of a non-finite value: where it is, the value, how many, why, and a fix.

    Args:
        where: The value's place, most specific last: ``"x holds ... at example 3"`` reads
            from ``where="x"`` and `at`; a file's ``"CSV file 'a.csv', line 5, column 'x'"``.
        value: The value found (a float, or the text read).
        count: Values that are not finite in all (None: not counted).
        fix: What to do about it.
    """
    counted = "" if count is None else f"; {count} value(s) are not finite"
    return DataError(f"{where} holds {value}{counted}. {NON_FINITE_REFUSED}. {fix}")


def check_array(array, *, name: str, unit: str = "example") -> None:
    """Refuses NaN and infinite values in a floating-point array (or a dict of them).

    Args:
        array: An array, or a dict of arrays (each named ``name[key]``).
        name: What the array is, in the message ("x", "data", "Time series CSV ...").
        unit: What its first axis counts ("example", "timestep").

    Raises:
        DataError: The first NaN or infinite value, with its index along the first axis
            (and its position within, for more axes) and the count of such values.
    """
    if isinstance(array, dict):
        for key, value in array.items():
            check_array(value, name=f"{name}[{key!r}]", unit=unit)
        return
    found = first_non_finite(array)
    if found is None:
        return
    index, value, count = found
    position = f" (position {index[1:]})" if len(index) > 1 else ""
    raise refusal(f"{name}", f"{value} at {unit} {index[0]}{position}", count=count)
