"""The code's shape is checked like its behaviour: imports point down the layers, lint clean."""

import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _run(*command):
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_imports_point_down_the_layers():
    # setup.cfg [importlinter]: cli -> tools -> training -> data|engine -> config ->
    # models|datasets -> errors|messages. An upward import (e.g. data importing training) fails here.
    lint = shutil.which("lint-imports")
    if lint is None:
        pytest.fail("lint-imports is not installed: pip install -e '.[test]'")
    result = _run(lint, "--config", "setup.cfg", "--no-cache")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 kept, 0 broken" in result.stdout


def test_the_layer_contract_catches_an_upward_import(tmp_path):
    # The contract is not vacuous: a copy of the package with one upward import breaks it.
    shutil.copytree(ROOT / "tfaccel", tmp_path / "tfaccel")
    with open(tmp_path / "tfaccel" / "errors.py", "a", encoding="utf-8") as handle:
        handle.write("\nfrom tfaccel.training import run_dir  # noqa: E402,F401\n")
    shutil.copy(ROOT / "setup.cfg", tmp_path / "setup.cfg")
    result = subprocess.run([shutil.which("lint-imports"), "--config", "setup.cfg",
                             "--no-cache"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300,
                            env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert result.returncode != 0
    assert "tfaccel.errors is not allowed to import tfaccel.training" in result.stdout


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
