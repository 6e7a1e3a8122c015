"""Resumable checkpoints: written atomically, verified on load, the newest good one picked."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import shutil
from pathlib import Path
from typing import Callable, List, Optional, Tuple

from tfaccel import atomic
from tfaccel.errors import TrainingError, UserInputError

FORMAT_VERSION = 1
WEIGHTS_FILE = "model.weights.h5"  # Keras' own format: model weights and optimizer state
# runtime.strategy parameter_server: every variable read back from the servers (model then
# optimizer, in order); Keras' weights file cannot be written from the coordinator.
VARIABLES_FILE = "variables.npz"
EXTRA_FILE = "extra.npz"  # what Keras' weights file leaves out (RNG states, metric sums)
STATE_FILE = "state.json"  # position, finished epochs' metrics, callback state, checksums
_NAME = re.compile(r"^(epoch|step)-(\d+)$")
_TEMP_PREFIX = ".partial-"


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    """One complete checkpoint on disk and the training state it records."""

    path: Path
    state: dict

    @property
    def global_step(self) -> int:
        """Optimizer steps (batches) trained before this checkpoint."""
        return int(self.state["global_step"])

    @property
    def epoch(self) -> int:
        """The 0-based epoch in progress (== finished epochs when `step_in_epoch` is 0)."""
        return int(self.state["epoch"])

    @property
    def step_in_epoch(self) -> int:
        """Steps of `epoch` already trained."""
        return int(self.state["step_in_epoch"])


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_checkpoint(directory: Path, *, name: str, state: dict,
                     write_files: Callable[[Path], None]) -> Path:
    """Writes one checkpoint atomically: a temporary folder, fsync, then a rename.

    A crash at any moment leaves either the complete checkpoint or no checkpoint of that
    name (only a hidden ``.partial-*`` folder, ignored and cleaned up later).

    Args:
        directory: The run's checkpoints folder.
        name: ``epoch-NNN`` or ``step-NNNNNNN``.
        state: JSON-able training state; checksums of the files are added to it.
        write_files: ``fn(folder)`` writing `WEIGHTS_FILE` and `EXTRA_FILE` into `folder`
            (a parameter-server run: `VARIABLES_FILE`).

    Returns:
        The final checkpoint folder.

    Raises:
        TrainingError: The checkpoint could not be written (e.g. the disk is full); what
            was written of it is removed and earlier checkpoints are untouched.
    """
    final = directory / name

    def fill(folder: Path) -> None:
        write_files(folder)
        files = sorted(p.name for p in folder.iterdir())
        checked = {**state, "format": FORMAT_VERSION,
                   "files": {f: _sha256(folder / f) for f in files}}
        (folder / STATE_FILE).write_text(json.dumps(checked, indent=1, default=float),
                                         encoding="utf-8")

    try:
        # replace=True: the same position written again (e.g. after a resume).
        atomic.write_folder(final, write=fill, staging_prefix=f"{_TEMP_PREFIX}{name}-",
                            replace=True)
    except OSError as error:
        raise TrainingError(
            f"could not write checkpoint {final}: {error.strerror or error}. Training "
            f"stopped; the earlier checkpoints in {directory} are intact "
            f"(resume with `tfaccel train --resume {directory.parent}`).") from error
    return final


def _read(path: Path) -> Tuple[Optional[Checkpoint], str]:
    """Reads and verifies one checkpoint folder: (checkpoint, '') or (None, why not)."""
    state_path = path / STATE_FILE
    try:
        state = json.loads(state_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, f"it has no {STATE_FILE}"
    except (OSError, ValueError) as error:
        return None, f"its {STATE_FILE} is unreadable ({error})"
    if state.get("format") != FORMAT_VERSION:
        return None, f"its format {state.get('format')!r} is not {FORMAT_VERSION}"
    for file, digest in (state.get("files") or {}).items():
        target = path / file
        if not target.is_file():
            return None, f"{file} is missing"
        if _sha256(target) != digest:
            return None, f"{file} does not match its checksum (cut short or corrupted)"
    if not {WEIGHTS_FILE, VARIABLES_FILE} & set(state.get("files") or {}):
        return None, f"it has no {WEIGHTS_FILE} (nor a parameter-server {VARIABLES_FILE})"
    return Checkpoint(path=path, state=state), ""


def list_checkpoints(directory: Path) -> List[Path]:
    """Checkpoint folders in `directory`, newest position first (step count, then name)."""
    if not directory.is_dir():
        return []
    found = []
    for path in directory.iterdir():
        match = _NAME.match(path.name)
        if match and path.is_dir():
            found.append(path)

    def position(path: Path):
        try:
            state = json.loads((path / STATE_FILE).read_text(encoding="utf-8"))
            step = int(state.get("global_step", -1))
        except (OSError, ValueError, TypeError):
            step = -1
        # An unreadable checkpoint still sorts by its name's number, so that the message
        # about skipping it comes before the older good one is taken.
        return (step if step >= 0 else int(_NAME.match(path.name).group(2)),
                path.name.startswith("step"))

    return sorted(found, key=position, reverse=True)


def latest_checkpoint(directory: Path) -> Tuple[Optional[Checkpoint], List[str]]:
    """The newest checkpoint that verifies, and a message for each newer one skipped."""
    skipped = []
    for path in list_checkpoints(directory):
        checkpoint, why = _read(path)
        if checkpoint is not None:
            return checkpoint, skipped
        skipped.append(f"checkpoint {path.name} is skipped: {why}")
    return None, skipped


def prune_step_checkpoints(directory: Path, *, keep: int) -> List[str]:
    """Removes all but the newest `keep` step checkpoints (epoch ones are kept)."""
    steps = [p for p in list_checkpoints(directory) if p.name.startswith("step-")]
    removed = []
    for path in steps[keep:]:
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path.name)
    for path in directory.glob(f"{_TEMP_PREFIX}*"):
        # Left by a process killed while writing; never a complete checkpoint.
        shutil.rmtree(path, ignore_errors=True)
    return removed


def checkpoint_name(*, kind: str, epoch: int, global_step: int) -> str:
    """``epoch-003`` for the end of epoch 3 (1-based), ``step-0000600`` otherwise."""
    if kind == "epoch":
        return f"epoch-{epoch:03d}"
    if kind == "step":
        return f"step-{global_step:07d}"
    raise UserInputError(f"kind must be 'epoch' or 'step', got {kind!r}.")
