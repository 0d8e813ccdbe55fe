"""Programs with symbolic sizes (tests/fixtures/dynamic, made by tools/export/export_dynamic_fixtures.py with the
real exporter): shape arithmetic (aten::sym_size.int, executorch_prim::*), et_view and a data-dependent item()
evaluated as the program runs, at several sizes per program, against torch eager's outputs (which upstream's
runtime also matches on these files)."""
import struct

import numpy as np
import pytest

from conftest import FIXTURES, to_numpy

DYNAMIC = FIXTURES.parent / "dynamic"
PROGRAMS = ["sym_reshape", "sym_arith", "item_driven"]


def cases(name):
    z = np.load(DYNAMIC / f"{name}.npz")
    k = 0
    while f"case{k}_in0" in z:
        ins = [z[f"case{k}_in{i}"] for i in range(8) if f"case{k}_in{i}" in z]
        outs = [z[f"case{k}_out{j}"] for j in range(8) if f"case{k}_out{j}" in z]
        yield ins, outs
        k += 1


@pytest.mark.parametrize("name", PROGRAMS)
def test_every_size_matches_eager(portable_lib, name):
    m = portable_lib._load_for_executorch(str(DYNAMIC / f"{name}.pte"))
    seen = set()
    for ins, want in cases(name):
        got = m.forward([np.array(x, order="C") for x in ins])  # (ascontiguousarray makes 0-d arrays 1-d)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            g = to_numpy(g)
            assert g.shape == w.shape, (name, [x.shape for x in ins], g.shape, w.shape)
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
        seen.add(tuple(x.shape for x in ins))
    assert len(seen) >= 3  # the sizes really changed between calls


def test_torch_inputs_and_program_api(portable_lib):
    torch = pytest.importorskip("torch")
    method = portable_lib._load_program(str(DYNAMIC / "sym_reshape.pte")).load_method("forward")
    for ins, want in cases("sym_reshape"):
        method.set_inputs([torch.from_numpy(ins[0])])
        method.execute()
        np.testing.assert_allclose(to_numpy(method.get_outputs()[0]), want[0], rtol=1e-5, atol=1e-5)


def test_size_beyond_the_exported_bound_is_refused(portable_lib):
    m = portable_lib._load_for_executorch(str(DYNAMIC / "sym_reshape.pte"))
    with pytest.raises(RuntimeError, match="input 0"):
        m.forward([np.ones((17, 6), np.float32)])  # the batch was exported with max=16
    np.testing.assert_allclose(to_numpy(m.forward([np.ones((3, 6), np.float32)])[0]), np.full((6, 3), 3.0))


def test_operators_are_registered(portable_lib):
    names = set(portable_lib._get_operator_names())
    for op in ["aten::sym_size.int", "aten::sym_numel", "aten::_local_scalar_dense", "executorch_prim::add.Scalar",
               "executorch_prim::mul.Scalar", "executorch_prim::floordiv.Scalar", "executorch_prim::mod.Scalar",
               "executorch_prim::et_view.default", "dim_order_ops::_empty_dim_order.out"]:
        assert op in names, op


@pytest.mark.parametrize("name", PROGRAMS)
def test_prim_op_on_a_tensor_is_an_error_naming_the_op(portable_lib, name):
    # Point the first argument of each executorch_prim:: scalar-arithmetic call at the program's input tensor (a
    # Scalar is expected): a clear exception naming the operator, never a crash or a silent result.
    import pte_edit
    data = (DYNAMIC / f"{name}.pte").read_bytes()
    calls = [c for c in pte_edit.kernel_calls(bytearray(data)) 
             if c[0].startswith("executorch_prim::") and c[0].endswith(".Scalar")]
    if not calls:
        pytest.skip(f"{name} has no executorch_prim:: scalar-arithmetic call")
    tensor = pte_edit.plan_inputs(bytearray(data))[0]
    ins = next(cases(name))[0]
    for op, start, _ in calls:
        buf = bytearray(data)
        struct.pack_into("<i", buf, start, tensor)
        with pytest.raises(RuntimeError, match=op.split(".")[0]):
            m = portable_lib._load_for_executorch_from_buffer(bytes(buf))
            m.forward([np.array(x, order="C") for x in ins])
