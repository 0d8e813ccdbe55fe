"""A minimal flatbuffer walker over .pte files, for tests that edit one field of a real program in place.

It follows the program schema's field order (program.fbs): enough to reach an execution plan's arena sizes and its
tensors' allocation details, the fields a hostile file would lie about. Edits never move bytes; they overwrite a
field that is already present.
"""
import struct

# Field indices in program.fbs.
PROGRAM_EXECUTION_PLAN = 1
PLAN_VALUES = 2
PLAN_NON_CONST_BUFFER_SIZES = 8
EVALUE_VAL_TYPE, EVALUE_VAL = 0, 1
TAG_TENSOR = 5
TENSOR_SCALAR_TYPE, TENSOR_SIZES, TENSOR_ALLOCATION_INFO = 0, 2, 6
ALLOC_MEMORY_ID, ALLOC_OFFSET_LOW, ALLOC_OFFSET_HIGH = 0, 1, 2


class Table:
    def __init__(self, buf, pos):
        self.buf, self.pos = buf, pos
        self.vtable = pos - struct.unpack_from("<i", buf, pos)[0]
        self.vt_size = struct.unpack_from("<H", buf, self.vtable)[0]

    def field_pos(self, index):
        """Absolute position of field `index`, or None when the writer left it out (a default)."""
        at = 4 + 2 * index
        if at >= self.vt_size:
            return None
        off = struct.unpack_from("<H", self.buf, self.vtable + at)[0]
        return self.pos + off if off else None

    def _target(self, index):
        p = self.field_pos(index)
        return None if p is None else p + struct.unpack_from("<I", self.buf, p)[0]

    def table(self, index):
        t = self._target(index)
        return None if t is None else Table(self.buf, t)

    def vector(self, index):
        """(position of the first element, length) of a vector field."""
        t = self._target(index)
        if t is None:
            return None, 0
        return t + 4, struct.unpack_from("<I", self.buf, t)[0]

    def tables(self, index):
        start, n = self.vector(index)
        out = []
        for k in range(n):
            p = start + 4 * k
            out.append(Table(self.buf, p + struct.unpack_from("<I", self.buf, p)[0]))
        return out

    def scalar(self, index, fmt, default=0):
        p = self.field_pos(index)
        return default if p is None else struct.unpack_from(fmt, self.buf, p)[0]


def program(buf):
    return Table(buf, struct.unpack_from("<I", buf, 0)[0])


def plan(buf, index=0):
    return program(buf).tables(PROGRAM_EXECUTION_PLAN)[index]


def set_arena_size(buf, memory_id, nbytes, plan_index=0):
    """Overwrites the declared size of arena `memory_id` (1-based; entry 0 is the unused arena 0)."""
    start, n = plan(buf, plan_index).vector(PLAN_NON_CONST_BUFFER_SIZES)
    assert memory_id < n, (memory_id, n)
    struct.pack_into("<q", buf, start + 8 * memory_id, nbytes)


def arena_sizes(buf, plan_index=0):
    start, n = plan(buf, plan_index).vector(PLAN_NON_CONST_BUFFER_SIZES)
    return [struct.unpack_from("<q", buf, start + 8 * k)[0] for k in range(n)]


def planned_tensors(buf, plan_index=0):
    """Every planned tensor of a plan as (value index, Tensor table, AllocationDetails table)."""
    out = []
    for i, ev in enumerate(plan(buf, plan_index).tables(PLAN_VALUES)):
        if ev.scalar(EVALUE_VAL_TYPE, "<B") != TAG_TENSOR:
            continue
        t = ev.table(EVALUE_VAL)
        alloc = t.table(TENSOR_ALLOCATION_INFO) if t else None
        if alloc is not None:
            out.append((i, t, alloc))
    return out


PLAN_INPUTS, PLAN_CHAINS, PLAN_OPERATORS = 3, 5, 6
CHAIN_INSTRUCTIONS = 2
INSTR_ARGS_TYPE, INSTR_ARGS = 0, 1
INSTR_KERNEL_CALL = 1
KERNEL_CALL_OP_INDEX, KERNEL_CALL_ARGS = 0, 1
OPERATOR_NAME, OPERATOR_OVERLOAD = 0, 1


def _string(t, index):
    p = t.field_pos(index)
    if p is None:
        return ""
    s = p + struct.unpack_from("<I", t.buf, p)[0]
    n = struct.unpack_from("<I", t.buf, s)[0]
    return bytes(t.buf[s + 4:s + 4 + n]).decode()


def kernel_calls(buf, plan_index=0):
    """Every KernelCall of a plan's chains as (operator "name.overload", position of its first arg, arg count)."""
    p = plan(buf, plan_index)
    ops = []
    for o in p.tables(PLAN_OPERATORS):
        name, overload = _string(o, OPERATOR_NAME), _string(o, OPERATOR_OVERLOAD)
        ops.append(f"{name}.{overload}" if overload else name)
    out = []
    for chain in p.tables(PLAN_CHAINS):
        for ins in chain.tables(CHAIN_INSTRUCTIONS):
            if ins.scalar(INSTR_ARGS_TYPE, "<B") != INSTR_KERNEL_CALL:
                continue
            call = ins.table(INSTR_ARGS)
            start, n = call.vector(KERNEL_CALL_ARGS)
            out.append((ops[call.scalar(KERNEL_CALL_OP_INDEX, "<i")], start, n))
    return out


def plan_inputs(buf, plan_index=0):
    start, n = plan(buf, plan_index).vector(PLAN_INPUTS)
    return [struct.unpack_from("<i", buf, start + 4 * k)[0] for k in range(n)]
