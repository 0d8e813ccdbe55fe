"""The package built with the default options runs on older x86-64 CPUs: under qemu-user emulating a Nehalem (SSE4.2,
no AVX: the x86-64-v2 baseline) and a Haswell (AVX2 + FMA, no AVX-512), the module imports, picks the kernel variant
that CPU has, and the fixture tests pass. An instruction beyond what the emulated CPU has raises SIGILL there, so
this fails if the build's baseline code, or a dispatch that runs before its CPU check, uses one.

Needs Debian's qemu-user (install_executorch.sh installs it); skipped without it or on other architectures."""
import os
import platform
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

QEMU = shutil.which("qemu-x86_64")
pytestmark = [
    pytest.mark.skipif(platform.machine() != "x86_64", reason="x86-64 CPU models only"),
    pytest.mark.skipif(QEMU is None, reason="qemu-x86_64 not installed (Debian's qemu-user; install_executorch.sh installs it)"),
]

# The same fixture tests the ISA-variant test runs, on NumPy inputs (torch's wheel needs AVX2 and is not under test).
TESTS = [
    "tests/python/test_fixtures.py::test_fixture_matches_eager",
    "tests/python/test_xnnpack.py::test_fixture_matches_eager",
    "tests/python/test_xnnpack_quantized.py::test_matches_upstream",
    "tests/python/test_xnnpack_quantized.py::test_lowered_and_unlowered_agree",
    "tests/python/test_llm_generation.py",
]
CPUS = [("Nehalem", "baseline"), ("Haswell-noTSX", "avx2")]


def under_qemu(cpu, args, timeout):
    env = dict(os.environ, ETRT_TEST_BLOCK_TORCH="1")
    env.pop("ETRT_ISA", None)
    return subprocess.run([QEMU, "-cpu", cpu, sys.executable, *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.parametrize("cpu,variant", CPUS)
def test_module_picks_the_cpus_variant(cpu, variant):
    code = ("import sys; sys.modules['torch'] = None\n"
            "from executorch.extension.pybindings import portable_lib as p\n"
            "print(p._cpu_isa())")
    r = under_qemu(cpu, ["-c", code], 300)
    assert r.returncode == 0, f"{cpu}: exit {r.returncode}\n{r.stderr[-3000:]}"
    assert r.stdout.strip() == variant, (cpu, r.stdout, r.stderr[-2000:])


@pytest.mark.parametrize("cpu,variant", CPUS)
def test_fixtures_pass_on_an_older_cpu(cpu, variant):
    r = under_qemu(cpu, ["-m", "pytest", "-q", "-p", "no:cacheprovider", *TESTS], 1200)
    tail = "\n".join(r.stdout.strip().splitlines()[-15:])
    assert r.returncode == 0, f"{cpu} ({variant}): exit {r.returncode}\n{tail}\n{r.stderr[-3000:]}"
    assert " passed" in tail and " failed" not in tail, tail
