"""The `etrt` command line tool (also `python -m executorch_portable_lib`): run, inspect, bench, verify, selective,
config, with their failure exits (1: the file or model failed, with the message; 2: a usage error)."""
import pathlib
import re
import subprocess
import sys

import numpy as np

from conftest import FIXTURES, ROOT


def etrt(*args, check=True):
    r = subprocess.run([sys.executable, "-m", "executorch_portable_lib", *map(str, args)], capture_output=True,
                       text=True, timeout=300)
    if check:
        assert r.returncode == 0, r.stderr
    return r


def test_run_with_inputs_writes_the_outputs(tmp_path):
    out = tmp_path / "out.npz"
    r = etrt("run", FIXTURES / "add.pte", "--inputs", FIXTURES / "add.npz", "--out", out)
    z = np.load(FIXTURES / "add.npz")
    np.testing.assert_allclose(np.load(out)["out0"], z["out0"], rtol=1e-6)
    assert "output 0: float32[2, 3]" in r.stdout


def test_run_needs_the_value_of_a_specialised_scalar(tmp_path):
    r = etrt("run", FIXTURES / "scalar_inputs.pte", check=False)
    assert r.returncode == 2 and "input 1 (Int) is specialised by the exporter" in r.stderr
    etrt("run", FIXTURES / "scalar_inputs.pte", "--inputs", FIXTURES / "scalar_inputs.npz")


def test_inspect_lists_what_the_program_needs():
    r = etrt("inspect", FIXTURES / "mlp.pte")
    assert "operators (3): aten::addmm.out, aten::permute_copy.out, aten::relu.out" in r.stdout
    assert "method forward:" in r.stdout and "input 0: TensorInfo" in r.stdout and "runs here" in r.stdout
    r = etrt("inspect", ROOT / "tests" / "fixtures" / "xnnpack" / "xnn_mlp.pte")
    assert "delegates: XnnpackBackend" in r.stdout
    size = (ROOT / "tests" / "fixtures" / "xnnpack" / "xnn_mlp.pte").stat().st_size
    segments = re.search(r"segments: (\d+) \((\d+) bytes", r.stdout)
    assert segments and int(segments[1]) >= 1 and 0 < int(segments[2]) < size  # the payload lives in a segment


def test_inspect_names_what_is_missing(tmp_path):
    data = (FIXTURES / "add.pte").read_bytes().replace(b"aten::add", b"aten::adz")
    (tmp_path / "adz.pte").write_bytes(data)
    r = etrt("inspect", tmp_path / "adz.pte", check=False)
    assert r.returncode == 1 and "missing here to run it: operators aten::adz.out" in r.stdout


def test_bench_prints_percentiles():
    r = etrt("bench", FIXTURES / "add.pte", "--calls", 50, "--warmup", 2)
    assert "50 calls, p50" in r.stdout and "p99" in r.stdout


def test_verify_runs_every_bundled_case():
    r = etrt("verify", FIXTURES / "add.bpte")
    assert "forward case 0: ok" in r.stdout and "all test cases pass" in r.stdout


def test_failures_exit_1_with_the_message(tmp_path):
    r = etrt("run", tmp_path / "missing.pte", check=False)
    assert r.returncode == 1 and "missing.pte" in r.stderr and "Traceback" not in r.stderr
    r = etrt("run", FIXTURES / "add.pte", "--method", "nope", check=False)
    assert r.returncode == 1 and "nope" in r.stderr
    r = etrt("verify", FIXTURES / "add.pte", check=False)
    assert r.returncode == 1 and "not a bundled program" in r.stderr
    assert etrt("bench", FIXTURES / "add.pte", "--calls", 0, check=False).returncode == 2


def test_selective_and_config(tmp_path):
    import executorch_portable_lib as p
    r = etrt("selective", FIXTURES / "mlp.pte", "-o", tmp_path / "k.h")
    text = (tmp_path / "k.h").read_text()
    assert "std::array<::etrt::KernelEntry, 3>" in text and '"aten::relu.out"' in text
    assert "::etrt::selective::keep_t<::etrt::real_types, 6>" in text  # float32 only: mlp.pte's one dtype
    bad = tmp_path / "bad.pte"
    bad.write_bytes(b"\0" * 64)
    r = etrt("selective", bad, "-o", tmp_path / "k2.h", check=False)
    assert r.returncode == 2 and "not an ExecuTorch program" in r.stderr
    assert etrt("config", "--cflags").stdout.strip() == f"-std=c++20 -I{p.get_include()}"
    assert (pathlib.Path(p.get_include()) / "etrt" / "runtime.h").exists()
    assert (pathlib.Path(p.get_include()) / "etrt_generated" / "portable_kernels.h").exists()
