"""THE folder tfaccel keeps what it measured or listed between runs in; stdlib only."""

import os

# One folder for every kind of saved result (the precision measurement, saved listings):
# this variable's folder, else $XDG_CACHE_HOME/tfaccel, else ~/.cache/tfaccel.
ENV = "TFACCEL_CACHE_DIR"


def cache_dir(*parts: str) -> str:
    """The folder (or a path inside it) where tfaccel keeps results between runs.

    Args:
        *parts: Path components below the folder (e.g. ``"listings"``).

    Returns:
        ``$TFACCEL_CACHE_DIR``, else ``$XDG_CACHE_HOME/tfaccel``, else
        ``~/.cache/tfaccel``, joined with `parts`. Nothing is created.
    """
    base = os.environ.get(ENV)
    if not base:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"),
                                                                ".cache")
        base = os.path.join(xdg, "tfaccel")
    return os.path.join(base, *parts)
