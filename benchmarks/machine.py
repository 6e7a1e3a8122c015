"""The machine a benchmark ran on, for its table: CPU model and the SIMD features that matter."""

import os

# bf16 and int8 kernels depend on these (precision `auto`, int8 export, XLA's code).
FEATURES = ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16",
            "amx_int8")


def describe_cpu(cpuinfo_path: str = "/proc/cpuinfo") -> str:
    """``"MODEL, N cores: avx2 yes, ..."`` from Linux's cpuinfo ("unknown CPU" elsewhere)."""
    try:
        with open(cpuinfo_path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return f"unknown CPU, {os.cpu_count()} cores"
    lines = text.splitlines()
    name = next((line.split(":", 1)[1].strip() for line in lines
                 if line.startswith("model name")), "unknown CPU")
    # A virtual machine may name only the vendor ("AMD EPYC"): family and model say which
    # generation it is (AMD family 25 is Zen 3/4, 26 Zen 5), so a table's label is read, not
    # guessed.
    family = next((line.split(":", 1)[1].strip() for line in lines
                   if line.startswith("cpu family")), None)
    model = next((line.split(":", 1)[1].strip() for line in lines
                  if line.split(":", 1)[0].strip() == "model"), None)
    if family is not None and model is not None:
        name = f"{name} (family {family} model {model})"
    flags = set(next((line.split(":", 1)[1].split() for line in lines
                      if line.startswith("flags")), []))
    listed = ", ".join(f"{f} {'yes' if f in flags else 'no'}" for f in FEATURES)
    return f"{name}, {os.cpu_count()} cores: {listed}"
