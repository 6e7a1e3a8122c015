"""The code's shape is checked like its behaviour: imports point down the layers, lint clean."""

import ast
import os
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _run(*command):
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)


def _lint_imports(cwd, **env):
    # import-linter's own entry point, run by this interpreter (its console script may not
    # be on PATH, e.g. under pyenv before a rehash).
    code = ("import sys\nfrom importlinter.cli import lint_imports\n"
            "sys.exit(lint_imports(config_filename='setup.cfg', no_cache=True))\n")
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True,
                          text=True, timeout=300, env={**os.environ, **env})


def test_imports_point_down_the_layers():
    # setup.cfg [importlinter]: cli -> tools -> training -> data|engine -> config ->
    # models|datasets -> errors. An upward import (e.g. data importing training) fails here,
    # and so does cli.launch importing cli.main (the launcher takes typed arguments).
    result = _lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 kept, 0 broken" in result.stdout


def test_the_layer_contract_catches_an_upward_import(tmp_path):
    # The contract is not vacuous: a copy of the package with one upward import breaks it.
    shutil.copytree(ROOT / "tfaccel", tmp_path / "tfaccel")
    with open(tmp_path / "tfaccel" / "errors.py", "a", encoding="utf-8") as handle:
        handle.write("\nfrom tfaccel.training import run_dir  # noqa: E402,F401\n")
    shutil.copy(ROOT / "setup.cfg", tmp_path / "setup.cfg")
    result = _lint_imports(tmp_path, PYTHONPATH=str(tmp_path))
    assert result.returncode != 0
    assert "tfaccel.errors is not allowed to import tfaccel.training" in result.stdout


# What a source module may import from tfaccel.data.sources: the shared stages of the
# families (base: the Source interface; class_folder: the class-folder family; _workers:
# the Python source's processes; array_files: an .npz file's split names). The file-glob
# stage (files_stage), the in-memory stage and text reading live in tfaccel.data itself.
SHARED_IN_SOURCES = {"base", "class_folder", "_workers", "array_files"}


def _sibling_imports(text: str) -> list:
    """The modules of tfaccel.data.sources that `text` (a module's source) imports, nested
    imports included, but the shared ones."""
    found = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "tfaccel.data.sources":
                found.update(alias.name for alias in node.names)
            elif node.module.startswith("tfaccel.data.sources."):
                found.add(node.module.split(".")[3])
        elif isinstance(node, ast.Import):
            found.update(alias.name.split(".")[3] for alias in node.names
                         if alias.name.startswith("tfaccel.data.sources."))
    return sorted(found - SHARED_IN_SOURCES)


def test_no_source_imports_another_source():
    # Issue #28: sources over shared stages; a sibling import (csv -> tfrecords' listing,
    # text lines -> text folder's decoding) is a step that belongs in a stage.
    found = {path.name: _sibling_imports(path.read_text(encoding="utf-8"))
             for path in sorted((ROOT / "tfaccel" / "data" / "sources").glob("*.py"))}
    assert {name: mods for name, mods in found.items() if mods} == {}
    # Not vacuous: each form of a sibling import is caught, the shared ones are not.
    assert _sibling_imports("from tfaccel.data.sources import base, tfrecords\n"
                            "from tfaccel.data.sources.text_folder import as_utf8\n"
                            "def f():\n    import tfaccel.data.sources.arrays\n"
                            "from tfaccel.data.sources.class_folder import Listing\n") \
        == ["arrays", "text_folder", "tfrecords"]


def test_ruff_finds_nothing():
    result = _run(sys.executable, "-m", "ruff", "check", "tfaccel", "tests", "benchmarks")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_docs_site_builds_strictly(tmp_path):
    # mkdocs.yml is strict: a broken link or anchor, a page left out of the nav, or an API
    # name in docs/api.md that no longer exists fails the build.
    result = _run(sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                  str(tmp_path / "site"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "site" / "api" / "index.html").exists()
