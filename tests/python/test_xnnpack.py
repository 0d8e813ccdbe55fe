"""Programs lowered with upstream's XnnpackPartitioner (fixtures made by tools/export/export_xnnpack_fixtures.py)
run on the "XnnpackBackend" delegate, which executes the XNNPACK subgraph with the portable kernels, and match
torch eager. A corrupt payload is a RuntimeError at load (or run), never a crash."""
import json
import re
import struct

import numpy as np
import pytest

from conftest import ROOT, to_numpy

XNN = ROOT / "tests" / "fixtures" / "xnnpack"
MANIFEST = json.loads((XNN / "manifest.json").read_text())
FIXTURE_LIST = MANIFEST["fixtures"]


def load_case(fx):
    z = np.load(XNN / fx["npz"])
    ins = [np.ascontiguousarray(z[k]) for k in sorted((k for k in z.files if k.startswith("in")), key=lambda k: int(k[2:]))]
    outs = [z[k] for k in sorted((k for k in z.files if k.startswith("out")), key=lambda k: int(k[3:]))]
    return ins, outs


def test_backend_registered(portable_lib):
    assert "XnnpackBackend" in portable_lib._get_registered_backend_names()
    assert portable_lib._is_available("XnnpackBackend")


@pytest.mark.parametrize("fx", FIXTURE_LIST, ids=[f["name"] for f in FIXTURE_LIST])
def test_fixture_matches_eager(portable_lib, fx):
    assert "XnnpackBackend" in fx["delegates"]
    m = portable_lib._load_for_executorch(str(XNN / fx["pte"]))
    inputs, expected = load_case(fx)
    kept = [x.copy() for x in inputs]
    for _ in range(2):  # a second call reuses the delegate's buffers
        outs = m.forward(inputs)
        assert len(outs) == len(expected)
        for got, exp in zip(outs, expected):
            g = to_numpy(got)
            assert g.shape == exp.shape, (g.shape, exp.shape)
            if exp.dtype.kind == "f":
                np.testing.assert_allclose(g, exp, rtol=fx["tolerance"]["rtol"], atol=fx["tolerance"]["atol"])
            else:
                np.testing.assert_array_equal(g, exp)
    # The delegate reads its inputs in place (xnn_reshaped_inputs' reshapes: Note [xnnpack borrowed input]) and
    # must never write them.
    for x, k in zip(inputs, kept):
        np.testing.assert_array_equal(x, k)


_WINOGRAD_RUN = """
import sys, numpy as np
from executorch.extension.pybindings import portable_lib
z = np.load(sys.argv[1])
m = portable_lib._load_for_executorch(sys.argv[2])
np.save(sys.argv[3], np.asarray(m.forward([np.ascontiguousarray(z["in0"])])[0]))
"""


def test_winograd_setting_keeps_the_fixture_within_tolerance(tmp_path):
    """xnn_winograd's 3x3 layers run F(4x4, 3x3) and F(2x2, 3x3) by default; ETRT_WINOGRAD=2 keeps to F(2x2) and
    =0 runs the direct GEMM. All three match eager; the direct run differs from the default in its rounding (so the
    default did run a transform)."""
    import os
    import subprocess
    import sys

    fx = next(f for f in FIXTURE_LIST if f["name"] == "xnn_winograd")
    _, expected = load_case(fx)
    outs = {}
    for setting in ("default", "2", "0"):
        env = {k: v for k, v in os.environ.items() if k != "ETRT_WINOGRAD"}
        if setting != "default":
            env["ETRT_WINOGRAD"] = setting
        out = tmp_path / f"{setting}.npy"
        r = subprocess.run([sys.executable, "-c", _WINOGRAD_RUN, str(XNN / fx["npz"]), str(XNN / fx["pte"]), str(out)],
                           env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr[-2000:]
        outs[setting] = np.load(out)
        np.testing.assert_allclose(outs[setting], expected[0], rtol=fx["tolerance"]["rtol"], atol=fx["tolerance"]["atol"],
                                   err_msg=f"ETRT_WINOGRAD={setting}")
    assert not np.array_equal(outs["default"], outs["0"])
    assert not np.array_equal(outs["2"], outs["0"])


def _payload_start(data: bytes) -> int:
    at = data.find(b"XH00")
    assert at >= 4
    return at - 4


def _try_run(portable_lib, data: bytes, inputs):
    """Loads and runs; returns None on success or the RuntimeError text."""
    try:
        m = portable_lib._load_for_executorch_from_buffer(data)
        m.forward(inputs)
    except RuntimeError as e:
        return str(e)
    return None


@pytest.mark.parametrize("field,value", [
    ("magic", b"XH01"),
    ("fb_size", 0),
    ("fb_size", 0x7FFFFFFF),
    ("fb_offset", 0x7FFFFFF0),
    ("const_size", 1 << 40),
])
def test_corrupt_header_is_load_error(portable_lib, field, value):
    data = bytearray((XNN / "xnn_mlp.pte").read_bytes())
    p = _payload_start(bytes(data))
    if field == "magic":
        data[p + 4:p + 8] = value
    elif field == "fb_offset":
        data[p + 10:p + 14] = struct.pack("<I", value)
    elif field == "fb_size":
        data[p + 14:p + 18] = struct.pack("<I", value)
    else:
        data[p + 22:p + 30] = struct.pack("<Q", value)
    # Methods load on first use: the delegate's init runs then.
    err = _try_run(portable_lib, bytes(data), load_case(FIXTURE_LIST_BY_NAME["xnn_mlp"])[0])
    assert err is not None and "XNNPACK" in err, err


def test_truncated_flatbuffer_is_load_error(portable_lib):
    data = bytearray((XNN / "xnn_cnn.pte").read_bytes())
    p = _payload_start(bytes(data))
    fb_size = struct.unpack("<I", bytes(data[p + 14:p + 18]))[0]
    for keep in (8, fb_size // 3, fb_size // 2, fb_size - 16):
        d = bytearray(data)
        # A flatbuffer that claims fewer bytes: every offset past the cut must be caught.
        d[p + 14:p + 18] = struct.pack("<I", keep)
        err = _try_run(portable_lib, bytes(d), load_case(FIXTURE_LIST_BY_NAME["xnn_cnn"])[0])
        assert err is not None, keep


FIXTURE_LIST_BY_NAME = {f["name"]: f for f in FIXTURE_LIST}


@pytest.mark.parametrize("name", ["xnn_mlp", "xnn_cnn", "xnn_elementwise"])
def test_byte_flips_never_crash(portable_lib, name):
    data = (XNN / f"{name}.pte").read_bytes()
    p = _payload_start(data)
    fb_off, fb_size = struct.unpack("<II", data[p + 10:p + 18])
    inputs, _ = load_case(FIXTURE_LIST_BY_NAME[name])
    rng = np.random.default_rng(7)
    errors = 0
    positions = rng.integers(p + fb_off, p + fb_off + fb_size, size=120)
    for pos in positions:
        d = bytearray(data)
        d[pos] ^= int(rng.integers(1, 256))
        if _try_run(portable_lib, bytes(d), inputs) is not None:
            errors += 1
    assert errors > 0  # flips in offsets and ids are caught; others may change values only


def test_a_value_turned_quantized_is_refused(portable_lib):
    # Turn a value's union type into XNNQuantizedTensorValue (2): its table is not one, a clear load error.
    data = bytearray((XNN / "xnn_mlp.pte").read_bytes())
    p = _payload_start(bytes(data))
    err = None
    # The XValue union type bytes are 1 (XNNTensorValue); flip candidates until the loader names the quantized kind.
    fb_off, fb_size = struct.unpack("<II", bytes(data[p + 10:p + 18]))
    for pos in range(p + fb_off, p + fb_off + fb_size):
        if data[pos] != 1:
            continue
        d = bytearray(data)
        d[pos] = 2
        e = _try_run(portable_lib, bytes(d), load_case(FIXTURE_LIST_BY_NAME["xnn_mlp"])[0])
        if e is not None and "quantized" in e:
            err = e
            break
    assert err is not None and "quantized" in err


def test_unknown_node_kind_is_named(portable_lib):
    # Every node kind of the 1.5.1 schema runs here; turn a node's union type (XNNFullyConnected, 2) into 48, one past
    # the schema's last kind (XNNCos): the load error names the node and says its kind is unknown.
    data = bytearray((XNN / "xnn_mlp.pte").read_bytes())
    p = _payload_start(bytes(data))
    fb_off, fb_size = struct.unpack("<II", bytes(data[p + 10:p + 18]))
    inputs = load_case(FIXTURE_LIST_BY_NAME["xnn_mlp"])[0]
    err = None
    for pos in range(p + fb_off, p + fb_off + fb_size):
        if data[pos] != 2:
            continue
        d = bytearray(data)
        d[pos] = 48
        e = _try_run(portable_lib, bytes(d), inputs)
        if e is not None and "unknown node kind 48" in e:
            err = e
            break
    assert err is not None and re.search(r"XNNPACK node \d+ has unknown node kind 48", err), err
