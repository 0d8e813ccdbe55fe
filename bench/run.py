#!/usr/bin/env python3
"""Benchmarks. Every number is a ratio against a reference measured in the same run (lower is better).

    python bench/run.py            # kernels vs NumPy, zoo latency vs upstream portable_lib, Python-boundary overhead

1. Kernels (bench/models/*.pte, exported with inputs not memory planned, outputs borrowed): add on 16M floats,
   linear 512x512x512, a ResNet 3x3 conv layer, softmax over rows, each against the same computation in NumPy.
2. Zoo latency: every fixture in tests/fixtures/exported against the upstream runtime (executorch from PyPI),
   run in its own venv in a separate process (tools/export/make_export_venv.sh makes it; skipped without it).
3. LLMs: prefill and decode seconds per token of every export_llm fixture, and of the stories15M-sized programs
   tools/export/export_bench_llm.py writes to bench/llm/, against upstream on the same file.
4. XNNPACK: the lowered fixtures and mobilenet_v2 / efficientnet_b0 / resnet18 / vit_b_32 lowered to XNNPACK
   (exported once by tools/export/zoo_sweep.py into ETRT_BENCH_ZOO), against upstream's XNNPACK on the same file.
   `python bench/run.py xnnpack` runs this part alone (`python bench/run.py portable` runs parts 1 and 2,
   `python bench/run.py llm` part 3).
5. GEMM: f32 a @ b at 64, 256 and 1024 cubed (bench/models/mm_*.pte) on one thread, GFLOP/s as a fraction of the
   core's FMA peak (measured by bench/fma_peak.cpp) and against NumPy's OpenBLAS on one thread
   (`python bench/run.py gemm`). `python bench/run.py gemm_shapes` (not in the default run; needs a C++ compiler)
   runs the packed GEMM on mobilenet_v2's pointwise layer shapes (bench/gemm_shapes.cpp), hot in cache, on one
   thread and on all cores: what the network's GEMMs can reach, against the same FMA peak.
6. Memory: peak RSS of loading and running mobilenet_v2 lowered to XNNPACK, ours against upstream, each in a fresh
   process (`python bench/run.py rss`).
7. Overhead: forward() on the tiny add fixture, NumPy and torch inputs, ExecuTorchResult and torch outputs, clone on
   and off, against one np.add(out=) call and against upstream (torch inputs) on the same file.
   `python bench/run.py overhead` runs this part alone.
"""
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from timing import median_seconds  # noqa: E402

MODELS = HERE / "models"
FIXTURES = ROOT / "tests" / "fixtures" / "exported"
UPSTREAM_PY = pathlib.Path(os.environ.get("ETRT_UPSTREAM_PYTHON", ROOT / ".venv-export" / "bin" / "python"))


def row(name, ours, ref, ref_name):
    ratio = ours / ref if isinstance(ref, float) and ref > 0 else float("nan")
    ref_s = f"{ref * 1e3:10.3f} ms" if isinstance(ref, float) else f"{str(ref)[:40]:>13}"
    print(f"  {name:28s} ours {ours * 1e3:10.3f} ms   {ref_name} {ref_s}   ratio {ratio:6.2f}")


def kernels(pl):
    print("== kernels vs NumPy (same process, single call latency, median)")
    rng = np.random.default_rng(0)

    m = pl._load_for_executorch(str(MODELS / "add_16m.pte"))
    x, y = rng.standard_normal(1 << 24, dtype=np.float32), rng.standard_normal(1 << 24, dtype=np.float32)
    buf = np.empty_like(x)
    ours = median_seconds(lambda: m.forward([x, y], clone_outputs=False))
    row("add f32[16M]", ours, median_seconds(lambda: np.add(x, y, out=buf)), "numpy")

    m = pl._load_for_executorch(str(MODELS / "linear_512.pte"))
    a = rng.standard_normal((512, 512), dtype=np.float32)
    w = rng.standard_normal((512, 512), dtype=np.float32)
    b = rng.standard_normal(512, dtype=np.float32)
    ours = median_seconds(lambda: m.forward([a], clone_outputs=False))
    row("linear 512x512x512", ours, median_seconds(lambda: np.add(a @ w.T, b)), "numpy")

    m = pl._load_for_executorch(str(MODELS / "conv2d_resnet.pte"))
    xc = rng.standard_normal((1, 64, 56, 56), dtype=np.float32)
    wc = rng.standard_normal((64, 64, 3, 3), dtype=np.float32)

    def numpy_conv():  # im2col + one matmul: the same algorithm NumPy users write
        xp = np.pad(xc[0], ((0, 0), (1, 1), (1, 1)))
        cols = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(1, 2))  # C, H, W, 3, 3
        cols = cols.transpose(0, 3, 4, 1, 2).reshape(64 * 9, 56 * 56)
        return wc.reshape(64, -1) @ cols

    ours = median_seconds(lambda: m.forward([xc], clone_outputs=False))
    row("conv2d 64->64 3x3 @56x56", ours, median_seconds(numpy_conv), "numpy")

    m = pl._load_for_executorch(str(MODELS / "softmax_rows.pte"))
    xs = rng.standard_normal((256, 4096), dtype=np.float32)

    def numpy_softmax():
        e = np.exp(xs - xs.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    ours = median_seconds(lambda: m.forward([xs], clone_outputs=False))
    row("softmax f32[256,4096] dim=-1", ours, median_seconds(numpy_softmax), "numpy")


def fixture_inputs(fx):
    z = np.load(FIXTURES / fx["files"]["npz"])
    kinds = [e["type"] for e in fx["methods"][fx["main_method"]]["eager_inputs"][0]]
    inputs, spec = [], []
    for i, kind in enumerate(kinds):
        key = f"in{i}"
        if kind == "int":
            inputs.append(int(z[key]))
        elif kind == "float":
            inputs.append(float(z[key]))
        elif key in fx["npz"]["bf16_as_uint16"]:
            inputs.append(np.ascontiguousarray(z[key]).view(np.uint8))
            kind = "skip"
        else:
            inputs.append(np.ascontiguousarray(z[key]))
        spec.append([kind, key])
    return inputs, spec


def run_upstream(spec):
    if not UPSTREAM_PY.exists():
        return None
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(spec, f)
    try:
        r = subprocess.run([str(UPSTREAM_PY), str(HERE / "upstream_latency.py"), f.name], capture_output=True,
                           text=True, timeout=600, cwd=tempfile.gettempdir())
        lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
        return json.loads(lines[-1]) if lines else {"_error": r.stderr[-300:]}
    finally:
        os.unlink(f.name)


class UpstreamServer:
    """upstream_latency.py --serve in the export venv, kept running: each measure() times one program there right
    after ours, so that both sides of a ratio see the same phase of a noisy host (the batch form ran all of ours,
    then all of upstream's, tens of seconds apart)."""

    def __init__(self):
        self.proc = None
        if UPSTREAM_PY.exists():
            self.proc = subprocess.Popen([str(UPSTREAM_PY), str(HERE / "upstream_latency.py"), "--serve"],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                         text=True, cwd=tempfile.gettempdir())

    def measure(self, item):
        """{name: seconds or error}, or {} once the server is gone."""
        if self.proc is None or self.proc.poll() is not None:
            return {}
        self.proc.stdin.write(json.dumps(item) + "\n")
        self.proc.stdin.flush()
        for line in self.proc.stdout:
            if line.startswith("{"):
                return json.loads(line)
        return {}

    def close(self):
        if self.proc is not None:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)


def zoo(pl):
    print("== zoo latency vs upstream portable_lib (separate process, its own venv)")
    manifest = json.loads((FIXTURES / "manifest.json").read_text())
    ours, spec = {}, []
    for fx in manifest["fixtures"]:
        inputs, kinds = fixture_inputs(fx)
        m = pl._load_for_executorch(str(FIXTURES / fx["files"]["pte"]))
        ours[fx["name"]] = median_seconds(lambda: m.run_method(fx["main_method"], inputs))
        if all(k != "skip" for k, _ in kinds):
            spec.append({"name": fx["name"], "pte": str(FIXTURES / fx["files"]["pte"]), "method": fx["main_method"],
                         "npz": str(FIXTURES / fx["files"]["npz"]), "inputs": kinds})
    corpus = pathlib.Path(os.environ.get("ETRT_CORPUS_DIR", ROOT.parent / "shared" / "corpus"))
    tmp = pathlib.Path(tempfile.mkdtemp())
    for name, shape in (("maxpool2d", (1, 64, 112, 112)), ("softmax", (2, 4096))):
        if not (corpus / f"{name}.pte").exists():
            continue
        x = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
        np.save(tmp / f"{name}.npy", x)
        m = pl._load_for_executorch(str(corpus / f"{name}.pte"))
        ours[f"corpus {name}"] = median_seconds(lambda: m.forward([x]))
        spec.append({"name": f"corpus {name}", "pte": str(corpus / f"{name}.pte"), "method": "forward",
                     "inputs": [["npy", str(tmp / f"{name}.npy")]]})
    up = run_upstream(spec)
    if up is None:
        print(f"  upstream runtime not installed at {UPSTREAM_PY} (tools/export/make_export_venv.sh); ours only")
        up = {}
    for name, t in ours.items():
        row(name, t, up.get(name, "n/a"), "upstream")


LLM_BENCH = HERE / "llm"  # stories15M-sized programs, made by tools/export/export_bench_llm.py (not committed)


def llm(pl, rounds=3):
    print("== export_llm programs (tests/fixtures/llm, and bench/llm when tools/export/export_bench_llm.py made it):"
          " seconds per token, prefill of the prompt in one call and decode one token per call, vs upstream on the"
          f" same file; {rounds} rounds alternating ours and upstream, ratio = median over rounds of the round's ratio")
    runs, spec = {}, []
    sources = [ROOT / "tests" / "fixtures" / "llm"]
    if (LLM_BENCH / "manifest.json").exists():
        sources.append(LLM_BENCH)
    else:
        print("  (no bench/llm: run tools/export/export_bench_llm.py for the stories15M-sized programs)")
    for llm_dir in sources:
        manifest = json.loads((llm_dir / "manifest.json").read_text())
        prompt, steps = manifest["prompt"], 16
        for name in sorted(manifest["variants"]):
            pte = llm_dir / f"{name}.pte"
            try:
                m = pl._load_for_executorch(str(pte))
                tokens, zero = np.array([prompt], np.int64), np.zeros(1, np.int64)
                m.forward([tokens, zero])
            except RuntimeError as e:
                print(f"  {name}: does not run here: {str(e)[:100]}")
                continue
            runs[name] = (m, tokens, zero, len(prompt), steps)
            spec.append({"name": name, "pte": str(pte), "llm": {"prompt": prompt, "decode": steps}})
    # A shared VM's speed drifts over tens of seconds: each round times ours, then upstream, and a ratio is taken
    # within a round.
    ours, theirs = {}, {}
    for _ in range(rounds):
        for name, (m, tokens, zero, length, steps) in runs.items():
            def decode():
                for i in range(steps):
                    m.forward([np.array([[7]], np.int64), np.array([length + i], np.int64)])
            ours.setdefault(f"{name} prefill", []).append(median_seconds(lambda: m.forward([tokens, zero])) / length)
            ours.setdefault(f"{name} decode", []).append(median_seconds(decode) / steps)
        up = run_upstream(spec) or {}
        for key in ours:
            theirs.setdefault(key, []).append(up.get(key))
    for key, mine in ours.items():
        up = theirs.get(key, [])
        if up and all(isinstance(u, float) for u in up):
            ratio = statistics.median(o / u for o, u in zip(mine, up))
            print(f"  {key + ' /token':36s} ours {statistics.median(mine) * 1e3:8.3f} ms   upstream"
                  f" {statistics.median(up) * 1e3:8.3f} ms   ratio {ratio:5.2f}")
        else:
            row(key + " /token", statistics.median(mine), "n/a", "upstream")


XNNPACK_FIXTURES = ROOT / "tests" / "fixtures" / "xnnpack"
ZOO_XNNPACK = ("mobilenet_v2", "efficientnet_b0", "resnet18", "vit_b_32")
# The same architectures PT2E-quantized (static int8, per-channel weights) and lowered: zoo_sweep.py --quantize.
ZOO_XNNPACK_Q8 = ("mobilenet_v2", "resnet18", "efficientnet_b0", "vit_b_32")


def xnnpack_programs():
    """(name, pte, npz, GFLOP or None): the committed XNNPACK fixtures, and the zoo architectures lowered to XNNPACK
    (random weights, batch 1), exported once into ETRT_BENCH_ZOO (default /tmp/etrt-bench-zoo) with the export venv."""
    progs = [(n, XNNPACK_FIXTURES / f"{n}.pte", XNNPACK_FIXTURES / f"{n}.npz", None)
             for n in ("xnn_mlp", "xnn_cnn", "xnn_dwsep", "xnn_transformer")]
    zoo_dir = pathlib.Path(os.environ.get("ETRT_BENCH_ZOO", "/tmp/etrt-bench-zoo"))
    missing = [n for n in ZOO_XNNPACK if not (zoo_dir / f"{n}_xnnpack.pte").exists()]
    if missing and UPSTREAM_PY.exists():
        print(f"  exporting {', '.join(missing)} lowered to XNNPACK into {zoo_dir} (once)")
        subprocess.run([str(UPSTREAM_PY), str(ROOT / "tools" / "export" / "zoo_sweep.py"), "export", "--xnnpack",
                        "--out", str(zoo_dir), "--only", *missing], check=False, capture_output=True, text=True)
    missing_q8 = [n for n in ZOO_XNNPACK_Q8 if not (zoo_dir / f"{n}_xnnpack_q8.pte").exists()]
    if missing_q8 and UPSTREAM_PY.exists():
        print(f"  exporting {', '.join(missing_q8)} PT2E-quantized and lowered into {zoo_dir} (once)")
        subprocess.run([str(UPSTREAM_PY), str(ROOT / "tools" / "export" / "zoo_sweep.py"), "export", "--xnnpack",
                        "--quantize", "--out", str(zoo_dir), "--only", *missing_q8], check=False, capture_output=True,
                       text=True)
    for n, stem in [(n, f"{n}_xnnpack") for n in ZOO_XNNPACK] + [(f"{n}_q8", f"{n}_xnnpack_q8") for n in ZOO_XNNPACK_Q8]:
        pte, npz = zoo_dir / f"{stem}.pte", zoo_dir / f"{stem}.npz"
        if pte.exists():
            z = np.load(npz)
            progs.append((n, pte, npz, float(z["flops"]) / 1e9 if "flops" in z.files else None))
    return progs


def xnnpack(pl, rounds=3):
    print(f"== XNNPACK-lowered programs vs upstream (its XNNPACK library) on the same file: median forward() per"
          f" program, {rounds} rounds, each program timed in ours then at once in upstream's process, ratio ="
          f" median over rounds; threads: ours {os.environ.get('ETRT_NUM_THREADS', 'all cores')}, upstream its"
          f" default")
    progs = xnnpack_programs()
    spec = [{"name": n, "pte": str(pte), "method": "forward", "npz": str(npz), "inputs": [["tensor", "in0"]]}
            for n, pte, npz, _ in progs]
    try:
        import torch
    except ImportError:
        torch = None
    ours = {n: [] for n, *_ in progs}
    ours_torch = {n: [] for n, *_ in progs}
    theirs = {n: [] for n, *_ in progs}
    modules = {n: (pl._load_for_executorch(str(pte)), np.load(npz)["in0"]) for n, pte, npz, _ in progs}
    upstream = UpstreamServer()
    try:
        for _ in range(rounds):
            for item in spec:
                n = item["name"]
                m, x = modules[n]
                ours[n].append(median_seconds(lambda: m.forward([x])))
                if torch is not None:
                    tx = torch.from_numpy(x)
                    ours_torch[n].append(median_seconds(lambda: m.forward([tx])))
                up = upstream.measure(item).get(n)
                theirs[n].append(up if isinstance(up, float) else None)  # None keeps the rounds paired
    finally:
        upstream.close()
    for n, _, _, gflop in progs:
        t = statistics.median(ours[n])
        flops = f"   {gflop:5.2f} GFLOP at {gflop / t:5.1f} GFLOP/s" if gflop else ""
        up = [u for u in theirs[n] if u is not None]
        if up:
            ratio = statistics.median(o / u for o, u in zip(ours[n], theirs[n]) if u is not None)
            line = (f"  {n:16s} ours {t * 1e3:8.3f} ms   upstream {statistics.median(up) * 1e3:8.3f} ms"
                    f"   ratio {ratio:5.2f}")
            if ours_torch[n]:
                torch_ratio = statistics.median(o / u for o, u in zip(ours_torch[n], theirs[n]) if u is not None)
                line += f" (torch in {torch_ratio:5.2f})"
            print(line + flops)
        else:
            print(f"  {n:16s} ours {t * 1e3:8.3f} ms   upstream n/a{flops}")


def build_tool(name, out_dir):
    """bench/<name>.cpp compiled against this checkout's headers into out_dir; its path, or None (no C++ compiler,
    set CXX; or it did not compile, the compiler's message printed)."""
    import shutil
    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if not cxx:
        return None
    exe = os.path.join(out_dir, name)
    build = subprocess.run([cxx, "-O2", "-std=c++20", "-Wno-psabi", "-falign-loops=32", f"-I{ROOT / 'include'}",
                            str(HERE / f"{name}.cpp"), "-o", exe, "-pthread"], capture_output=True, text=True)
    if build.returncode != 0:
        print(build.stderr[-2000:])
        return None
    return exe


def measured_fma_peak(wide):
    """One core's f32 FMA GFLOP/s as bench/fma_peak.cpp measures it (512-bit FMAs if `wide`), or None where it cannot
    be built and run (no C++ compiler, not x86-64)."""
    import platform
    if platform.machine() not in ("x86_64", "AMD64"):
        return None
    with tempfile.TemporaryDirectory() as d:
        exe = build_tool("fma_peak", d)
        if not exe:
            return None
        run = subprocess.run([exe, "zmm" if wide else "ymm"], capture_output=True, text=True)
        try:
            return float(run.stdout.strip()) if run.returncode == 0 else None
        except ValueError:
            return None


def fma_peak_gflops(pl):
    """One core's f32 FMA peak at the instruction set that runs: measured (measured_fma_peak), else FLOP per cycle
    (two FMA pipes: 32 with 256-bit vectors, 64 with 512-bit ones, 32 for Zen 4's 512-bit FMAs on its two 256-bit
    pipes) times the clock /proc/cpuinfo reports, which in a virtual machine may be the base clock."""
    mhz = 0.0
    amd_zen4 = False
    try:
        info = pathlib.Path("/proc/cpuinfo").read_text()
        vendor_amd = "AuthenticAMD" in info
        for line in info.splitlines():
            if line.startswith("cpu MHz"):
                mhz = max(mhz, float(line.split(":")[1]))
            if line.startswith("cpu family") and vendor_amd and line.split(":")[1].strip() == "25":
                amd_zen4 = True  # family 25 is Zen 3 / Zen 4; only Zen 4 has AVX-512
    except OSError:
        pass
    isa = pl._cpu_isa() if hasattr(pl, "_cpu_isa") else "avx2"
    # amx and avx512vnni are AVX-512 levels too.
    wide = isa.startswith("avx512") or isa == "amx"
    measured = measured_fma_peak(wide) if wide or isa.startswith("avx2") else None
    if measured:
        return measured, isa, f"measured by bench/fma_peak.cpp, {'512' if wide else '256'}-bit FMAs"
    per_cycle = 32 if wide and amd_zen4 else 64 if wide else 32 if isa.startswith("avx2") else 8
    return per_cycle * mhz / 1e3, isa, f"{mhz:.0f} MHz as /proc/cpuinfo reports it"


def gemm(pl):
    """Runs in a child process with one thread for both sides (the thread counts are read when libraries start)."""
    if os.environ.get("ETRT_NUM_THREADS") != "1":
        env = dict(os.environ, ETRT_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
        for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):  # let OpenBLAS pick its own kernels for this command
            env.pop(k, None)
        return subprocess.run([sys.executable, str(pathlib.Path(__file__).resolve()), "gemm"], env=env).returncode
    peak, isa, how = fma_peak_gflops(pl)
    print(f"== f32 GEMM a @ b, one thread, ours ({isa}) vs NumPy (OpenBLAS); core peak {peak:.1f} GFLOP/s ({how})")
    rng = np.random.default_rng(0)
    for n in (64, 256, 1024):
        m = pl._load_for_executorch(str(MODELS / f"mm_{n}.pte"))
        a, b = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
        out = np.empty((n, n), np.float32)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        got = np.asarray(m.forward([a, b], clone_outputs=False)[0])
        err = float(np.max(np.abs(got - ref)) / np.max(np.abs(ref)))
        ours = median_seconds(lambda: m.forward([a, b], clone_outputs=False))
        theirs = median_seconds(lambda: np.matmul(a, b, out=out))
        flop = 2.0 * n ** 3
        print(f"  {n:4d}^3  ours {flop / ours / 1e9:6.1f} GFLOP/s ({flop / ours / 1e9 / peak:4.0%} of peak)"
              f"   numpy {flop / theirs / 1e9:6.1f} GFLOP/s ({flop / theirs / 1e9 / peak:4.0%})"
              f"   time ratio {ours / theirs:5.2f}   max rel. error {err:.1e}")
    return 0


def gemm_shapes(pl):
    """bench/gemm_shapes.cpp compiled against this checkout's headers, run on one thread and on all cores."""
    peak, isa, how = fma_peak_gflops(pl)
    with tempfile.TemporaryDirectory() as d:
        exe = build_tool("gemm_shapes", d)
        if not exe:
            print("== gemm_shapes: bench/gemm_shapes.cpp could not be built (no C++ compiler? set CXX)")
            return 1
        for threads in (1, os.cpu_count() or 1):
            print(f"== packed f32 GEMM on mobilenet_v2's pointwise shapes (m x k x n, count), ReLU6 epilogue, {threads}"
                  f" thread(s), {isa}; core peak {peak:.1f} GFLOP/s ({how}), {threads * peak:.1f} for {threads}")
            sys.stdout.flush()
            subprocess.run([exe, str(threads)], check=False)
    return 0


# The peak is this process's VmHWM (kB) where Linux has it: ru_maxrss keeps, across exec, the peak of the forked
# copy of the parent, so after the XNNPACK bench had loaded its twelve programs both runtimes read 1.5 GB here.
RSS_CODE = r"""
import resource, sys, numpy as np
def peak_kb():
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
from executorch.extension.pybindings import portable_lib as pl
x = np.load(sys.argv[2])["in0"]
before = peak_kb()
m = pl._load_for_executorch(sys.argv[1])
if sys.argv[3] == "torch":
    import torch
    x = torch.from_numpy(x)
for _ in range(3):
    m.forward([x])
print(before, peak_kb())
"""


def rss(pl, name="mobilenet_v2"):
    zoo_dir = pathlib.Path(os.environ.get("ETRT_BENCH_ZOO", "/tmp/etrt-bench-zoo"))
    pte, npz = zoo_dir / f"{name}_xnnpack.pte", zoo_dir / f"{name}_xnnpack.npz"
    print(f"== peak RSS of loading {name} lowered to XNNPACK and running it 3 times (fresh process each;"
          f" after imports -> at the end)")
    if not pte.exists():
        print(f"  {pte} missing: run bench/run.py xnnpack once to export it")
        return 1
    figures = {}
    for who, py in (("ours", sys.executable), ("upstream", str(UPSTREAM_PY))):
        if who == "upstream" and not UPSTREAM_PY.exists():
            continue
        r = subprocess.run([py, "-c", RSS_CODE, str(pte), str(npz), "torch" if who == "upstream" else "numpy"],
                           capture_output=True, text=True, cwd=tempfile.gettempdir())
        if r.returncode != 0:
            print(f"  {who}: failed: {r.stderr.strip()[-200:]}")
            continue
        before, after = (int(v) for v in r.stdout.split()[-2:])
        figures[who] = (before, after)
        print(f"  {who:8s} {before / 1024:7.1f} MiB after imports -> {after / 1024:7.1f} MiB peak"
              f"  (+{(after - before) / 1024:.1f} MiB for the model)")
    if len(figures) == 2:
        o, u = figures["ours"], figures["upstream"]
        print(f"  ratio ours / upstream: peak {o[1] / u[1]:.2f}, model's share {(o[1] - o[0]) / max(u[1] - u[0], 1):.2f}")
    return 0


def overhead(rounds=5):
    print(f"== Python-boundary overhead: forward() on add.pte f32[2,3] ({rounds} rounds, ours and upstream alternating;"
          " best batch of 200 calls per figure; each ratio is the median over rounds of ours / upstream within the round)")
    code = r"""
import os, sys, json
sys.path.insert(0, %r)
import numpy as np
from timing import best_seconds
from executorch.extension.pybindings import portable_lib as pl
m = pl._load_for_executorch(%r)
x = np.ones((2, 3), np.float32); y = np.ones((2, 3), np.float32); buf = np.empty_like(x)
r = {"mode": pl._output_mode,
     "clone": best_seconds(lambda: m.forward([x, y])),
     "borrow": best_seconds(lambda: m.forward([x, y], clone_outputs=False)),
     "np_add": best_seconds(lambda: np.add(x, y, out=buf))}
try:
    import torch
    tx, ty = torch.ones(2, 3), torch.ones(2, 3)
    r["torch_in_clone"] = best_seconds(lambda: m.forward([tx, ty]))
    r["torch_in_borrow"] = best_seconds(lambda: m.forward([tx, ty], clone_outputs=False))
except ImportError:
    pass
print(json.dumps(r))
""" % (str(HERE), str(FIXTURES / "add.pte"))
    spec = [{"name": "clone", "pte": str(FIXTURES / "add.pte"), "method": "forward",
             "npz": str(FIXTURES / "add.npz"), "inputs": [["tensor", "in0"], ["tensor", "in1"]], "clone": True, "timing": "best"},
            {"name": "borrow", "pte": str(FIXTURES / "add.pte"), "method": "forward",
             "npz": str(FIXTURES / "add.npz"), "inputs": [["tensor", "in0"], ["tensor", "in1"]], "clone": False, "timing": "best"}]
    # A shared VM's speed drifts over seconds; comparing each of our measurements with upstream's from the same
    # round, and taking the median over rounds, keeps that drift out of the ratio.
    per_round = []
    for _ in range(rounds):
        ours = {}
        for mode in ("executorch", "torch"):
            env = dict(os.environ, EXECUTORCH_PYBINDINGS_TENSOR_OUTPUT=mode)
            r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                               cwd=tempfile.gettempdir())
            if r.returncode != 0:
                print(f"  {mode} mode unavailable: {r.stderr.strip().splitlines()[-1][:100]}")
                continue
            res = json.loads(r.stdout.strip().splitlines()[-1])
            ours[res["mode"]] = res
        per_round.append((ours, run_upstream(spec) or {}))
    # Upstream takes torch tensors only (and returns torch tensors); its time is the reference for every input and
    # output kind here: the seed's targets are torch in/out <= 0.5x and numpy in/ExecuTorchResult out <= 0.25x.
    for mode in ("executorch", "torch"):
        for kind in ("clone", "borrow", "torch_in_clone", "torch_in_borrow"):
            times = [o[mode][kind] for o, _ in per_round if kind in o.get(mode, {})]
            if not times:
                continue
            ref = "clone" if kind.endswith("clone") else "borrow"
            inputs = "torch" if kind.startswith("torch") else "numpy"
            name = f"{inputs} in, {mode} out, clone={ref == 'clone'}"
            ours_t = statistics.median(times)
            np_t = statistics.median(o[mode]["np_add"] for o, _ in per_round if mode in o)
            row(name, ours_t, np_t, "np.add(out=)")
            ratios = [o[mode][kind] / u[ref] for o, u in per_round
                      if kind in o.get(mode, {}) and isinstance(u.get(ref), float)]
            if ratios:
                up_t = statistics.median(u[ref] for _, u in per_round if isinstance(u.get(ref), float))
                print(f"  {name:28s} ours {ours_t * 1e6:7.2f} us   upstream (torch in) {up_t * 1e6:7.2f} us   "
                      f"ratio {statistics.median(ratios):5.2f} (rounds {min(ratios):.2f}-{max(ratios):.2f})")


def main():
    os.chdir(tempfile.gettempdir())  # import the installed package, not the checkout
    from executorch.extension.pybindings import portable_lib as pl
    if sys.argv[1:] == ["overhead"]:
        overhead()
        return 0
    if sys.argv[1:] == ["xnnpack"]:
        xnnpack(pl)
        return 0
    if sys.argv[1:] == ["llm"]:
        llm(pl)
        return 0
    if sys.argv[1:] == ["gemm"]:
        return gemm(pl)
    if sys.argv[1:] == ["rss"]:
        return rss(pl)
    if sys.argv[1:] == ["gemm_shapes"]:
        return gemm_shapes(pl)
    if sys.argv[1:] == ["portable"]:
        kernels(pl)
        zoo(pl)
        return 0
    kernels(pl)
    zoo(pl)
    llm(pl)
    xnnpack(pl)
    gemm(pl)
    rss(pl)
    overhead()
    return 0


if __name__ == "__main__":
    sys.exit(main())
