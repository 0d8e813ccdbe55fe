"""Every corpus file runs from Python with the expected outputs of its MANIFEST entry."""
import numpy as np
import pytest

from conftest import to_numpy


def test_add(portable_lib, corpus):
    m = portable_lib._load_for_executorch(str(corpus / "add.pte"))
    for a, b, c in [(1, 1, 2), (2, 3, 5), (13.25, 29.25, 42.5), (1, 2, 3), (3, 4, 7)]:
        out = m.forward([np.array([a], np.float32), np.array([b], np.float32)])
        assert to_numpy(out[0]).tolist() == [c]
    meta = m.method_meta("forward")
    assert meta.num_inputs() == 2 and meta.num_outputs() == 1
    assert repr(meta.input_tensor_meta(0)) == "TensorInfo(sizes=[1], dtype=Float, is_memory_planned=True, nbytes=4)"


def test_add_one_input_fails(portable_lib, corpus):
    m = portable_lib._load_for_executorch(str(corpus / "add.pte"))
    with pytest.raises(RuntimeError, match="expects 2 inputs, got 1"):
        m.forward([np.array([1], np.float32)])


def test_arduino_constant_segment(portable_lib, corpus):
    m = portable_lib._load_for_executorch(str(corpus / "arduino_add_model.pte"))
    assert to_numpy(m.forward([np.array([1, 2, 3], np.float32)])[0]).tolist() == [2, 3, 4]


def test_module_linear_constant_buffer(portable_lib, corpus):
    m = portable_lib._load_for_executorch(str(corpus / "ModuleLinear-no-constant-segment.pte"))
    out = m.forward([np.array([[1, 2], [3, 4]], np.float32)])
    np.testing.assert_array_equal(to_numpy(out[0]), [[5, 8], [11, 14]])
    np.testing.assert_array_equal(to_numpy(m.forward([np.zeros((2, 2), np.float32)])[0]), np.full((2, 2), 2))


@pytest.mark.parametrize("x,expected", [([1, 2], 1.5), ([2, 3], 2.5), ([0, 0], np.float32(1.1)),
                                        ([-1, 1], np.float32(1.1)), ([-3, 3.5], 0.25)])
def test_module_model_constant_buffer(portable_lib, corpus, x, expected):
    m = portable_lib._load_for_executorch(str(corpus / "module_model_constant_buffer.pte"))
    out = to_numpy(m.forward([np.array([x], np.float32)])[0])
    np.testing.assert_allclose(out, [expected], rtol=1e-5)
    assert m.method_names() == ["forward"]


def test_softmax(portable_lib, corpus):
    m = portable_lib._load_for_executorch(str(corpus / "softmax.pte"))
    out = to_numpy(m.forward([np.zeros((2, 4096), np.float32)])[0])
    np.testing.assert_allclose(out, 1 / 4096, rtol=1e-5)
    i = np.arange(8192)
    x = ((((37 * i) % 101) - 50) / 8).astype(np.float32).reshape(2, 4096)
    y = to_numpy(m.forward([x])[0]).astype(np.float64)
    np.testing.assert_allclose(y.sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose((y * np.arange(4096)).sum(axis=1), [2047.289042, 2045.733386], rtol=1e-5)
    np.testing.assert_allclose(y[1, :4], [7.18381034e-06, 0.00073276856, 2.45816466e-07, 2.50739613e-05], rtol=1e-5)


def test_maxpool2d(portable_lib, corpus):
    m = portable_lib._load_for_executorch(str(corpus / "maxpool2d.pte"))
    x = np.arange(802816, dtype=np.float32).reshape(1, 64, 112, 112)
    y = to_numpy(m.forward([x])[0])
    c, i, j = np.meshgrid(np.arange(64), np.arange(56), np.arange(56), indexing="ij")
    np.testing.assert_array_equal(y[0], 12544 * c + 224 * i + 2 * j + 113)
    n = np.arange(802816, dtype=np.uint64)
    xb = ((7919 * n) % 1009).astype(np.float32).reshape(1, 64, 112, 112)
    yb = to_numpy(m.forward([xb])[0])
    assert yb[0, 0, 0, :8].tolist() == [873, 873, 567, 964, 964, 658, 352, 902]
    assert yb.min() == 177 and int((yb == 1008).sum()) == 1789
    assert yb.astype(np.float64).sum() == 154470561


def test_bundled_program_all_cases(portable_lib, corpus):
    b = portable_lib._load_bundled_program_from_buffer((corpus / "bundled_program.bpte").read_bytes())
    for i in range(10):
        out = b.verify_result_with_bundled_expected_output("forward", i)
        np.testing.assert_array_equal(to_numpy(out[0]), [[2, 2], [2, 2]])
    with pytest.raises(RuntimeError, match="out of range"):
        b.verify_result_with_bundled_expected_output("forward", 10)
    m = portable_lib._load_for_executorch_from_bundled_program(b)
    out = m.forward([np.array([[1, 2], [3, 4]], np.int32), np.array([[10, 20], [30, 40]], np.int32)])
    np.testing.assert_array_equal(to_numpy(out[0]), [[15, 28], [41, 54]])


def test_xor_needs_ptd_and_trains_in_place(portable_lib, corpus):
    m = portable_lib._load_for_executorch(str(corpus / "xor.pte"))
    assert m.run_method("__et_training_gradients_index_forward") == [2]
    assert m.run_method("__et_training_parameters_index_forward") == [6]
    assert m.run_method("__et_training_fqn_forward") == [
        "net.linear.weight", "net.linear.bias", "net.linear2.weight", "net.linear2.bias"]
    with pytest.raises(RuntimeError, match="external data"):
        m.forward([np.array([[1, 0]], np.float32), np.array([1], np.int64)])
    m = portable_lib._load_for_executorch(str(corpus / "xor.pte"), data_path=str(corpus / "xor.ptd"))
    out = m.forward([np.array([[1, 0]], np.float32), np.array([1], np.int64)])
    assert abs(float(to_numpy(out[0])) - 0.683540) < 1e-5
    assert to_numpy(out[1]).tolist() == [1]
    np.testing.assert_allclose(to_numpy(out[5]), [0.495173, -0.495173], atol=1e-5)
    # The parameters are arena storage: an SGD step through a borrowed view is seen by the next execute.
    params = m.forward([np.array([[1, 0]], np.float32), np.array([1], np.int64)], clone_outputs=False)
    w1 = to_numpy(params[6]).copy()
    for _ in range(300):
        for x, y in [([0, 0], 0), ([0, 1], 1), ([1, 0], 1), ([1, 1], 0)]:
            outs = m.forward([np.array([x], np.float32), np.array([y], np.int64)], clone_outputs=False)
            for g, p in zip(outs[2:6], outs[6:10]):
                pa = to_numpy(p) if not hasattr(p, "detach") else p.detach().numpy()
                pa -= 0.5 * to_numpy(g)
    assert not np.array_equal(w1, to_numpy(outs[6]))
    losses = [float(to_numpy(m.forward([np.array([x], np.float32), np.array([y], np.int64)])[0]))
              for x, y in [([0, 0], 0), ([0, 1], 1), ([1, 0], 1), ([1, 1], 0)]]
    assert max(losses) < 0.1, losses
