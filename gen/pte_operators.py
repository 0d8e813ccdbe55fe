"""The operator names a .pte file's methods call ("aten::add.out", ...) and the dtypes of its tensors, read from its
flatbuffer without any ExecuTorch package: what a selective kernel table must hold to run the file.

Program.execution_plan (field 1) -> ExecutionPlan.operators (field 6) -> Operator.name (0) / overload (1), as laid
out by the program schema (program.fbs). Every offset is bounds-checked; a file that is not a program raises
ValueError naming the problem.
"""
from __future__ import annotations

import struct

PROGRAM_EXECUTION_PLAN, PLAN_VALUES, PLAN_OPERATORS = 1, 2, 6
OPERATOR_NAME, OPERATOR_OVERLOAD = 0, 1
EVALUE_VAL_TYPE, EVALUE_VAL = 0, 1
KIND_TENSOR = 5  # the KernelTypes union tag of Tensor
TENSOR_SCALAR_TYPE = 0


class Reader:
    def __init__(self, data: bytes, what: str) -> None:
        self.data, self.what = data, what

    def u32(self, pos: int) -> int:
        if pos < 0 or pos + 4 > len(self.data):
            raise ValueError(f"{self.what}: offset {pos} is outside the file ({len(self.data)} bytes)")
        return struct.unpack_from("<I", self.data, pos)[0]

    def field(self, table: int, index: int) -> int | None:
        vtable = table - struct.unpack("<i", self.data[table:table + 4])[0] if table + 4 <= len(self.data) else -1
        if vtable < 0 or vtable + 4 > len(self.data):
            raise ValueError(f"{self.what}: a table's vtable is outside the file")
        size = struct.unpack_from("<H", self.data, vtable)[0]
        at = 4 + 2 * index
        if at + 2 > size or vtable + at + 2 > len(self.data):
            return None
        off = struct.unpack_from("<H", self.data, vtable + at)[0]
        return table + off if off else None

    def indirect(self, pos: int) -> int:
        return pos + self.u32(pos)

    def tables(self, table: int, index: int) -> list[int]:
        p = self.field(table, index)
        if p is None:
            return []
        vec = self.indirect(p)
        return [self.indirect(vec + 4 + 4 * k) for k in range(self.u32(vec))]

    def string(self, table: int, index: int) -> str:
        p = self.field(table, index)
        if p is None:
            return ""
        s = self.indirect(p)
        n = self.u32(s)
        if s + 4 + n > len(self.data):
            raise ValueError(f"{self.what}: a string runs past the end of the file")
        return self.data[s + 4:s + 4 + n].decode("utf-8")


def _root(data: bytes, what: str) -> tuple[Reader, int]:
    if len(data) < 8 or data[4:6] != b"ET":
        raise ValueError(f"{what}: not an ExecuTorch program (no 'ET' identifier at bytes 4..5)")
    r = Reader(data, what)
    return r, r.indirect(0)


def tensor_dtypes(data: bytes, what: str = "program") -> list[int]:
    """Sorted ScalarType codes of every tensor value in the program's methods (ExecutionPlan.values -> EValue ->
    Tensor.scalar_type): the dtypes its kernels can be asked for."""
    r, root = _root(data, what)
    codes = set()
    for plan in r.tables(root, PROGRAM_EXECUTION_PLAN):
        for value in r.tables(plan, PLAN_VALUES):
            p = r.field(value, EVALUE_VAL_TYPE)
            if p is None or p >= len(data) or data[p] != KIND_TENSOR:
                continue
            v = r.field(value, EVALUE_VAL)
            if v is None:
                continue
            t = r.indirect(v)
            st = r.field(t, TENSOR_SCALAR_TYPE)
            codes.add(0 if st is None else int.from_bytes(data[st:st + 1], "little", signed=True))
    return sorted(codes)


def operator_names(data: bytes, what: str = "program") -> list[str]:
    """Sorted operator names ("name.overload", or "name" without an overload) of every method in a .pte."""
    r, root = _root(data, what)
    names = set()
    for plan in r.tables(root, PROGRAM_EXECUTION_PLAN):
        for op in r.tables(plan, PLAN_OPERATORS):
            name, overload = r.string(op, OPERATOR_NAME), r.string(op, OPERATOR_OVERLOAD)
            names.add(f"{name}.{overload}" if overload else name)
    return sorted(names)
