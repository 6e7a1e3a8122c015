"""benchmarks/machine.py: the CPU a benchmark names, read from cpuinfo (no run)."""

import importlib.util
from pathlib import Path

FAST_TIER = True  # this file's unmarked tests are in `pytest -m fast` (tests/conftest.py)

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("machine", ROOT / "benchmarks" / "machine.py")
machine = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(machine)


def _cpuinfo(tmp_path, text):
    path = tmp_path / "cpuinfo"
    path.write_text(text)
    return str(path)


def test_a_vendor_only_name_gets_its_family_and_model(tmp_path):
    # A virtual machine named only "AMD EPYC": family 25 model 17 is a Zen 4, which tables
    # once called "Zen 5" by guess; the line now says what cpuinfo says.
    path = _cpuinfo(tmp_path, "processor\t: 0\ncpu family\t: 25\nmodel\t\t: 17\n"
                    "model name\t: AMD EPYC\nflags\t\t: fpu avx2 fma avx512f avx512_bf16\n")
    line = machine.describe_cpu(path)
    assert line.startswith("AMD EPYC (family 25 model 17), ")
    assert "avx512_bf16 yes" in line and "amx_bf16 no" in line and "avx_vnni no" in line


def test_without_family_the_name_stands_alone_and_no_file_says_unknown(tmp_path):
    path = _cpuinfo(tmp_path, "model name\t: Some CPU\nflags\t\t: avx2\n")
    assert machine.describe_cpu(path).startswith("Some CPU, ")
    assert machine.describe_cpu(str(tmp_path / "missing")).startswith("unknown CPU, ")
