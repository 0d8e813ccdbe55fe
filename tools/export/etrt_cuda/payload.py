"""Writer and reader of the CUDA delegate's payload, format ECU1.

The format is specified in include/etrt/backends/cuda/PAYLOAD.md; this module implements it byte for byte.
`Payload.to_bytes()` validates a payload and serializes it, `Payload.from_bytes()` parses and validates one.
Constants are carried as float32 NumPy arrays (contiguous, row-major over the value's sizes). Values are float32 or
bool (the masks of EQ_SCALAR, LOGICAL_NOT, ANY, FULL and WHERE's condition); constants are float32 only.
"""
from __future__ import annotations

import pathlib
import re
import struct
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

MAGIC = b"ECU1"
VERSION = 1
HEADER_SIZE = 32
CONSTANT_ALIGNMENT = 64
ABSENT = 0xFFFFFFFF          # an absent optional node input
MAX_RANK = 16

DTYPE_FLOAT32 = 6            # ExecuTorch ScalarType codes; the two dtypes version 1 accepts
DTYPE_BOOL = 11
DTYPES = (DTYPE_FLOAT32, DTYPE_BOOL)
FLAG_INPUT = 1
FLAG_OUTPUT = 2
FLAG_CONSTANT = 4


# The op set is the runtime's op table (include/etrt/backends/cuda/op_table.h), read here so that the export side
# and the runtime cannot disagree: code, name, inputs, outputs, attribute kinds ("f" f64, "i" i64, "*" one i64 per
# dimension) and dtypes (inputs ':' outputs; f float32, b bool, ? either, = input 0's dtype) per op.
OP_TABLE = pathlib.Path(__file__).resolve().parents[3] / "include" / "etrt" / "backends" / "cuda" / "op_table.h"
_ENTRY = re.compile(r'^\s*\{(\d+),\s*"(\w+)",\s*(\d+),\s*(\d+),\s*"([fi*]*)",\s*"([fb?=]*:[fb?=]*)",\s*(\d+),')


def _read_op_table() -> List[Tuple[int, str, int, int, str, str, int]]:
    rows = [m.groups() for m in map(_ENTRY.match, OP_TABLE.read_text().splitlines()) if m]
    if not rows:
        raise RuntimeError(f"no op entries found in {OP_TABLE}")
    return [(int(c), name, int(ni), int(no), attrs, dtypes, int(opt)) for c, name, ni, no, attrs, dtypes, opt in rows]


_OPS = _read_op_table()
Op = IntEnum("Op", [(name, code) for code, name, *_ in _OPS])

# op -> (number of inputs, number of outputs, attribute kinds).
OP_SIGNATURE: Dict[Op, Tuple[int, int, str]] = {Op[name]: (ni, no, attrs) for _, name, ni, no, attrs, _, _ in _OPS}

# Per-op dtypes: (input dtypes, output dtype); an input of None takes either dtype; the output None: either,
# "same": input 0's dtype. Ops that are float32 throughout are left out.
F, B = DTYPE_FLOAT32, DTYPE_BOOL
_DTYPE = {"f": F, "b": B, "?": None, "=": "same"}
OP_DTYPES: Dict[Op, Tuple[Tuple[Optional[int], ...], object]] = {}
for _, _name, _, _, _, _dtypes, _ in _OPS:
    _ins, _outs = _dtypes.split(":")
    if set(_ins + _outs) != {"f"}:
        OP_DTYPES[Op[_name]] = (tuple(_DTYPE[c] for c in _ins), _DTYPE[_outs[0]] if _outs else None)
OPTIONAL_INPUTS = {Op[name]: tuple(k for k in range(ni) if opt >> k & 1) for _, name, ni, _, _, _, opt in _OPS if opt}


class PayloadError(ValueError):
    pass


@dataclass
class Value:
    sizes: Tuple[int, ...]
    dim_order: Tuple[int, ...]
    flags: int = 0
    dtype: int = DTYPE_FLOAT32
    data: Optional[np.ndarray] = None   # constants only: float32, shape == sizes

    @property
    def numel(self) -> int:
        return int(np.prod(self.sizes, dtype=np.int64))


@dataclass
class Node:
    op: Op
    inputs: List[int]
    outputs: List[int]
    attrs: List[Union[int, float]] = field(default_factory=list)


def _pad8(n: int) -> int:
    return (n + 7) & ~7


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


@dataclass
class Payload:
    values: List[Value] = field(default_factory=list)
    inputs: List[int] = field(default_factory=list)
    outputs: List[int] = field(default_factory=list)
    nodes: List[Node] = field(default_factory=list)

    # ------------------------------------------------------------------ building
    def add_value(self, sizes: Sequence[int], dim_order: Optional[Sequence[int]] = None,
                  dtype: int = DTYPE_FLOAT32) -> int:
        sizes = tuple(int(s) for s in sizes)
        self.values.append(Value(sizes, tuple(dim_order) if dim_order is not None else tuple(range(len(sizes))),
                                 dtype=dtype))
        return len(self.values) - 1

    def add_constant(self, data: np.ndarray) -> int:
        data = np.array(data, dtype=np.float32, order="C")  # (np.ascontiguousarray would make 0-dim 1-dim)
        self.values.append(Value(tuple(data.shape), tuple(range(data.ndim)), FLAG_CONSTANT, DTYPE_FLOAT32, data))
        return len(self.values) - 1

    def add_node(self, op: Op, inputs: Sequence[int], outputs: Sequence[int],
                 attrs: Sequence[Union[int, float]] = ()) -> None:
        self.nodes.append(Node(Op(op), list(inputs), list(outputs), list(attrs)))

    # ------------------------------------------------------------------ checks
    def validate(self) -> None:
        """Checks every rule of the spec that does not need shape inference."""
        nv = len(self.values)
        for i, v in enumerate(self.values):
            where = f"value {i}"
            if v.dtype not in DTYPES:
                raise PayloadError(f"{where}: dtype {v.dtype} is neither float32 (6) nor bool (11)")
            if v.dtype != DTYPE_FLOAT32 and v.flags & FLAG_CONSTANT:
                raise PayloadError(f"{where}: constants are float32")
            if len(v.sizes) > MAX_RANK:
                raise PayloadError(f"{where}: rank {len(v.sizes)} > {MAX_RANK}")
            if any(s < 0 for s in v.sizes):
                raise PayloadError(f"{where}: negative size in {v.sizes}")
            if sorted(v.dim_order) != list(range(len(v.sizes))):
                raise PayloadError(f"{where}: dim_order {v.dim_order} is not a permutation of 0..{len(v.sizes) - 1}")
            if v.flags & ~(FLAG_INPUT | FLAG_OUTPUT | FLAG_CONSTANT):
                raise PayloadError(f"{where}: unknown flags {v.flags:#x}")
            is_const = bool(v.flags & FLAG_CONSTANT)
            if is_const and v.flags & (FLAG_INPUT | FLAG_OUTPUT):
                raise PayloadError(f"{where}: a constant cannot be an input or an output")
            if (v.flags & FLAG_INPUT) and (v.flags & FLAG_OUTPUT):
                raise PayloadError(f"{where}: a value is both input and output only through a COPY node")
            if is_const != (v.data is not None):
                raise PayloadError(f"{where}: constant flag and data disagree")
            if is_const and (v.data.dtype != np.float32 or tuple(v.data.shape) != v.sizes):
                raise PayloadError(f"{where}: constant data {v.data.dtype}{list(v.data.shape)} != float32{list(v.sizes)}")
        for kind, ids, flag in (("input", self.inputs, FLAG_INPUT), ("output", self.outputs, FLAG_OUTPUT)):
            if len(set(ids)) != len(ids):
                raise PayloadError(f"{kind}s list a value twice: {ids}")
            for vid in ids:
                if not 0 <= vid < nv:
                    raise PayloadError(f"{kind} value id {vid} out of range ({nv} values)")
            flagged = [i for i, v in enumerate(self.values) if v.flags & flag]
            if sorted(flagged) != sorted(ids):
                raise PayloadError(f"values flagged {kind} {flagged} != {kind} list {ids}")
        written = {i for i, v in enumerate(self.values) if v.flags & (FLAG_INPUT | FLAG_CONSTANT)}
        for n_i, n in enumerate(self.nodes):
            where = f"node {n_i} ({n.op.name})"
            n_in, n_out, kinds = OP_SIGNATURE[n.op]
            if len(n.inputs) != n_in or len(n.outputs) != n_out:
                raise PayloadError(f"{where}: {len(n.inputs)} inputs/{len(n.outputs)} outputs, expected {n_in}/{n_out}")
            for k, vid in enumerate(n.inputs):
                if vid == ABSENT:
                    if k not in OPTIONAL_INPUTS.get(n.op, ()):
                        raise PayloadError(f"{where}: input {k} is not optional")
                    continue
                if not 0 <= vid < nv:
                    raise PayloadError(f"{where}: input value id {vid} out of range")
                if vid not in written:
                    raise PayloadError(f"{where}: input value {vid} is read before it is written")
            for vid in n.outputs:
                if not 0 <= vid < nv:
                    raise PayloadError(f"{where}: output value id {vid} out of range")
                if vid in written:
                    raise PayloadError(f"{where}: output value {vid} is already written (or is an input/constant)")
                written.add(vid)
            expected_attrs = len(self.values[n.outputs[0]].sizes) if kinds == "*" else len(kinds)
            if len(n.attrs) != expected_attrs:
                raise PayloadError(f"{where}: {len(n.attrs)} attributes, expected {expected_attrs}")
            self._check_dtypes(where, n)
        for vid in self.outputs:
            if vid not in written or self.values[vid].flags & FLAG_INPUT:
                raise PayloadError(f"output value {vid} is not written by a node")

    def _check_dtypes(self, where: str, n: Node) -> None:
        ins, out = OP_DTYPES.get(n.op, ((F,) * len(n.inputs), F))
        got_in = [None if vid == ABSENT else self.values[vid].dtype for vid in n.inputs]
        for k, (want, got) in enumerate(zip(ins, got_in)):
            if want is not None and got is not None and got != want:
                raise PayloadError(f"{where}: input {k} has dtype {got}, expected {want}")
        outs = [self.values[vid].dtype for vid in n.outputs]
        want_out = got_in[0] if out == "same" else out
        for k, got in enumerate(outs):
            if want_out is None:
                if n.op == Op.FULL and got == B and float(n.attrs[0]) not in (0.0, 1.0):
                    raise PayloadError(f"{where}: value {n.attrs[0]} does not fit a bool output")
            elif got != want_out:
                raise PayloadError(f"{where}: output {k} has dtype {got}, expected {want_out}")

    # ------------------------------------------------------------------ writing
    def to_bytes(self) -> bytes:
        self.validate()
        body = bytearray()
        # Constants: each 64-aligned from constants_offset, laid out in value order.
        const_offsets: Dict[int, int] = {}
        const_blob = bytearray()
        for i, v in enumerate(self.values):
            if v.flags & FLAG_CONSTANT:
                const_blob += b"\0" * (_align(len(const_blob), CONSTANT_ALIGNMENT) - len(const_blob))
                const_offsets[i] = len(const_blob)
                const_blob += v.data.astype("<f4", copy=False).tobytes()
        for i, v in enumerate(self.values):
            rank = len(v.sizes)
            body += struct.pack("<BBBBIQ", v.dtype, rank, v.flags, 0, 0, const_offsets.get(i, 0))
            body += struct.pack(f"<{rank}q", *v.sizes)
            body += bytes(v.dim_order)
            body += b"\0" * (_pad8(len(body)) - len(body))
        body += struct.pack(f"<{len(self.inputs)}I{len(self.outputs)}I", *self.inputs, *self.outputs)
        body += b"\0" * (_pad8(len(body)) - len(body))
        for n in self.nodes:
            kinds = OP_SIGNATURE[n.op][2]
            body += struct.pack("<HBBHH", int(n.op), len(n.inputs), len(n.outputs), len(n.attrs), 0)
            body += struct.pack(f"<{len(n.inputs) + len(n.outputs)}I", *n.inputs, *n.outputs)
            body += b"\0" * (_pad8(len(body)) - len(body))
            for k, a in enumerate(n.attrs):
                kind = "i" if kinds == "*" else kinds[k]
                body += struct.pack("<q", int(a)) if kind == "i" else struct.pack("<d", float(a))
        end = HEADER_SIZE + len(body)
        constants_offset = _align(end, CONSTANT_ALIGNMENT) if const_offsets else 0
        header = MAGIC + struct.pack("<7I", VERSION, len(self.values), len(self.inputs), len(self.outputs),
                                     len(self.nodes), constants_offset, len(const_blob))
        out = bytearray(header) + body
        if const_offsets:
            out += b"\0" * (constants_offset - len(out))
            out += const_blob
        return bytes(out)

    # ------------------------------------------------------------------ reading
    @classmethod
    def from_bytes(cls, buf: bytes) -> "Payload":
        buf = bytes(buf)
        if len(buf) < HEADER_SIZE or buf[:4] != MAGIC:
            raise PayloadError(f"not an ECU1 payload (magic {buf[:4]!r})")
        version, nv, n_in, n_out, n_nodes, c_off, c_size = struct.unpack_from("<7I", buf, 4)
        if version != VERSION:
            raise PayloadError(f"payload version {version} is not supported (expected {VERSION})")
        if c_off % CONSTANT_ALIGNMENT or (c_off == 0 and c_size != 0) or c_off + c_size > len(buf):
            raise PayloadError(f"bad constants region offset {c_off} size {c_size} (payload {len(buf)} bytes)")

        pos = HEADER_SIZE

        def take(fmt: str) -> tuple:
            nonlocal pos
            size = struct.calcsize(fmt)
            if pos + size > len(buf):
                raise PayloadError(f"payload truncated at byte {pos}")
            r = struct.unpack_from(fmt, buf, pos)
            pos += size
            return r

        p = cls()
        for i in range(nv):
            dtype, rank, flags, r0, r1, coff = take("<BBBBIQ")
            if r0 or r1:
                raise PayloadError(f"value {i}: reserved fields are not zero")
            if rank > MAX_RANK:
                raise PayloadError(f"value {i}: rank {rank} > {MAX_RANK}")
            sizes = take(f"<{rank}q")
            dim_order = take(f"<{rank}B")
            pos = _pad8(pos)
            v = Value(tuple(sizes), tuple(dim_order), flags, dtype)
            if dtype not in DTYPES:
                raise PayloadError(f"value {i}: dtype {dtype} is neither float32 (6) nor bool (11)")
            if flags & FLAG_CONSTANT:
                if dtype != DTYPE_FLOAT32:
                    raise PayloadError(f"value {i}: constant of dtype {dtype}")
                if coff % CONSTANT_ALIGNMENT or coff + 4 * v.numel > c_size:
                    raise PayloadError(f"value {i}: constant data at {coff} (+{4 * v.numel}) outside the region")
                v.data = np.frombuffer(buf, "<f4", v.numel, c_off + coff).astype(np.float32).reshape(v.sizes)
            elif coff:
                raise PayloadError(f"value {i}: non-constant with a data offset")
            p.values.append(v)
        p.inputs = list(take(f"<{n_in}I"))
        p.outputs = list(take(f"<{n_out}I"))
        pos = _pad8(pos)
        for j in range(n_nodes):
            op, ni, no, na, r = take("<HBBHH")
            if r:
                raise PayloadError(f"node {j}: reserved field is not zero")
            try:
                op = Op(op)
            except ValueError:
                raise PayloadError(f"node {j}: unknown op {op}") from None
            ids = take(f"<{ni + no}I")
            pos = _pad8(pos)
            kinds = OP_SIGNATURE[op][2]
            attrs: List[Union[int, float]] = []
            for k in range(na):
                kind = "i" if kinds == "*" else (kinds[k] if k < len(kinds) else "i")
                attrs.append(take("<q")[0] if kind == "i" else take("<d")[0])
            p.nodes.append(Node(op, list(ids[:ni]), list(ids[ni:]), attrs))
        if c_off and pos > c_off:
            raise PayloadError(f"records end at byte {pos}, after constants_offset {c_off}")
        p.validate()
        return p

    def describe(self) -> Dict[str, object]:
        """A JSON-friendly summary (for manifests)."""
        ops: Dict[str, int] = {}
        for n in self.nodes:
            ops[n.op.name] = ops.get(n.op.name, 0) + 1
        return {
            "num_values": len(self.values),
            "num_nodes": len(self.nodes),
            "num_constants": sum(1 for v in self.values if v.flags & FLAG_CONSTANT),
            "constant_bytes": sum(4 * v.numel for v in self.values if v.flags & FLAG_CONSTANT),
            "node_ops": ops,
            "inputs": [self._boundary(i) for i in self.inputs],
            "outputs": [self._boundary(i) for i in self.outputs],
        }

    def _boundary(self, i: int) -> Dict[str, object]:
        v = self.values[i]
        d: Dict[str, object] = {"value": i, "sizes": list(v.sizes), "dim_order": list(v.dim_order)}
        if v.dtype != DTYPE_FLOAT32:   # float32 is implied, so summaries written before bool existed still match
            d["dtype"] = "bool"
        return d
