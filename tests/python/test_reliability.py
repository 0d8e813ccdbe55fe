"""Regression tests for inputs and files that crashed, exhausted memory or hit undefined behaviour.

Each test reproduces one finding of the reliability review with a small input written here. Anything that could
kill the interpreter runs in a child process, so a crash is a failed test instead of a dead test run.
"""
import os
import pathlib
import resource
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pte_edit
from conftest import FIXTURES, to_numpy


def run_child(code, timeout=120):
    """Runs `code` in a fresh interpreter (same output mode as this run); returns (exit code, stdout + stderr)."""
    prelude = "import os, sys\nif os.environ.get('ETRT_TEST_BLOCK_TORCH') == '1':\n    sys.modules['torch'] = None\n"
    p = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], capture_output=True, text=True,
                       timeout=timeout, cwd=pathlib.Path(__file__).parent)
    return p.returncode, p.stdout + p.stderr


# ---- 1. all-or-nothing input binding --------------------------------------------------------------------------------

def test_rejected_input_unbinds_the_earlier_ones(portable_lib):
    """An unplanned input aliases the caller's array; when a later input is refused, the earlier one must not stay
    bound to an array the bindings release (a use-after-free on the next execute)."""
    program = portable_lib._load_program(str(FIXTURES / "add_no_input_planning.pte"))
    method = program.load_method("forward")
    good = np.ones((2, 3), np.float32)
    with pytest.raises(RuntimeError, match="input 1 expected dtype float32"):
        method.set_inputs([np.ones((2, 3), np.float32), np.ones((2, 3), np.int64)])
    with pytest.raises(RuntimeError, match="input 0 has not been set"):
        method.execute()
    method.set_inputs([good, good])
    method.execute()
    np.testing.assert_array_equal(to_numpy(method.get_outputs()[0]), 2 * good)


def test_forward_failure_leaves_no_dangling_input(portable_lib):
    code = """
    import gc
    import numpy as np
    from executorch.extension.pybindings import portable_lib as pl
    m = pl._load_program(sys.argv[1] if len(sys.argv) > 1 else %r).load_method("forward")
    for _ in range(60):  # gc.collect() with torch loaded is slow on a busy machine: keep the child well in time
        try:
            m.call([np.full((2, 3), 7, np.float32), np.ones((2, 3), np.int64)])
        except RuntimeError:
            pass
        gc.collect()
        junk = [np.full((2, 3), 1e30, np.float32) for _ in range(50)]  # reuse the freed memory
        try:
            m.execute()
            print("EXECUTED")
        except RuntimeError as e:
            assert "has not been set" in str(e), e
    print("ok")
    """ % str(FIXTURES / "add_no_input_planning.pte")
    rc, out = run_child(code, timeout=600)
    assert rc == 0, out
    assert "EXECUTED" not in out and out.strip().endswith("ok"), out


# ---- 2. only real torch tensors take the torch path ------------------------------------------------------------------

def test_torch_lookalike_is_not_dereferenced(portable_lib):
    code = """
    import numpy as np
    from executorch.extension.pybindings import portable_lib as pl
    class Fake:
        shape = (2, 3)
        dtype = "torch.float32"
        class device:
            type = "cpu"
            index = None
        def data_ptr(self):
            return 16  # an address nobody owns
        def stride(self):
            return (3, 1)
    m = pl._load_for_executorch(%r)
    for inputs in ([Fake(), Fake()], Fake()):
        try:
            m.forward(inputs)
            print("ACCEPTED")
        except (RuntimeError, TypeError) as e:
            print("refused:", e)
    print("ok")
    """ % str(FIXTURES / "add.pte")
    rc, out = run_child(code)
    assert rc == 0, out
    assert "ACCEPTED" not in out and "unsupported Python type" in out, out


def test_torch_tensor_still_takes_the_torch_path(portable_lib):
    torch = pytest.importorskip("torch")
    m = portable_lib._load_for_executorch(str(FIXTURES / "add.pte"))
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    np.testing.assert_array_equal(to_numpy(m.forward([x, x])[0]), 2 * x.numpy())
    # A subclass is a tensor too.
    p = torch.nn.Parameter(x.clone(), requires_grad=False)
    np.testing.assert_array_equal(to_numpy(m.forward([p, x])[0]), 2 * x.numpy())


# ---- 4. arena sizes are not believed ---------------------------------------------------------------------------------

def _max_rss_mb_of_child(code):
    rc, out = run_child(textwrap.dedent(code) +
                        "\nimport resource\nprint('RSS', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    assert rc == 0, out
    return int(out.rsplit("RSS", 1)[1].split()[0]) / 1024, out


def test_huge_declared_arena_allocates_only_what_tensors_need(portable_lib, tmp_path):
    data = bytearray((FIXTURES / "add.pte").read_bytes())
    assert pte_edit.arena_sizes(data) == [0, 96]
    pte_edit.set_arena_size(data, 1, 16 << 30)  # 16 GiB declared for 88 bytes of tensors
    path = tmp_path / "add_16g.pte"
    path.write_bytes(bytes(data))
    code = """
    import numpy as np
    from executorch.extension.pybindings import portable_lib as pl
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))  # a 16 GiB arena cannot even be reserved
    m = pl._load_for_executorch(%r)
    x = np.ones((2, 3), np.float32)
    print("sum", float(np.asarray(m.forward([x, x])[0]).sum()))
    """ % str(path)
    rss, out = _max_rss_mb_of_child(code)
    assert "sum 12.0" in out, out
    assert rss < 2048, out


def test_max_planned_bytes_refuses_a_larger_plan(portable_lib):
    path = str(FIXTURES / "mlp.pte")
    with pytest.raises(RuntimeError, match=r"planned buffers need 2816 bytes, over the load option's cap of 1000"):
        portable_lib._load_for_executorch(path, max_planned_bytes=1000).forward([np.ones((4, 16), np.float32)])
    with pytest.raises(RuntimeError, match=r"over the load option's cap"):
        portable_lib._load_program(path, max_planned_bytes=1000).load_method("forward")
    data = (FIXTURES / "mlp.pte").read_bytes()
    with pytest.raises(RuntimeError, match=r"over the load option's cap"):
        portable_lib._load_for_executorch_from_buffer(data, max_planned_bytes=1000).forward(
            [np.ones((4, 16), np.float32)])
    out = portable_lib._load_for_executorch(path, max_planned_bytes=2816).forward([np.ones((4, 16), np.float32)])
    assert to_numpy(out[0]).shape == (4, 8) or to_numpy(out[0]).size > 0


# ---- 5. misaligned planned offsets -----------------------------------------------------------------------------------

def test_misaligned_planned_offset_is_refused(portable_lib):
    data = bytearray((FIXTURES / "add.pte").read_bytes())
    value, _, alloc = next((v, t, a) for v, t, a in pte_edit.planned_tensors(data)
                           if a.field_pos(pte_edit.ALLOC_OFFSET_LOW) is not None)
    pos = alloc.field_pos(pte_edit.ALLOC_OFFSET_LOW)
    data[pos] += 1  # 64 -> 65 or 32 -> 33: not a multiple of 4
    m = portable_lib._load_for_executorch_from_buffer(bytes(data))
    with pytest.raises(RuntimeError, match=rf"value {value}: planned offset \d+ is not aligned for float32"):
        m.forward([np.ones((2, 3), np.float32)] * 2)


# ---- 8. a mapped file changed on disk --------------------------------------------------------------------------------

def test_truncated_mapped_file_is_an_error_not_sigbus(portable_lib, tmp_path):
    src = FIXTURES / "mlp.pte"
    code = """
    import numpy as np
    from executorch.extension.pybindings import portable_lib as pl
    path = VICTIM
    m = pl._load_for_executorch(path, mmap=True)
    x = np.ones((4, 16), np.float32)
    m.forward([x])
    with open(path, "r+b") as f:
        f.truncate(64)
    for call in (lambda: m.forward([x]), lambda: m.method_meta("forward"),
                 lambda: pl._load_program(path, mmap=True)):
        try:
            call()
            print("NO ERROR")
        except RuntimeError as e:
            print("error:", e)
    path = VICTIM2
    p = pl._load_program(path, mmap=True)
    with open(path, "wb") as f:
        pass
    try:
        p.load_method("forward")
        print("NO ERROR")
    except RuntimeError as e:
        print("error:", e)
    print("ok")
    """
    victim = tmp_path / "mlp.pte"
    victim2 = tmp_path / "mlp2.pte"
    shutil.copy(src, victim)
    shutil.copy(src, victim2)
    rc, out = run_child(code.replace("VICTIM2", repr(str(victim2))).replace("VICTIM", repr(str(victim))))
    assert rc == 0, out
    assert "NO ERROR" not in out, out
    assert "changed size on disk since it was loaded" in out, out


def test_overwritten_mapped_file_is_refused_and_mmap_false_is_immune(portable_lib, tmp_path):
    path = tmp_path / "add.pte"
    shutil.copy(FIXTURES / "add.pte", path)
    mapped = portable_lib._load_for_executorch(str(path), mmap=True)
    copied = portable_lib._load_for_executorch(str(path), mmap=False)
    small_default = portable_lib._load_for_executorch(str(path))  # a small file is read into memory
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(to_numpy(mapped.forward([x, x])[0]), 2 * x)
    # Same size, new contents: rewrite in place (new modification time).
    data = path.read_bytes()
    st = os.stat(path)
    with open(path, "r+b") as f:
        f.write(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    with pytest.raises(RuntimeError, match="was modified on disk since it was loaded"):
        mapped.forward([x, x])
    np.testing.assert_array_equal(to_numpy(copied.forward([x, x])[0]), 2 * x)
    np.testing.assert_array_equal(to_numpy(small_default.forward([x, x])[0]), 2 * x)
    path.unlink()
    np.testing.assert_array_equal(to_numpy(copied.forward([x, x])[0]), 2 * x)


# ---- 7. data-driven undefined behaviour ------------------------------------------------------------------------------

def test_nan_and_inf_inputs_run(portable_lib):
    m = portable_lib._load_for_executorch(str(FIXTURES / "softmax_last.pte"))
    x = np.zeros((3, 10), np.float32)
    x[0, 0] = np.nan
    x[1, :] = np.inf
    x[2, 3] = -np.inf
    out = to_numpy(m.forward([x])[0])
    assert np.isnan(out[0]).all()
    assert np.isfinite(out[2]).all()


def test_int64_overflow_wraps_like_torch(portable_lib):
    m = portable_lib._load_for_executorch(str(FIXTURES / "int_ops.pte"))
    a = np.array([2**31 - 1, -2**31, 5, 0], np.int32)
    b = np.array([2**63 - 1, -2**63, 2**62, -1], np.int64)
    m.forward([a, b])  # wraps (two's complement), never undefined behaviour; UBSan checks it in the C++ suite


RELIABILITY = FIXTURES.parent / "reliability"


def test_bool_input_with_bytes_other_than_0_or_1_is_refused(portable_lib):
    z = np.load(RELIABILITY / "bool_mask.npz")
    m = portable_lib._load_for_executorch(str(RELIABILITY / "bool_mask.pte"))
    out = m.forward([z["in0"], z["in1"], z["in2"]])
    np.testing.assert_allclose(to_numpy(out[0]), z["out0"], rtol=1e-6)
    bad = z["in0"].view(np.uint8).copy()
    bad[0, 0] = 2
    with pytest.raises(RuntimeError, match="input 0 is a bool tensor holding bytes other than 0 and 1"):
        m.forward([bad.view(np.bool_), z["in1"], z["in2"]])
    np.testing.assert_allclose(to_numpy(m.forward([z["in0"], z["in1"], z["in2"]])[0]), z["out0"], rtol=1e-6)


def test_plan_that_lets_float_bytes_reach_a_bool_mask_fails_the_call(portable_lib):
    """A fuzz finding (tests/fuzz/regressions/ubsan-bool-load-logical-not.pte): a plan overlapping a bool tensor with
    a float one made a kernel load the byte 107 as a C++ bool (undefined behaviour). Here mean_where's mask (written
    by eq, read by where) is moved onto the float that the second mean writes in between, so `where` would read
    float bytes as bools; the call fails naming the value and the byte instead."""
    data = bytearray((FIXTURES / "mean_where.pte").read_bytes())
    tensors = pte_edit.planned_tensors(data)
    mask_value, _, mask = next((v, t, a) for v, t, a in tensors if t.scalar(pte_edit.TENSOR_SCALAR_TYPE, "<b") == 11)
    x = np.full((3, 4), 1.5, np.float32)  # every mean is 1.5: bytes 00 00 c0 3f
    z = np.load(FIXTURES / "mean_where.npz")
    m = portable_lib._load_for_executorch_from_buffer(bytes(data))
    np.testing.assert_allclose(to_numpy(m.forward([z["in0"]])[0]), z["out0"], rtol=1e-6)
    struct_offset = mask.field_pos(pte_edit.ALLOC_OFFSET_LOW)
    floats_at = [a.scalar(pte_edit.ALLOC_OFFSET_LOW, "<I") for v, t, a in tensors
                 if t.scalar(pte_edit.TENSOR_SCALAR_TYPE, "<b") == 6 and v not in (0, mask_value)]
    data[struct_offset:struct_offset + 4] = int(floats_at[0]).to_bytes(4, "little")
    m = portable_lib._load_for_executorch_from_buffer(bytes(data))
    with pytest.raises(RuntimeError, match=rf"where.self_out\): bool value {mask_value} holds the byte 192 at element 2"):
        m.forward([x])


def test_program_with_external_data(portable_lib, tmp_path):
    z = np.load(RELIABILITY / "program_data.npz")
    pte, ptd = RELIABILITY / "program_data.pte", RELIABILITY / "program_data.ptd"
    for mmap in (True, False, None):
        m = portable_lib._load_for_executorch(str(pte), data_path=str(ptd), mmap=mmap)
        np.testing.assert_allclose(to_numpy(m.forward([z["in0"]])[0]), z["out0"], rtol=1e-5, atol=1e-6)
    with pytest.raises(RuntimeError, match="external data"):
        portable_lib._load_for_executorch(str(pte)).forward([z["in0"]])
    # A data buffer that is not a .ptd: as upstream, the program loads (data is read lazily) and the first method
    # load fails, naming the data file; a method without the data never sees the bad buffer.
    bad = portable_lib._load_for_executorch_from_buffer(pte.read_bytes(), b"invalid bytes")
    for _ in range(2):
        with pytest.raises(RuntimeError, match=r"external data \(\.ptd\) cannot be read"):
            bad.forward([z["in0"]])
    (tmp_path / "zeros.ptd").write_bytes(b"\0" * 64)
    program = portable_lib._load_program(str(pte), data_path=str(tmp_path / "zeros.ptd"))
    with pytest.raises(RuntimeError, match=r"external data \(\.ptd\) cannot be read"):
        program.load_method("forward")
    # The data file changed on disk after loading: an error, not different weights.
    copy = tmp_path / "program_data.ptd"
    shutil.copy(ptd, copy)
    m = portable_lib._load_for_executorch(str(pte), data_path=str(copy), mmap=True)
    m.forward([z["in0"]])
    with open(copy, "r+b") as f:
        f.truncate(100)
    with pytest.raises(RuntimeError, match="changed size on disk"):
        m.forward([z["in0"]])


MEMORY_CHILD = r"""
import json, resource, sys
import numpy as np
from executorch.extension.pybindings import portable_lib as pl
pl._set_log_level("off")  # the hostile files' load errors would interleave with the JSON result
def rss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
warm = pl._load_for_executorch_from_buffer(open(sys.argv[1], "rb").read())  # code paths and allocator warmed
results = []
for path in sys.argv[2:]:
    data = open(path, "rb").read()
    base = rss()
    need = len(data)
    try:
        m = pl._load_for_executorch_from_buffer(data)
        for name in m.method_names():
            meta = m.method_meta(name)
            need += sum(meta.memory_planned_buffer_sizes())
            inputs = []
            for i in range(meta.num_inputs()):
                t = meta.input_tensor_meta(i)
                inputs.append(np.zeros(t.sizes(), {0: np.uint8, 1: np.int8, 3: np.int32, 4: np.int64,
                                                   5: np.float16, 6: np.float32, 7: np.float64,
                                                   11: np.bool_}.get(t.dtype(), np.float32)))
                need += inputs[-1].nbytes
            try:
                m.run_method(name, inputs)
            except RuntimeError:
                pass
    except (RuntimeError, IndexError, TypeError):
        pass
    results.append((path, rss() - base, need))
print(json.dumps(results))
"""


def test_peak_memory_is_bounded_by_what_the_file_declares(portable_lib, tmp_path):
    """Over the fuzz seed corpus, its regressions and hostile edits: peak RSS growth <= 1.2x (planned arenas +
    file bytes, which bound the constants and delegate payloads, + inputs) + 16 MB."""
    files = sorted(FIXTURES.glob("*.pte")) + sorted((FIXTURES.parent / "xnnpack").glob("*.pte"))
    files += sorted((FIXTURES.parent / "xnnpack_quantized").glob("*.pte"))
    files += sorted(RELIABILITY.glob("*.pte"))
    files += sorted(p for p in (pathlib.Path(__file__).parents[1] / "fuzz" / "regressions").glob("*") if p.is_file())
    hostile = bytearray((FIXTURES / "mlp.pte").read_bytes())
    pte_edit.set_arena_size(hostile, 1, 1 << 40)
    (tmp_path / "mlp_1tb_arena.pte").write_bytes(bytes(hostile))
    files.append(tmp_path / "mlp_1tb_arena.pte")
    code = "import sys\nsys.argv = " + repr(["x", str(FIXTURES / "add.pte")] + [str(f) for f in files]) + \
        "\n" + MEMORY_CHILD
    rc, out = run_child(code, timeout=600)
    assert rc == 0, out
    import json
    over = [(p, grew, need) for p, grew, need in json.loads(out.strip().splitlines()[-1])
            if grew > 1.2 * need + (16 << 20)]
    assert not over, over
