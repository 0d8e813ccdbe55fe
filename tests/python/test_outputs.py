"""Outputs: ExecuTorchResult (buffer protocol, DLPack) or torch tensors, clone and borrow semantics."""
import ctypes

import numpy as np
import pytest

from conftest import FIXTURES, to_numpy, torch_available


def load(portable_lib, name):
    return portable_lib._load_for_executorch(str(FIXTURES / name))


def test_output_type_follows_mode(portable_lib):
    m = load(portable_lib, "add.pte")
    out = m.forward([np.ones((2, 3), np.float32), np.ones((2, 3), np.float32)])[0]
    if portable_lib._output_mode == "torch":
        import torch
        assert isinstance(out, torch.Tensor)
        assert out.dtype == torch.float32 and tuple(out.shape) == (2, 3)
    else:
        assert type(out).__name__ == "ExecuTorchResult"
        assert out.dtype_name == "float32" and out.shape == (2, 3) and out.device == "cpu"


def test_result_buffer_is_zero_copy(portable_lib):
    from executorch.extension.pybindings.portable_lib import ExecuTorchResult  # noqa: F401
    m = load(portable_lib, "add.pte")
    outs = m.forward([np.ones((2, 3), np.float32), np.ones((2, 3), np.float32)])
    if portable_lib._output_mode == "torch":
        pytest.skip("torch output mode")
    r = outs[0]
    a = np.asarray(r)
    b = np.asarray(r)
    assert a.ctypes.data == b.ctypes.data  # the same storage, no copy
    cap = r.__dlpack__()
    assert np.from_dlpack(r).ctypes.data == a.ctypes.data
    assert np.from_dlpack(r, copy=False).ctypes.data == a.ctypes.data
    del cap


def test_clone_outputs_survive_later_runs(portable_lib):
    m = load(portable_lib, "add.pte")
    ones = np.ones((2, 3), np.float32)
    first = m.forward([ones, ones])[0]
    m.forward([2 * ones, 2 * ones])
    assert to_numpy(first).tolist() == [[2.0] * 3] * 2


def test_borrowed_output_keeps_module_alive(portable_lib):
    m = load(portable_lib, "add.pte")
    ones = np.ones((2, 3), np.float32)
    borrowed = m.forward([ones, ones], clone_outputs=False)[0]
    del m
    import gc
    gc.collect()
    arr = borrowed.numpy() if portable_lib._output_mode == "torch" else np.asarray(borrowed)
    assert arr.tolist() == [[2.0] * 3] * 2


def test_unplanned_output_returned_without_copy(portable_lib):
    if portable_lib._output_mode == "torch":
        pytest.skip("pointer identity is checked on ExecuTorchResult")
    m = load(portable_lib, "add_no_output_planning.pte")
    assert not m.method_meta("forward").output_tensor_meta(0).is_memory_planned()
    ones = np.ones((2, 3), np.float32)
    a = m.forward([ones, ones])[0]
    b = m.forward([ones, ones])[0]
    assert np.asarray(a).ctypes.data != np.asarray(b).ctypes.data  # each call gets fresh storage
    np.testing.assert_array_equal(np.asarray(a), 2 * ones)


def test_input_aliasing_only_without_input_planning(portable_lib):
    planned = load(portable_lib, "add.pte")
    unplanned = load(portable_lib, "add_no_input_planning.pte")
    assert planned.method_meta("forward").input_tensor_meta(0).is_memory_planned()
    assert not unplanned.method_meta("forward").input_tensor_meta(0).is_memory_planned()
    x = np.ones((2, 3), np.float32)
    y = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(np.asarray(unplanned.forward([x, y])[0] if portable_lib._output_mode != "torch"
                                             else unplanned.forward([x, y])[0].numpy()), 2 * x)


def test_buffer_protocol_inputs(portable_lib, corpus):
    import array
    m = portable_lib._load_for_executorch(str(corpus / "arduino_add_model.pte"))
    for x in [array.array("f", [1, 2, 3]), (ctypes.c_float * 3)(1, 2, 3), memoryview(np.array([1, 2, 3], np.float32))]:
        out = m.forward(x)
        got = out[0].numpy() if portable_lib._output_mode == "torch" else np.asarray(out[0])
        assert got.tolist() == [2, 3, 4]


def test_dlpack_capsule_consumed_once(portable_lib, corpus):
    m = portable_lib._load_for_executorch(str(corpus / "arduino_add_model.pte"))
    cap = np.array([1, 2, 3], np.float32).__dlpack__()
    m.forward([cap])
    with pytest.raises(RuntimeError, match="already consumed"):
        m.forward([cap])


@pytest.mark.skipif(not torch_available(), reason="torch not installed or blocked")
def test_torch_inputs(portable_lib, corpus):
    import torch
    m = portable_lib._load_for_executorch(str(corpus / "arduino_add_model.pte"))
    out = m.forward(torch.tensor([1.0, 2.0, 3.0]))
    got = out[0].numpy() if portable_lib._output_mode == "torch" else np.asarray(out[0])
    assert got.tolist() == [2, 3, 4]
    m2 = portable_lib._load_for_executorch(str(corpus / "ModuleLinear-no-constant-segment.pte"))
    t = torch.tensor([[1.0, 3.0], [2.0, 4.0]]).t()  # non-contiguous: torch copies it into the exported layout
    out = m2.forward([t])[0]
    got = out.numpy() if portable_lib._output_mode == "torch" else np.asarray(out)
    np.testing.assert_array_equal(got, 3 * t.numpy() + 2)
