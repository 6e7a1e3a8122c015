"""The code's shape is checked like its behaviour: imports point down the layers, lint clean."""

import ast
import os
import pathlib
import re
import shutil
import subprocess
import sys

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _run(*command, **env):
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, **env})


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
    assert "3 kept, 0 broken" in result.stdout


def test_the_layer_contract_catches_an_upward_import(tmp_path):
    # The contracts are not vacuous: a copy of the package with an upward import between
    # the layers, and one between training's packages (run_dir reading the run), breaks them.
    shutil.copytree(ROOT / "tfaccel", tmp_path / "tfaccel")
    with open(tmp_path / "tfaccel" / "errors.py", "a", encoding="utf-8") as handle:
        handle.write("\nfrom tfaccel.training import run_dir  # noqa: E402,F401\n")
    with open(tmp_path / "tfaccel" / "training" / "run_dir" / "checkpoints.py", "a",
              encoding="utf-8") as handle:
        handle.write("\nfrom tfaccel.training.run import summary  # noqa: E402,F401\n")
    shutil.copy(ROOT / "setup.cfg", tmp_path / "setup.cfg")
    result = _lint_imports(tmp_path, PYTHONPATH=str(tmp_path))
    assert result.returncode != 0
    assert "tfaccel.errors is not allowed to import tfaccel.training" in result.stdout
    assert ("tfaccel.training.run_dir is not allowed to import tfaccel.training.run"
            in result.stdout), result.stdout


# What a source module may import from tfaccel.data.sources: the shared stages of the
# families (base: the Source interface; class_folder: the class-folder family; array_files:
# an .npz file's split names). The Python source's worker processes run tfaccel.reading's
# worker_pool (TensorFlow-free: a spawned worker imports no TensorFlow). The file-glob
# stage (files_stage), the in-memory stage and text reading live in tfaccel.data itself.
SHARED_IN_SOURCES = {"base", "class_folder", "array_files"}


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


def _module_imports(modules: dict) -> dict:
    """tfaccel module -> the tfaccel modules it imports anywhere (lazy imports included)."""
    graph = {}
    for name, source in modules.items():
        found = set()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:  # `from pkg import module` names a module
                    found.add(f"{node.module}.{alias.name}"
                              if f"{node.module}.{alias.name}" in modules else node.module)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
        graph[name] = sorted(m for m in found if m in modules and m != name)
    return graph


def _import_circles(graph: dict) -> list:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, circles = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                circles.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return circles


def test_the_house_has_no_import_circle():
    # Issue #28: a lazy import inside a function still ties two modules into one room
    # (training.run <-> training.parameter_server was one: today run.runner and
    # run.coordinator_loop); the layer contract sees only imports across layers.
    modules = {}
    for path in (ROOT / "tfaccel").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = path.read_text(encoding="utf-8")
    assert _import_circles(_module_imports(modules)) == []
    # Not vacuous: a circle through a lazy import is found.
    fake = {"tfaccel.a": "def f():\n    from tfaccel.b import g\n",
            "tfaccel.b": "from tfaccel import a\n", "tfaccel": ""}
    assert _import_circles(_module_imports(fake)) == [["tfaccel.a", "tfaccel.b"]]


def test_ruff_finds_nothing():
    result = _run(sys.executable, "-m", "ruff", "check", "tfaccel", "tests", "benchmarks")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_docs_site_builds_strictly(tmp_path):
    # mkdocs.yml is strict: a broken link or anchor, a page left out of the nav, or an API
    # name in docs/api.md that no longer exists fails the build.
    # Without Material's end-of-life notice, which would fill a failure's message (it
    # never fails the build; .ci/run used to set this for the whole suite).
    result = _run(sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                  str(tmp_path / "site"), NO_MKDOCS_2_WARNING="1")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "site" / "api" / "index.html").exists()


# Tests you can find (docs/development.md, "Where a module's tests are"): a test file is
# tests/test_<module>.py or tests/test_<module>_<topic>.py, <module> the file name of the
# module it tests. These files test no single module, each for the reason given; keep the
# list short (a name here also covers test_<name>_<topic>.py).
CROSS_CUTTING = {
    "code_health": "the code's shape: layers, lint, the docs build, these names",
    "docs_examples": "every fenced block of README.md and docs/*.md, run as written",
    "public_api": "the names tfaccel and tfaccel.data export, and docs/api.md",
    "cli_quiet": "every command, run as a user runs it, prints no TF/absl/converter noise",
    "end_to_end": "whole runs through `tfaccel train` or tfaccel.train, all layers at once",
    "default_recipe": "the README's default recipe learns (heavy)",
    "shipped_recipes": "every recipe in recipes/ validates and learns what its comment says",
}
# The files in tests/ that are not test files: shared set-up and helpers the tests import.
# A helper may have tests of its own, named after it (tf_free.py -> test_tf_free.py).
HELPERS = {
    "conftest": "pytest's shared set-up: 2 logical CPUs, fixtures, the fast tier",
    "tf_free": "which TensorFlow-family modules a CLI call loads",
    "docs_blocks": "the fenced blocks of the docs, for test_docs_examples",
    "audio_helpers": "WAV files for the audio tests",
    "guard_helpers": "hostile input files and a one-call train, for the data guards",
    "keras_suite_helpers": "runs a Keras test class against a tfaccel builder",
    "launch_helpers": "runs `tfaccel launch` and other multi-process jobs with a timeout",
    "netns": "private networks of namespaces, each a host, for the multi-host tests",
    "pysource_helpers": "module-level Python sources that spawn/forkserver can pickle",
    "resume_driver": "resume scenarios in a fresh process",
    "text_helpers": "text-lines files and a short text run, for the text export tests",
    "warm_python": "a pre-warmed Python (TensorFlow imported once) for the suite's processes",
    "young_iterators": "frees the tf.data iterators a test left in cycles right after it",
}
_NOT_MODULES = {"__init__", "__main__", "_version"}
_PACKAGES = {path.parent.name for path in (ROOT / "tfaccel").rglob("__init__.py")}


def _defines_more_than_getattr(init_file):
    import ast

    tree = ast.parse(init_file.read_text(encoding="utf-8"))
    return any(isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name != "__getattr__"
               for node in tree.body)


def module_names(root=ROOT):
    """The names a test file may be named after: every module of tfaccel/ and benchmarks/
    (a leading underscore dropped), a package whose __init__.py holds code (tools/export/),
    and the helpers in tests/."""
    names = set(HELPERS)
    for folder in ("tfaccel", "benchmarks"):
        for path in (root / folder).rglob("*.py"):
            if path.stem not in _NOT_MODULES:
                names.add(path.stem.lstrip("_"))
            elif path.stem == "__init__" and _defines_more_than_getattr(path):
                names.add(path.parent.name)
    return names


def misnamed_test_files(file_names, modules):
    """One message per file of tests/ that breaks the naming rule, naming the file, the rule
    and the name to use."""
    def named_after(stem, names):
        return any(stem == name or stem.startswith(name + "_") for name in names)

    messages = []
    for file_name in sorted(file_names):
        stem = file_name[:-len(".py")]
        if not stem.startswith("test_"):
            if stem not in HELPERS:
                messages.append(
                    f"tests/{file_name} is not a test file (test_*.py) nor listed in HELPERS in "
                    "tests/test_code_health.py: add it there with what it helps with.")
            continue
        stem = stem[len("test_"):]
        if named_after(stem, modules) or named_after(stem, CROSS_CUTTING):
            continue
        parts = stem.split("_")
        # The longest run of the name's words that is a module; words before it that name a
        # package (the old test_<package>_<module> names) go, the others become the topic:
        # test_data_class_folder_split -> test_class_folder_split.
        found = max(((i, j) for i in range(len(parts)) for j in range(i + 1, len(parts) + 1)
                     if "_".join(parts[i:j]) in modules), key=lambda ij: ij[1] - ij[0],
                    default=None)
        if found:
            i, j = found
            module = "_".join(parts[i:j])
            topic = [w for w in parts[:i] if w not in _PACKAGES] + parts[j:]
            suggestion = (f"`git mv tests/{file_name} tests/test_{'_'.join([module] + topic)}.py`"
                          f" if it tests {module}.py")
        else:
            suggestion = "`git mv` it to tests/test_<module>.py or test_<module>_<topic>.py"
        messages.append(
            f"tests/{file_name} is not named after a module. A test file is "
            "tests/test_<module>.py or tests/test_<module>_<topic>.py, <module> being the file "
            "name of the module it tests under tfaccel/ or benchmarks/, or of a helper "
            "listed in HELPERS "
            "(tfaccel/data/sources/csv_tables.py -> test_csv_tables.py, its hints -> "
            f"test_csv_tables_hints.py): {suggestion}. A file that tests no single module is "
            "listed in CROSS_CUTTING in tests/test_code_health.py with its reason "
            "(docs/development.md, Tests).")
    return messages


def test_every_test_file_is_named_after_the_module_it_tests():
    names = [path.name for path in (ROOT / "tests").glob("*.py")]
    messages = misnamed_test_files(names, module_names())
    assert not messages, "\n".join(messages)


def test_the_naming_check_names_the_file_and_the_name_to_use():
    modules = {"pipeline", "class_folder", "run", "run_failures", "tf_free"}
    assert misnamed_test_files(
        ["test_pipeline.py", "test_pipeline_stream.py", "test_run_failures.py",
         "test_end_to_end_tables.py", "test_tf_free.py", "conftest.py"], modules) == []
    [helper, moved, unknown] = misnamed_test_files(
        ["test_data_class_folder_split.py", "test_frobnicate.py", "loose_helper.py"], modules)
    assert moved.startswith("tests/test_data_class_folder_split.py is not named after a module")
    assert ("`git mv tests/test_data_class_folder_split.py tests/test_class_folder_split.py`"
            " if it tests class_folder.py") in moved
    assert "tests/test_<module>.py or tests/test_<module>_<topic>.py" in moved
    assert "tests/test_frobnicate.py is not named after a module" in unknown
    assert "`git mv` it to tests/test_<module>.py" in unknown
    assert helper.startswith("tests/loose_helper.py is not a test file (test_*.py) nor listed in HELPERS")


def test_the_naming_lists_hold_no_stale_name():
    # Each cross-cutting name and helper still names a file: the lists do not outlive them.
    present = {path.stem for path in (ROOT / "tests").glob("*.py")}
    assert sorted(set(HELPERS) - present) == []
    assert sorted(name for name in CROSS_CUTTING
                  if not any(stem == f"test_{name}" or stem.startswith(f"test_{name}_")
                             for stem in present)) == []


def test_the_fast_tier_is_declared_by_each_file_not_listed():
    # Issue #37: a file says it is fast (`FAST_TIER = True`); conftest keeps no list of names
    # that a renamed file could leave behind, and every such file's flag is a plain True.
    conftest = (ROOT / "tests" / "conftest.py").read_text(encoding="utf-8")
    assert "FAST_MODULES" not in conftest
    flags = {path.stem: re.findall(r"^FAST_TIER = (.*?)(?:  #.*)?$",
                                   path.read_text(encoding="utf-8"), re.M)
             for path in (ROOT / "tests").glob("test_*.py")}
    declared = {stem: found for stem, found in flags.items() if found}
    assert len(declared) > 50
    assert {stem: found for stem, found in declared.items() if found != ["True"]} == {}


# Issue #37: "one name per thing". Two modules of one file name (two pipeline.py: the input
# pipeline and model parallelism) make a reader, a traceback and a test file name ambiguous.
# Files every package has by Python's rules:
SAME_NAME_ALLOWED = {"__init__.py", "__main__.py"}


def modules_sharing_a_name(paths) -> dict:
    """File name -> the sorted paths of the modules holding it, for names held twice or more
    (but the allowed ones)."""
    held = {}
    for path in paths:
        held.setdefault(pathlib.PurePath(path).name, []).append(str(path))
    return {name: sorted(where) for name, where in sorted(held.items())
            if len(where) > 1 and name not in SAME_NAME_ALLOWED}


def test_no_two_modules_share_a_file_name():
    paths = [path.relative_to(ROOT) for path in (ROOT / "tfaccel").rglob("*.py")]
    shared = modules_sharing_a_name(paths)
    assert shared == {}, (
        "Two modules of one file name: rename one after what it holds (`git mv`), so each "
        f"name says one thing: {shared}")
    # Not vacuous: a second base.py is found, and the files of every package are not.
    assert modules_sharing_a_name(["tfaccel/data/sources/base.py", "tfaccel/tools/base.py",
                                   "tfaccel/a/__init__.py", "tfaccel/b/__init__.py"]) == {
        "base.py": ["tfaccel/data/sources/base.py", "tfaccel/tools/base.py"]}


# Issue #37: "imports at the top unless a measured start-up cost says otherwise (say which,
# in one comment)". An import inside a function hides a dependency from the reader and the
# layer contract's eye; where it is kept (TensorFlow out of `validate`, an optional extra, a
# circle), the comment above its group says which cost it avoids.
def unexplained_deferred_imports(text: str) -> list:
    """(line, statement) of each import inside a function that has no comment: neither on
    its own line nor right above the group of imports it belongs to."""
    lines = text.splitlines()
    found, seen = [], set()
    for function in ast.walk(ast.parse(text)):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):
            if not isinstance(node, (ast.Import, ast.ImportFrom)) or node.lineno in seen:
                continue
            seen.add(node.lineno)
            if "#" in lines[node.lineno - 1]:
                continue
            above = node.lineno - 2  # walk up over the imports of the same group
            while above >= 0 and lines[above].strip().startswith(("import ", "from ")):
                above -= 1
            if above < 0 or not lines[above].strip().startswith("#"):
                found.append((node.lineno, lines[node.lineno - 1].strip()))
    return found


def test_every_import_inside_a_function_says_why():
    unexplained = {}
    for path in sorted((ROOT / "tfaccel").rglob("*.py")):
        for lineno, statement in unexplained_deferred_imports(path.read_text()):
            unexplained[f"{path.relative_to(ROOT)}:{lineno}"] = statement
    assert unexplained == {}, (
        "Imports inside functions without a comment naming the cost they avoid: move them "
        f"to the top of the module, or say why above them: {unexplained}")
    # Not vacuous: a bare deferred import is found, a commented one (either way) is not.
    sample = ("def f():\n    import json\n\n\ndef g():\n    # Deferred: TensorFlow (seconds).\n"
              "    import os\n    import sys\n\n\ndef h():\n    import re  # a circle\n")
    assert unexplained_deferred_imports(sample) == [(2, "import json")]
