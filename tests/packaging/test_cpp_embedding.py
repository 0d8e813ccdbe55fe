"""C++ embedding of the installed package, with only include flags: get_include(), the selective kernel table of
one program (its operators, for its dtypes), the complete example (examples/cpp/run_model.cpp: load, set inputs, execute, read outputs, errors),
pkg-config and CMake. Run by tests/run_all.sh (once: it compiles). The compile time is printed, not asserted
(performance figures live in bench/)."""
import os
import pathlib
import shutil
import subprocess
import sys
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
ADD = ROOT / "tests" / "fixtures" / "exported" / "add.pte"
EXAMPLE = ROOT / "examples" / "cpp" / "run_model.cpp"
CXX = os.environ.get("CXX", "c++")


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900, **kw)
    assert r.returncode == 0, f"{cmd}: {r.stdout}\n{r.stderr}"
    return r


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    import executorch_portable_lib as p
    tmp = tmp_path_factory.mktemp("embed")
    run([sys.executable, "-m", "executorch_portable_lib", "selective", str(ADD), "-o", str(tmp / "add_kernels.h")])
    cflags = run([sys.executable, "-m", "executorch_portable_lib", "config", "--cflags"]).stdout.split()
    assert cflags == ["-std=c++20", f"-I{p.get_include()}"]
    start = time.perf_counter()
    run([CXX, *cflags, "-O2", f"-I{tmp}", '-DETRT_KERNELS_HEADER="add_kernels.h"', str(EXAMPLE), "-pthread",
         "-o", str(tmp / "run_add")])
    seconds = time.perf_counter() - start
    print(f"\nselective build of add.pte (examples/cpp/run_model.cpp, -O2): {seconds:.1f} s, "
          f"binary {(tmp / 'run_add').stat().st_size / 1e3:.0f} kB")
    return tmp


def test_example_runs_the_model(built):
    r = run([str(built / "run_add"), str(ADD), "forward"])
    assert r.stdout.strip() == "output 0: float32[2, 3] 2 4 6 8 10 12"


def test_example_reports_errors(built, tmp_path):
    r = subprocess.run([str(built / "run_add"), str(tmp_path / "missing.pte")], capture_output=True, text=True)
    assert r.returncode == 1 and r.stderr.startswith("open: cannot open") and "missing.pte" in r.stderr
    r = subprocess.run([str(built / "run_add"), str(ADD), "nope"], capture_output=True, text=True)
    assert r.returncode == 1 and r.stderr.startswith("load method:") and "nope" in r.stderr
    # The table holds add.out for float32 only (add.pte's dtypes): a bfloat16 add is an error naming the dtype.
    bf16 = ROOT / "tests" / "fixtures" / "exported" / "bf16_add.pte"
    r = subprocess.run([str(built / "run_add"), str(bf16)], capture_output=True, text=True)
    assert r.returncode == 1 and r.stderr.startswith("execute:") and "unsupported dtype BFloat16" in r.stderr
    # A program needing an operator the selective table lacks: a load error naming it.
    mlp = ROOT / "tests" / "fixtures" / "exported" / "mlp.pte"
    r = subprocess.run([str(built / "run_add"), str(mlp)], capture_output=True, text=True)
    assert r.returncode == 1 and "aten::addmm.out" in r.stderr


def test_pkg_config_describes_the_headers():
    import executorch_portable_lib as p
    if not shutil.which("pkg-config"):
        pytest.skip("pkg-config is not installed")
    env = dict(os.environ, PKG_CONFIG_PATH=p.get_pkgconfig_dir())
    flags = run(["pkg-config", "--cflags", "executorch-portable-lib"], env=env).stdout.split()
    assert "-std=c++20" in flags
    inc = [f[2:] for f in flags if f.startswith("-I")]
    assert inc and pathlib.Path(inc[0]).resolve() == pathlib.Path(p.get_include()).resolve()


def test_cmake_package_builds_the_example(built, tmp_path):
    import executorch_portable_lib as p
    if not shutil.which("cmake"):
        pytest.skip("cmake is not installed")
    (tmp_path / "CMakeLists.txt").write_text(f"""cmake_minimum_required(VERSION 3.16)
project(embed CXX)
find_package(executorch-portable-lib 0.1 CONFIG REQUIRED)
add_executable(run_add {EXAMPLE})
target_include_directories(run_add PRIVATE {built})
target_compile_definitions(run_add PRIVATE ETRT_KERNELS_HEADER="add_kernels.h")
target_link_libraries(run_add PRIVATE executorch_portable_lib::runtime)
""")
    run(["cmake", "-S", str(tmp_path), "-B", str(tmp_path / "b"), f"-DCMAKE_PREFIX_PATH={p.get_cmake_dir()}",
         "-DCMAKE_BUILD_TYPE=Release"])
    run(["cmake", "--build", str(tmp_path / "b")])
    r = run([str(tmp_path / "b" / "run_add"), str(ADD)])
    assert r.stdout.strip() == "output 0: float32[2, 3] 2 4 6 8 10 12"
