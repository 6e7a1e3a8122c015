"""The fenced code blocks of README.md and docs/*.md, each with its docs-test marker."""

import dataclasses
import re
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# The languages a block is run in; any other block needs a skip marker with its reason.
RUNNABLE = ("python", "bash", "yaml")
KINDS = ("skip", "slow", "heavy", "setup", "manifest")
# `<!-- docs-test: skip (reason) -->` on the line before a block (blank lines between
# allowed): skip needs a reason, slow may give one, heavy names the cheaper tests that
# cover what the block runs (it is marked `heavy`: left out of CI's `-m "not heavy"`, run
# with `-m heavy`), setup runs before the page's later blocks (a python setup block also
# gives them its names), manifest marks a platform's manifest (a Kubeflow TFJob), parsed
# and checked by the docs test instead of run.
MARKER = re.compile(r"^\s*<!-- docs-test: (\w+)(?: \((.+)\))? -->\s*$")
# The figure a training example reaches, stated in one of its comments for the reader and
# checked by the docs test against the last value of that metric the block printed (Keras'
# `name: value`): `# ... reaches val_accuracy >= 0.8 ...` (>= for a score, <= for a loss).
FIGURE = re.compile(r"#.*\breaches (\w+) (>=|<=) ([0-9.]+)")
# What makes a block an example that trains (it must state a figure).
TRAINS = re.compile(r"\.fit\(|\btfaccel train\b|\btfaccel\.train\(")
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")


@dataclasses.dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language, its code and its marker."""

    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    kind: Optional[str]  # the marker's kind, None without a marker
    reason: Optional[str]

    @property
    def figures(self) -> list:
        """The block's stated figures: [(metric, ">=" or "<=", value)]."""
        return [(m.group(1), m.group(2), float(m.group(3)))
                for m in map(FIGURE.search, self.code.splitlines()) if m]

    @property
    def trains(self) -> bool:
        """Whether the block trains a model (`fit`, `tfaccel train`, `tfaccel.train`)."""
        return bool(TRAINS.search(self.code))

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT).as_posix()}:{self.line}"


def blocks(page: Path) -> list:
    """The page's fenced blocks in order (the code dedented by the fence's indentation)."""
    lines = page.read_text().split("\n")
    found, i = [], 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        indent, lang = fence.groups()
        end = next(j for j in range(i + 1, len(lines))
                   if lines[j].strip() == "```")
        code = "\n".join(line[len(indent):] if line.startswith(indent) else line.lstrip()
                         for line in lines[i + 1:end])
        before = i - 1
        while before >= 0 and not lines[before].strip():
            before -= 1
        marker = MARKER.match(lines[before]) if before >= 0 else None
        found.append(Block(page, i + 1, lang, code + "\n",
                           marker.group(1) if marker else None,
                           marker.group(2) if marker else None))
        i = end + 1
    return found


def all_blocks() -> list:
    return [block for page in PAGES for block in blocks(page)]


def stray_markers(page: Path) -> list:
    """Lines starting a docs-test marker that is malformed or that no block follows (1-based)."""
    lines = page.read_text().split("\n")
    stray = []
    for i, line in enumerate(lines):
        if not line.lstrip().startswith("<!-- docs-test"):
            continue  # prose may name a marker in backticks
        after = i + 1
        while after < len(lines) and not lines[after].strip():
            after += 1
        if not MARKER.match(line) or after == len(lines) or not FENCE.match(lines[after]):
            stray.append(i + 1)
    return stray


def prose_lines(page: Path):
    """(line number, text) of the page's lines outside fenced blocks."""
    inside = False
    for number, line in enumerate(page.read_text().split("\n"), start=1):
        if line.strip().startswith("```"):
            inside = not inside
            continue
        if not inside:
            yield number, line
