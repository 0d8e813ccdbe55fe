"""Bad inputs raise exceptions that name the problem (and the input index), never abort the process."""
import numpy as np
import pytest


def test_bad_path(portable_lib, tmp_path):
    with pytest.raises(RuntimeError, match="cannot open .*missing.pte"):
        portable_lib._load_for_executorch(str(tmp_path / "missing.pte"))


def test_bad_bytes(portable_lib):
    with pytest.raises(RuntimeError, match="not an ExecuTorch program"):
        portable_lib._load_for_executorch_from_buffer(b"\x00" * 100)
    with pytest.raises(RuntimeError, match="too small"):
        portable_lib._load_for_executorch_from_buffer(b"abc")


def test_not_a_bundle(portable_lib):
    with pytest.raises(RuntimeError, match="not a bundled program"):
        portable_lib._load_bundled_program_from_buffer(b"\x00" * 100)


def test_truncated_files_raise(portable_lib, corpus):
    for name in ["add.pte", "arduino_add_model.pte", "softmax.pte", "bundled_program.bpte", "xor.pte"]:
        data = (corpus / name).read_bytes()
        for n in range(0, len(data), max(1, len(data) // 97)):
            try:
                m = portable_lib._load_for_executorch_from_buffer(data[:n])
                for method in m.method_names():
                    m.method_meta(method)
            except RuntimeError as e:
                assert str(e)


def test_unknown_method(portable_lib, corpus):
    m = portable_lib._load_for_executorch(str(corpus / "add.pte"))
    with pytest.raises(RuntimeError, match="unknown method 'idontexist'"):
        m.run_method("idontexist", [])
    with pytest.raises(RuntimeError, match="unknown method"):
        m.method_meta("idontexist")


def test_wrong_count_dtype_shape(portable_lib, corpus):
    m = portable_lib._load_for_executorch(str(corpus / "add.pte"))
    one = np.array([1], np.float32)
    with pytest.raises(RuntimeError, match="expects 2 inputs, got 3"):
        m.forward([one, one, one])
    with pytest.raises(RuntimeError, match=r"input 1 expected dtype float32, got int64"):
        m.forward([one, np.array([1], np.int64)])
    with pytest.raises(RuntimeError, match=r"input 0 .*shape \[2\] does not match the static shape \[1\]"):
        m.forward([np.array([1, 2], np.float32), one])
    with pytest.raises(RuntimeError, match=r"input 1 expected rank 1"):
        m.forward([one, np.ones((1, 1), np.float32)])
    with pytest.raises(RuntimeError, match=r"input 0: unsupported Python type <class 'dict'>"):
        m.forward([{}, one])
    # The module still works after every failure.
    assert np.asarray(m.forward([one, one])[0]).tolist() == [2.0]


def test_non_dense_input_rejected(portable_lib, corpus):
    m = portable_lib._load_for_executorch(str(corpus / "ModuleLinear-no-constant-segment.pte"))
    x = np.arange(8, dtype=np.float32).reshape(2, 4)[:, ::2]
    with pytest.raises(RuntimeError, match="input 0: .*not dense"):
        m.forward([x])


def test_transposed_input_is_copied_into_layout(portable_lib, corpus):
    m = portable_lib._load_for_executorch(str(corpus / "ModuleLinear-no-constant-segment.pte"))
    x = np.array([[1, 3], [2, 4]], np.float32).T  # dense, transposed
    np.testing.assert_array_equal(np.asarray(m.forward([x])[0]), 3 * x + 2)


def test_tensor_meta_index_error(portable_lib, corpus):
    meta = portable_lib._load_for_executorch(str(corpus / "add.pte")).method_meta("forward")
    with pytest.raises(IndexError, match="Cannot get input tensor meta at 2"):
        meta.input_tensor_meta(2)
