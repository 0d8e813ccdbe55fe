"""Input protocols: every kind, mixed in one call, and their error messages."""
import array

import numpy as np
import pytest

from conftest import FIXTURES, to_numpy, torch_available


def add_module(portable_lib):
    return portable_lib._load_for_executorch(str(FIXTURES / "add.pte"))


def test_mixed_protocols_in_one_call(portable_lib):
    m = portable_lib._load_for_executorch(str(FIXTURES / "add_mul.pte"))
    x = np.arange(4, dtype=np.float32).reshape(2, 2)
    y = np.full((2, 2), 2, np.float32)
    z = np.ones((2, 2), np.float32)
    expected = x * y + z
    capsule = y.__dlpack__()
    as_buffer = memoryview(z)
    out = to_numpy(m.forward([x, capsule, as_buffer])[0])  # NumPy, a raw DLPack capsule and a memoryview
    np.testing.assert_allclose(out, expected)
    if torch_available():
        import torch
        out = to_numpy(m.forward([torch.from_numpy(x), np.from_dlpack(y), array.array("f", z.ravel())
                                  if False else z])[0])
        np.testing.assert_allclose(out, expected)


def test_dlpack_producer_objects(portable_lib):
    class Producer:  # any object with __dlpack__ / __dlpack_device__
        def __init__(self, arr):
            self.arr = arr

        def __dlpack__(self, **kwargs):
            return self.arr.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self.arr.__dlpack_device__()

    m = add_module(portable_lib)
    x = np.ones((2, 3), np.float32)
    out = to_numpy(m.forward([Producer(x), Producer(2 * x)])[0])
    np.testing.assert_array_equal(out, 3 * x)


def test_versioned_capsule_is_consumed(portable_lib):
    m = add_module(portable_lib)
    x = np.ones((2, 3), np.float32)
    cap = x.__dlpack__(max_version=(1, 0))
    m.forward([cap, x])
    with pytest.raises(RuntimeError, match="input 0: this DLPack capsule was already consumed"):
        m.forward([cap, x])


def test_complex_numpy_is_read_as_complex(portable_lib):
    m = add_module(portable_lib)
    c = np.ones((2, 3), np.complex64)
    with pytest.raises(RuntimeError, match="input 0 expected dtype float32, got complex64"):
        m.forward([c, np.ones((2, 3), np.float32)])


def test_numpy_array_is_one_input_not_a_sequence(portable_lib, corpus):
    m = portable_lib._load_for_executorch(str(corpus / "arduino_add_model.pte"))
    out = m.forward(np.array([1, 2, 3], np.float32))  # not three scalar inputs
    assert to_numpy(out[0]).tolist() == [2, 3, 4]


def test_read_only_buffer_input(portable_lib):
    m = portable_lib._load_for_executorch(str(FIXTURES / "add_no_input_planning.pte"))
    x = np.ones((2, 3), np.float32)
    x.setflags(write=False)
    out = to_numpy(m.forward([x, x])[0])
    np.testing.assert_array_equal(out, 2 * np.ones((2, 3)))
    b = bytes(np.ones((2, 3), np.float32).tobytes())
    with pytest.raises(RuntimeError, match=r"input 0 expected dtype float32, got uint8 .*got uint8\[24\]"):
        m.forward([b, x])  # raw bytes are uint8[24]; only bfloat16 inputs take the method's shape


def test_scalar_inputs_must_match_export(portable_lib):
    m = portable_lib._load_for_executorch(str(FIXTURES / "scalar_inputs.pte"))
    z = np.load(FIXTURES / "scalar_inputs.npz")
    x = np.ascontiguousarray(z["in0"])
    out = to_numpy(m.forward([x, int(z["in1"]), float(z["in2"])])[0])
    np.testing.assert_allclose(out, z["out0"], rtol=1e-5, atol=1e-6)
    with pytest.raises(RuntimeError, match="input 1 was exported as the constant 3; got 4"):
        m.forward([x, 4, float(z["in2"])])
    with pytest.raises(RuntimeError, match="input 1 expected Int, got a tensor"):
        m.forward([x, x, float(z["in2"])])


def test_plan_execute_reuses_the_last_inputs(portable_lib):
    m = add_module(portable_lib)
    x = np.ones((2, 3), np.float32)
    m.forward([x, 2 * x])
    out = to_numpy(m.plan_execute("forward")[0])
    np.testing.assert_array_equal(out, 3 * x)


@pytest.mark.skipif(not torch_available(), reason="torch not installed or blocked")
def test_torch_tensor_inputs_read_through_attributes(portable_lib):
    import torch
    m = add_module(portable_lib)
    a = torch.ones(2, 3, requires_grad=True)  # read through data_ptr(): no autograd involvement
    b = torch.full((2, 3), 2.0)
    np.testing.assert_array_equal(to_numpy(m.forward([a, b])[0]), np.full((2, 3), 3.0))
    with pytest.raises(RuntimeError, match="input 1 expected dtype float32, got float64"):
        m.forward([a, b.double()])
    with pytest.raises(RuntimeError, match="device meta"):
        m.forward([a, torch.empty(2, 3, device="meta")])


def test_unusable_buffer_falls_back_to_dlpack_and_names_both_reasons(portable_lib):
    # A structured array: its buffer format is no tensor dtype, so __dlpack__ is tried next; NumPy refuses that too,
    # and the message carries both reasons (a bfloat16 array of ml_dtypes or JAX takes the same path and succeeds).
    m = portable_lib._load_for_executorch(str(FIXTURES / "add.pte"))
    x = np.ones((2, 3), np.float32)
    structured = np.zeros((2, 3), dtype=[("a", "<f4")])
    with pytest.raises(RuntimeError) as caught:
        m.forward([structured, x])
    message = str(caught.value)
    assert "input 0" in message and "unsupported buffer format" in message and "__dlpack__ failed too" in message
    np.testing.assert_allclose(to_numpy(m.forward([x, x])[0]), 2 * x)
