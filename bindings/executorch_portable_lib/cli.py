"""etrt: run, inspect, benchmark and verify ExecuTorch programs from the command line.

    etrt run MODEL.pte [--inputs FILE.npz] [--method M] [--out FILE.npz]
    etrt inspect MODEL.pte                 methods, signatures, operators, delegates, sizes, what is missing here
    etrt bench MODEL.pte [--calls N]       latency percentiles (a progress bar on stderr)
    etrt verify BUNDLE.bpte                every bundled test case of every method
    etrt selective MODEL.pte... -o K.h     a kernel table of only the operators these programs call (C++ embedding)
    etrt config --cflags|--includedir|--pkgconfigdir|--cmakedir

Inputs (run, bench) come from --inputs, an .npz with in0, in1, ... (0-d arrays for int/float/bool inputs), else
random tensors of each input's dtype and shape. bfloat16 inputs, which NumPy lacks, are their uint16 bit patterns
in the .npz and are passed as torch tensors (torch needed only for those). Exit status: 0 on success, 1 on a
failure (the message on stderr), 2 on a usage error.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

SCALAR_TAGS = {"Int": int, "Double": float, "Bool": bool}
BFLOAT16 = 15


class UsageError(Exception):
    pass


def _np():
    import numpy as np

    return np


def _portable_lib():
    from executorch_portable_lib import portable_lib

    return portable_lib


def _numpy_dtype(code: int):
    np = _np()
    table = {0: np.uint8, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.int64, 5: np.float16, 6: np.float32,
             7: np.float64, 11: np.bool_}
    return table.get(code)


def _bfloat16(bits):
    try:
        import torch
    except ImportError:
        raise UsageError("this method takes a bfloat16 input, which NumPy cannot hold: install torch to pass it")
    np = _np()
    return torch.from_numpy(np.ascontiguousarray(bits, dtype=np.uint16).view(np.int16)).view(torch.bfloat16)


def make_inputs(meta, npz_path: str | None, seed: int = 0) -> list:
    """The method's inputs: from the .npz where it has in<i>, else random for tensors (scalars must be given)."""
    np = _np()
    given = np.load(npz_path) if npz_path else None
    rng = np.random.default_rng(seed)
    inputs = []
    for i in range(meta.num_inputs()):
        tag = meta.input_tag(i)
        if given is not None and f"in{i}" in given.files:
            value = given[f"in{i}"]
            if tag in SCALAR_TAGS:
                inputs.append(SCALAR_TAGS[tag](value.item()))
            elif tag == "Tensor" and meta.input_tensor_meta(i).dtype() == BFLOAT16 and value.dtype == np.uint16:
                inputs.append(_bfloat16(value))
            else:
                inputs.append(value)
            continue
        if tag == "None":
            inputs.append(None)
            continue
        if tag != "Tensor":
            raise UsageError(f"input {i} ({tag}) is specialised by the exporter to the value it was exported with: "
                             f"pass it with --inputs FILE.npz (a 0-d array named in{i})")
        info = meta.input_tensor_meta(i)
        sizes = tuple(info.sizes())
        if info.dtype() == BFLOAT16:
            inputs.append(_bfloat16(rng.standard_normal(sizes).astype(np.float32).view(np.uint32) >> 16))
            continue
        dtype = _numpy_dtype(info.dtype())
        if dtype is None:
            raise UsageError(f"input {i} has ScalarType {info.dtype()}, which cannot be made up: pass it with --inputs")
        if np.issubdtype(dtype, np.floating):
            inputs.append(rng.standard_normal(sizes).astype(dtype))
        elif dtype == np.bool_:
            inputs.append(rng.integers(0, 2, sizes).astype(np.bool_))
        else:
            inputs.append(rng.integers(0, 10, sizes).astype(dtype))
    return inputs


def _as_numpy(x):
    """An output as a NumPy array (bfloat16 torch tensors as float32); scalars as 0-d arrays."""
    np = _np()
    if type(x).__module__.startswith("torch"):
        import torch

        return (x.float() if x.dtype == torch.bfloat16 else x).detach().cpu().numpy()
    return np.asarray(x)


def describe(x) -> str:
    if isinstance(x, (bool, int, float)) or x is None:
        return f"{type(x).__name__} {x}"
    try:
        a = _as_numpy(x)
    except (TypeError, ValueError, BufferError) as e:
        return f"{type(x).__name__} (not viewable as a NumPy array: {e})"
    return f"{a.dtype}{list(a.shape)}\n{a}"


def _load(path: str):
    return _portable_lib()._load_for_executorch(path)


def cmd_run(a) -> int:
    module = _load(a.model)
    meta = module.method_meta(a.method)
    inputs = make_inputs(meta, a.inputs)
    outputs = module.run_method(a.method, inputs)
    for i, o in enumerate(outputs):
        print(f"output {i}: {describe(o)}")
    if a.out:
        np = _np()
        np.savez(a.out, **{f"out{i}": _as_numpy(o) for i, o in enumerate(outputs)})
        print(f"wrote {len(outputs)} output(s) to {a.out}")
    return 0


def _program_sizes(data: bytes) -> dict:
    """Segment and constant sizes from the program's flatbuffer (program.fbs: Program.constant_buffer = 2,
    .backend_delegate_data = 3, .segments = 4, .constant_segment = 5; DataSegment.size = 1; Buffer.storage = 0;
    BackendDelegateInlineData.data = 0)."""
    from executorch_portable_lib._gen.pte_operators import Reader

    r = Reader(data, "program")
    root = r.indirect(0)

    def vector_len(table, index):
        p = r.field(table, index)
        return 0 if p is None else r.u32(r.indirect(p))

    def u64(table, index):
        p = r.field(table, index)
        return 0 if p is None else int.from_bytes(data[p:p + 8], "little")

    segments = [u64(t, 1) for t in r.tables(root, 4)]
    inline_constants = sum(vector_len(t, 0) for t in r.tables(root, 2))
    inline_delegates = sum(vector_len(t, 0) for t in r.tables(root, 3))
    return {"segments": segments, "inline constant bytes": inline_constants,
            "inline delegate bytes": inline_delegates}


def cmd_inspect(a) -> int:
    from executorch_portable_lib._gen.pte_operators import operator_names

    pl = _portable_lib()
    with open(a.model, "rb") as f:
        data = f.read()
    print(f"{a.model}: {len(data)} bytes")
    ops = operator_names(data, a.model)
    ours = set(pl._get_operator_names())
    backends_here = set(pl._get_registered_backend_names())
    sizes = _program_sizes(data)
    segs = sizes["segments"]
    print(f"segments: {len(segs)} ({sum(segs)} bytes: {', '.join(str(s) for s in segs) or 'none'}); "
          f"inline constants {sizes['inline constant bytes']} bytes; inline delegate data "
          f"{sizes['inline delegate bytes']} bytes")
    print(f"operators ({len(ops)}): {', '.join(ops) or 'none'}")
    missing_ops = [o for o in ops if o not in ours]
    program = pl._load_program_from_buffer(data)
    missing_backends = set()
    for k in range(program.num_methods()):
        name = program.get_method_name(k)
        meta = program.method_meta(name)
        print(f"method {name}:")
        for kind, n, tag, tmeta in (("input", meta.num_inputs(), meta.input_tag, meta.input_tensor_meta),
                                    ("output", meta.num_outputs(), meta.output_tag, meta.output_tensor_meta)):
            for i in range(n):
                t = tag(i)
                print(f"  {kind} {i}: {tmeta(i) if t == 'Tensor' else t}")
        print(f"  planned memory: {list(meta.memory_planned_buffer_sizes())} bytes; "
              f"instructions: {meta.num_instructions()}")
        backends = list(meta.backends())
        print(f"  delegates: {', '.join(backends) or 'none'}")
        missing_backends.update(b for b in backends if b not in backends_here)
    if missing_ops or missing_backends:
        print("missing here to run it: " + "; ".join(
            ([f"operators {', '.join(missing_ops)}"] if missing_ops else []) +
            ([f"backends {', '.join(sorted(missing_backends))}"] if missing_backends else [])))
        return 1
    print("runs here: every operator and delegate it needs is registered")
    return 0


def _progress(done: int, total: int) -> None:
    if not sys.stderr.isatty() and done not in (total,):
        return
    width = 30
    filled = width * done // max(total, 1)
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
    if done == total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def cmd_bench(a) -> int:
    module = _load(a.model)
    inputs = make_inputs(module.method_meta(a.method), a.inputs)
    for _ in range(a.warmup):
        module.run_method(a.method, inputs, clone_outputs=False)
    times = []
    step = max(1, a.calls // 100)
    for k in range(a.calls):
        t0 = time.perf_counter()
        module.run_method(a.method, inputs, clone_outputs=False)
        times.append(time.perf_counter() - t0)
        if (k + 1) % step == 0 or k + 1 == a.calls:
            _progress(k + 1, a.calls)
    times.sort()

    def pct(p):
        return times[min(len(times) - 1, int(p / 100 * len(times)))] * 1e6

    print(f"{a.model} {a.method}: {a.calls} calls, p50 {pct(50):.1f} us, p90 {pct(90):.1f} us, "
          f"p99 {pct(99):.1f} us, min {times[0] * 1e6:.1f} us, max {times[-1] * 1e6:.1f} us")
    return 0


def cmd_verify(a) -> int:
    pl = _portable_lib()
    with open(a.bundle, "rb") as f:
        bundle = pl._load_bundled_program_from_buffer(f.read())
    failed = 0
    for method, n in bundle._test_case_counts().items():
        for i in range(n):
            try:
                bundle.verify_result_with_bundled_expected_output(method, i, rtol=a.rtol, atol=a.atol)
                print(f"{method} case {i}: ok")
            except RuntimeError as e:
                failed += 1
                print(f"{method} case {i}: FAILED: {e}")
    print("all test cases pass" if not failed else f"{failed} test case(s) failed")
    return 1 if failed else 0


def cmd_selective(a) -> int:
    import subprocess

    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_gen")
    cmd = [sys.executable, os.path.join(here, "generate.py"), "--kernels-header", a.output]
    for m in a.models:
        cmd += ["--only-for", m]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise UsageError((r.stderr or r.stdout).strip())
    print(f"wrote {a.output}: compile with -DETRT_KERNELS_HEADER='\"{os.path.basename(a.output)}\"' and -I its "
          f"directory, or include it in place of <etrt_generated/portable_kernels.h>")
    return 0


def cmd_config(a) -> int:
    import executorch_portable_lib as p

    if a.includedir:
        print(p.get_include())
    if a.pkgconfigdir:
        print(p.get_pkgconfig_dir())
    if a.cmakedir:
        print(p.get_cmake_dir())
    if a.cflags or not (a.includedir or a.pkgconfigdir or a.cmakedir):
        print(f"-std=c++20 -I{p.get_include()}")
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="etrt", description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n".join(__doc__.split("\n")[1:]))
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run a method and print (or save) its outputs")
    r.add_argument("model")
    r.add_argument("--method", default="forward")
    r.add_argument("--inputs", help=".npz with in0, in1, ...")
    r.add_argument("--out", help="write the outputs to this .npz (out0, out1, ...)")
    r.set_defaults(fn=cmd_run)
    i = sub.add_parser("inspect", help="methods, signatures, operators, delegates, sizes, what is missing here")
    i.add_argument("model")
    i.set_defaults(fn=cmd_inspect)
    b = sub.add_parser("bench", help="latency percentiles of a method")
    b.add_argument("model")
    b.add_argument("--method", default="forward")
    b.add_argument("--inputs")
    b.add_argument("--calls", type=int, default=1000)
    b.add_argument("--warmup", type=int, default=20)
    b.set_defaults(fn=cmd_bench)
    v = sub.add_parser("verify", help="run every bundled test case of a .bpte")
    v.add_argument("bundle")
    v.add_argument("--rtol", type=float, default=1e-5)
    v.add_argument("--atol", type=float, default=1e-8)
    v.set_defaults(fn=cmd_verify)
    s = sub.add_parser("selective", help="a kernel table holding only the operators of these programs")
    s.add_argument("models", nargs="+")
    s.add_argument("-o", "--output", required=True)
    s.set_defaults(fn=cmd_selective)
    c = sub.add_parser("config", help="flags and directories for C++ embedding")
    for flag in ("--cflags", "--includedir", "--pkgconfigdir", "--cmakedir"):
        c.add_argument(flag, action="store_true")
    c.set_defaults(fn=cmd_config)
    return p


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    if getattr(a, "calls", 1) < 1:
        print("etrt: --calls must be at least 1", file=sys.stderr)
        return 2
    try:
        return a.fn(a)
    except UsageError as e:
        print(f"etrt {a.command}: {e}", file=sys.stderr)
        return 2
    except (RuntimeError, OSError, ValueError) as e:
        print(f"etrt {a.command}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
