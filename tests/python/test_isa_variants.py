"""Every instruction-set variant of the dispatched kernels (the GEMM micro-kernels, the packed GEMM and the NHWC
depthwise convolution, the int8 GEMM) keeps the fixtures within their tolerances. ETRT_ISA (amx, avx512vnni, avx512,
avx2, baseline) caps the variant a process picks at its first kernel call, so each variant runs the fixture tests in a
process of its own; a variant above what this CPU has is capped to what it has (asking for AVX-512 on an AVX2 machine
runs AVX2)."""
import os
import subprocess
import sys

import pytest

from conftest import ROOT

TESTS = [
    "tests/python/test_xnnpack.py::test_fixture_matches_eager",
    "tests/python/test_xnnpack_quantized.py::test_matches_upstream",
    "tests/python/test_xnnpack_quantized.py::test_lowered_and_unlowered_agree",
    "tests/python/test_fixtures.py::test_fixture_matches_eager",
    "tests/python/test_llm_generation.py",
]


@pytest.mark.parametrize("isa", ["amx", "avx512vnni", "avx512", "avx2", "baseline"])
def test_fixtures_hold_on_each_kernel_variant(isa):
    env = dict(os.environ, ETRT_ISA=isa)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TESTS], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=900)
    tail = "\n".join(r.stdout.strip().splitlines()[-15:])
    assert r.returncode == 0, f"ETRT_ISA={isa}:\n{tail}\n{r.stderr[-2000:]}"
    assert " passed" in tail and " failed" not in tail, tail
