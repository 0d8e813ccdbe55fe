#!/usr/bin/env python3
"""Makes XNNPACK payloads for the node kinds the 1.5.1 exporter defines in its schema but never emits
(XNNScaledDotProductAttention, XNNArgMaxPooling2d), with the wheel's own XNNPACK serializer, and their expected
outputs. tests/cpp/test_xnnpack_nodes.cpp runs them through the XNNPACK executor.

Run with the export venv:
    .venv-export/bin/python tools/export/make_xnnpack_node_payloads.py [--out tests/fixtures/xnnpack_nodes]

Writes NAME.bin (the delegate payload, header included) and NAME.npz (x0.. inputs, y0.. outputs in external-id
order). External ids: inputs first, then outputs. Also blockwise_group_5_of_32.bin, a payload the runtime must
refuse (4-bit blockwise weights whose group size does not divide the input channels).

Semantics (XNNPACK's subgraph definitions):
- SDPA: query [*, H, T, C]; key/value [*, H, U, C|D] or, multi-query, [*, U, C|D]; scale [C] multiplies the query
  channel-wise; mask [T, U] is added to the logits; output [*, H, T, D] = softmax(q*scale @ k^T + mask) @ v.
  Expected values from torch (float64).
- ArgMax pooling: NHWC, the stride equals the pooling size, the input is padded top/left/bottom/right; each output
  holds the window's maximum and its position in the window. XNNPACK reads a padded position as the nearest input
  element (its indirection buffer clamps coordinates), numbers positions column by column (x * pooling_height + y)
  and keeps the first of equal maxima. Expected values from a direct Python rendering of that definition; an
  unpadded case is also checked against torch's max_pool2d values.
"""
from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np
import torch
from executorch.backends.xnnpack.serialization.xnnpack_graph_schema import (
    ConstantDataOffset,
    PerChannelGroupQuant,
    XNNArgMaxPooling2d,
    XNNDatatype,
    XNNFullyConnected,
    XNNGraph,
    XNNQuantizedTensorValue,
    XNNScaledDotProductAttention,
    XNNTensorValue,
    XNode,
    XValue,
)
from executorch.backends.xnnpack.serialization.xnnpack_graph_serialize import serialize_xnnpack_binary

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXT_IN, EXT_OUT = 1, 2


class Builder:
    def __init__(self):
        self.values: list[XValue] = []
        self.constants = [ConstantDataOffset(offset=0, size=0)]  # index 0 means "not a constant"
        self.blob = bytearray()
        self.inputs: list[int] = []
        self.outputs: list[int] = []

    def _add(self, dims, dtype, cidx=0, ext=0, flags=0) -> int:
        vid = len(self.values)
        self.values.append(XValue(xvalue_union=XNNTensorValue(
            datatype=dtype, num_dims=len(dims), dims=list(dims), constant_buffer_idx=cidx, external_id=ext,
            flags=flags, id_out=vid)))
        return vid

    def input(self, dims) -> int:
        vid = self._add(dims, XNNDatatype.xnn_datatype_fp32, ext=len(self.inputs), flags=EXT_IN)
        self.inputs.append(vid)
        return vid

    def output(self, dims, dtype=XNNDatatype.xnn_datatype_fp32) -> int:
        vid = self._add(dims, dtype, flags=EXT_OUT)
        self.outputs.append(vid)
        return vid

    def constant(self, array: np.ndarray) -> int:
        data = np.ascontiguousarray(array, dtype=np.float32).tobytes()
        while len(self.blob) % 64:
            self.blob.append(0)
        self.constants.append(ConstantDataOffset(offset=len(self.blob), size=len(data)))
        self.blob += data
        return self._add(array.shape, XNNDatatype.xnn_datatype_fp32, cidx=len(self.constants) - 1)

    def payload(self, nodes) -> bytes:
        # Output external ids follow the inputs'.
        for k, vid in enumerate(self.outputs):
            self.values[vid].xvalue_union.external_id = len(self.inputs) + k
        g = XNNGraph(version="0", xnodes=[XNode(xnode_union=n, debug_handle=i) for i, n in enumerate(nodes)],
                     xvalues=self.values, num_externs=len(self.inputs) + len(self.outputs), input_ids=self.inputs,
                     output_ids=self.outputs, constant_data=self.constants)
        return serialize_xnnpack_binary(g, self.blob)


def sdpa_reference(q, k, v, scale, mask):
    q, k, v, scale, mask = (torch.from_numpy(np.asarray(a, dtype=np.float64)) for a in (q, k, v, scale, mask))
    if k.dim() == q.dim() - 1:  # multi-query: one head shared by all
        k, v = k.unsqueeze(-3), v.unsqueeze(-3)
    logits = (q * scale) @ k.transpose(-1, -2) + mask
    return (torch.softmax(logits, dim=-1) @ v).numpy().astype(np.float32)


def make_sdpa(rng, multi_query: bool, mask_is_input: bool):
    batch, heads, t, u, c, d = (2, 3, 4, 5, 8, 6) if multi_query else (1, 2, 3, 5, 4, 6)
    q = rng.standard_normal((batch, heads, t, c)).astype(np.float32)
    kv_batch = (batch,) if multi_query else (batch, heads)
    k = rng.standard_normal((*kv_batch, u, c)).astype(np.float32)
    v = rng.standard_normal((*kv_batch, u, d)).astype(np.float32)
    scale = (1.0 / np.sqrt(c) * (1.0 + 0.25 * rng.standard_normal(c))).astype(np.float32)
    mask = np.where(np.arange(u)[None, :] > np.arange(t)[:, None] + (u - t), -np.inf, 0.0).astype(np.float32)
    mask += (0.1 * rng.standard_normal((t, u))).astype(np.float32)
    b = Builder()
    ids = [b.input(q.shape), b.input(k.shape), b.input(v.shape), b.constant(scale)]
    inputs = [q, k, v]
    if mask_is_input:
        ids.append(b.input(mask.shape))
        inputs.append(mask)
    else:
        ids.append(b.constant(mask))
    out = b.output((batch, heads, t, d))
    node = XNNScaledDotProductAttention(query_id=ids[0], key_id=ids[1], value_id=ids[2], scale_id=ids[3],
                                        mask_id=ids[4], output_id=out, flags=0)
    return b.payload([node]), inputs, [sdpa_reference(q, k, v, scale, mask)]


def argmax_reference(x, pads, pool):
    """XNNPACK's argmax pooling, written out: pads = (top, right, bottom, left), pool = (height, width)."""
    top, right, bottom, left = pads
    ph, pw = pool
    n, h, w, c = x.shape
    oh, ow = (h + top + bottom) // ph, (w + left + right) // pw
    values = np.zeros((n, oh, ow, c), np.float32)
    index = np.zeros((n, oh, ow, c), np.int32)
    for b in range(n):
        for oy in range(oh):
            for ox in range(ow):
                for ch in range(c):
                    best, at = None, 0
                    for px in range(pw):  # positions are numbered column by column
                        for py in range(ph):
                            iy = min(max(oy * ph + py - top, 0), h - 1)
                            ix = min(max(ox * pw + px - left, 0), w - 1)
                            val = x[b, iy, ix, ch]
                            k = px * ph + py
                            if best is None or val > best:
                                best, at = val, k
                    values[b, oy, ox, ch], index[b, oy, ox, ch] = best, at
    return values, index


def make_argmax(rng, pads, pool, shape):
    x = rng.integers(-6, 7, size=shape).astype(np.float32)  # small integers: equal maxima are common
    values, index = argmax_reference(x, pads, pool)
    if not any(pads):
        t = torch.nn.functional.max_pool2d(torch.from_numpy(x).permute(0, 3, 1, 2), pool, stride=pool)
        assert np.array_equal(t.permute(0, 2, 3, 1).numpy(), values)
    b = Builder()
    xid = b.input(x.shape)
    vid = b.output(values.shape)
    iid = b.output(index.shape, XNNDatatype.xnn_datatype_int32)
    node = XNNArgMaxPooling2d(padding_top=pads[0], padding_right=pads[1], padding_bottom=pads[2],
                              padding_left=pads[3], pooling_height=pool[0], pooling_width=pool[1], input_id=xid,
                              output_value_id=vid, output_index_id=iid, flags=0)
    return b.payload([node]), [x], [values, index]


def make_bad_blockwise(out_features: int, in_features: int, group_size: int) -> bytes:
    """A linear layer with 4-bit blockwise (qbint4) weights whose group size does not divide the input channels:
    the runtime must refuse it at load, naming the value and both numbers. No expected outputs."""
    b = Builder()
    xid = b.input((1, in_features))
    weights = bytes(range(out_features * in_features // 2))  # two 4-bit values per byte
    while len(b.blob) % 64:
        b.blob.append(0)
    b.constants.append(ConstantDataOffset(offset=len(b.blob), size=len(weights)))
    b.blob += weights
    n_scales = out_features * -(-in_features // group_size)
    fid = len(b.values)
    b.values.append(XValue(xvalue_union=XNNQuantizedTensorValue(
        tensor_value=XNNTensorValue(datatype=XNNDatatype.xnn_datatype_qbint4, num_dims=2,
                                    dims=[out_features, in_features], constant_buffer_idx=len(b.constants) - 1,
                                    external_id=0, flags=0, id_out=fid),
        quant_params=PerChannelGroupQuant(scale=[0.125] * n_scales, channel_dim=0, group_size=group_size,
                                          scale_buffer_idx=0, num_scales=n_scales))))
    oid = b.output((1, out_features))
    node = XNNFullyConnected(input1_id=xid, filter_id=fid, bias_id=0xFFFFFFFF, output_id=oid, flags=0)  # no bias
    return b.payload([node])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "tests/fixtures/xnnpack_nodes"))
    out = pathlib.Path(ap.parse_args().out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(20261201)
    cases = {
        "sdpa_multi_head": make_sdpa(rng, multi_query=False, mask_is_input=False),
        "sdpa_multi_query": make_sdpa(rng, multi_query=True, mask_is_input=True),
        "argmax_pool_2x2": make_argmax(rng, (0, 0, 0, 0), (2, 2), (2, 4, 6, 3)),
        "argmax_pool_padded": make_argmax(rng, (1, 1, 0, 2), (2, 3), (1, 5, 6, 2)),
    }
    # Refused payloads (no .npz): the C++ test expects the load error.
    (out / "blockwise_group_5_of_32.bin").write_bytes(make_bad_blockwise(4, 32, 5))
    for name, (payload, inputs, outputs) in cases.items():
        (out / f"{name}.bin").write_bytes(payload)
        arrays = {f"x{i}": a for i, a in enumerate(inputs)}
        arrays.update({f"y{i}": a.astype(np.float32) for i, a in enumerate(outputs)})  # the C++ reader takes <f4
        np.savez(out / f"{name}.npz", **arrays)
        print(name, len(payload), "bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
