"""A pure NumPy interpreter of an ECU1 payload: the reference the exported payloads are checked against.

`run(payload, inputs)` takes the delegate's inputs as logical (row-major over the sizes) arrays, runs every
node in float64 from float32 operands (bool operands stay bool), rounds each node's outputs to their value's dtype
(float32 or bool), and returns the outputs as logical arrays of those dtypes. dim_order is ignored here: it only says how the runtime lays arguments out in memory.
"""
from __future__ import annotations

import math
from typing import Callable, Dict, List, Sequence, Union

import numpy as np

from .payload import ABSENT, DTYPE_BOOL, Op, Payload

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _gelu(x: np.ndarray, approximate: int) -> np.ndarray:
    if approximate == 1:
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _softmax(x: np.ndarray, dim: int) -> np.ndarray:
    e = np.exp(x - np.max(x, axis=dim, keepdims=True))
    return e / np.sum(e, axis=dim, keepdims=True)


def _layer_norm(x, w, b, eps: float, nd: int):
    axes = tuple(range(x.ndim - nd, x.ndim))
    mean = np.mean(x, axis=axes, keepdims=True)
    var = np.mean((x - mean) ** 2, axis=axes, keepdims=True)
    rstd = 1.0 / np.sqrt(var + eps)
    y = (x - mean) * rstd
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y, mean, rstd


# op -> f(inputs (float64 arrays, None = absent), attrs, output sizes) -> tuple of outputs
_OPS: Dict[Op, Callable] = {
    Op.ADD: lambda i, a, s: (i[0] + a[0] * i[1],),
    Op.SUB: lambda i, a, s: (i[0] - a[0] * i[1],),
    Op.MUL: lambda i, a, s: (i[0] * i[1],),
    Op.DIV: lambda i, a, s: (i[0] / i[1],),
    Op.ADD_SCALAR: lambda i, a, s: (i[0] + a[0],),
    Op.MUL_SCALAR: lambda i, a, s: (i[0] * a[0],),
    Op.RELU: lambda i, a, s: (np.maximum(i[0], 0.0),),
    Op.GELU: lambda i, a, s: (_gelu(i[0], int(a[0])),),
    Op.SIGMOID: lambda i, a, s: (1.0 / (1.0 + np.exp(-i[0])),),
    Op.TANH: lambda i, a, s: (np.tanh(i[0]),),
    Op.EXP: lambda i, a, s: (np.exp(i[0]),),
    Op.NEG: lambda i, a, s: (-i[0],),
    Op.SQRT: lambda i, a, s: (np.sqrt(i[0]),),
    Op.RSQRT: lambda i, a, s: (1.0 / np.sqrt(i[0]),),
    Op.MM: lambda i, a, s: (i[0] @ i[1],),
    Op.ADDMM: lambda i, a, s: (a[0] * i[0] + a[1] * (i[1] @ i[2]),),
    Op.BMM: lambda i, a, s: (np.matmul(i[0], i[1]),),
    Op.SOFTMAX: lambda i, a, s: (_softmax(i[0], int(a[0])),),
    Op.LAYER_NORM: lambda i, a, s: _layer_norm(i[0], i[1], i[2], float(a[0]), int(a[1])),
    Op.COPY: lambda i, a, s: (i[0].reshape(s[0]),),
    Op.PERMUTE: lambda i, a, s: (np.transpose(i[0], [int(d) for d in a]),),
    Op.EXPAND: lambda i, a, s: (np.broadcast_to(i[0], s[0]),),
    Op.SELECT: lambda i, a, s: (np.take(i[0], int(a[1]), axis=int(a[0])),),
    # float32 == float32(s): the operand is an exact float32 in float64, so this is torch's float comparison.
    Op.EQ_SCALAR: lambda i, a, s: (i[0] == np.float64(np.float32(a[0])),),
    Op.LOGICAL_NOT: lambda i, a, s: (np.logical_not(i[0]),),
    Op.ANY: lambda i, a, s: (_any(i[0], int(a[0]), int(a[1])),),
    Op.FULL: lambda i, a, s: (np.full(s[0], float(a[0])),),
    Op.WHERE: lambda i, a, s: (np.where(i[0], i[1], i[2]),),
}


def _any(x: np.ndarray, dim: int, keepdim: int) -> np.ndarray:
    if x.ndim == 0:
        return np.asarray(bool(x))
    return np.any(x, axis=dim, keepdims=bool(keepdim))


def _dtype(p: Payload, vid: int):
    return np.bool_ if p.values[vid].dtype == DTYPE_BOOL else np.float32


def run(payload: Union[bytes, Payload], inputs: Sequence[np.ndarray]) -> List[np.ndarray]:
    p = payload if isinstance(payload, Payload) else Payload.from_bytes(payload)
    if len(inputs) != len(p.inputs):
        raise ValueError(f"payload takes {len(p.inputs)} inputs, got {len(inputs)}")
    env: Dict[int, np.ndarray] = {}
    for k, (vid, x) in enumerate(zip(p.inputs, inputs)):
        x = np.asarray(x)
        if tuple(x.shape) != p.values[vid].sizes:
            raise ValueError(f"input {k}: shape {list(x.shape)} != payload sizes {list(p.values[vid].sizes)}")
        env[vid] = x.astype(_dtype(p, vid))
    for vid, v in enumerate(p.values):
        if v.data is not None:
            env[vid] = v.data
    for j, n in enumerate(p.nodes):
        ins = [None if i == ABSENT else env[i] if env[i].dtype == np.bool_ else env[i].astype(np.float64)
               for i in n.inputs]
        sizes = [p.values[o].sizes for o in n.outputs]
        outs = _OPS[n.op](ins, n.attrs, sizes)
        for o, r, s in zip(n.outputs, outs, sizes):
            r = np.asarray(r)
            if tuple(r.shape) != s:
                raise ValueError(f"node {j} ({n.op.name}): computed sizes {list(r.shape)} != value {o} sizes {list(s)}")
            env[o] = np.array(r, dtype=_dtype(p, o), order="C")
    return [env[o].copy() for o in p.outputs]
