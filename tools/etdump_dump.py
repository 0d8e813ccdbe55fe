#!/usr/bin/env python3
"""Prints the runs, profile events and debug events (intermediate outputs) of an ETDump (.etdp) file.

A stand-alone reader (struct module only) of the size-prefixed "ED00" flatbuffer described in
the ETDump flatbuffer schema (etdump_schema_flatcc.fbs), independent of the C++ code, used to check that files written by
etrt::etdump::write_etdump parse with a second implementation of the schema. A debug event's tensors live in the
debug buffer file written beside the .etdp (write_etdump_result_to_file(path, debug_buffer_path)); tensor() reads
one into a NumPy array (NumPy is needed for that only).

Usage: tools/etdump_dump.py FILE.etdp [--debug-buffer FILE.bin] [--json]
Exit status 0 on success, 1 on a malformed file.
"""
import json
import struct
import sys

# etdump.ValueType (a plain int8 enum selecting the Value field that is set).
VALUE_TYPES = ["Null", "Int", "Bool", "Float", "Double", "Tensor", "TensorList", "String"]
# executorch_flatbuffer.ScalarType -> (NumPy dtype name, element size); bfloat16 is read as its raw uint16 bits.
SCALAR_TYPES = {0: ("uint8", 1), 1: ("int8", 1), 2: ("int16", 2), 3: ("int32", 4), 4: ("int64", 8),
                5: ("float16", 2), 6: ("float32", 4), 7: ("float64", 8), 11: ("bool", 1), 15: ("bfloat16", 2),
                22: ("uint16", 2), 27: ("uint16", 2), 28: ("uint32", 4), 29: ("uint64", 8)}
UNSET_CHAIN = (1 << 64) - 1  # upstream's unset chain id (-1) as DebugEvent.chain_index (uint64) holds it


class Malformed(Exception):
    pass


class Buf:
    def __init__(self, data):
        self.d = data

    def u(self, fmt, pos):
        n = struct.calcsize(fmt)
        if pos < 0 or pos + n > len(self.d):
            raise Malformed(f"read of {n} bytes at {pos} is out of bounds ({len(self.d)})")
        return struct.unpack_from("<" + fmt, self.d, pos)[0]

    def follow(self, pos):
        off = self.u("I", pos)
        if off == 0:
            raise Malformed(f"zero uoffset at {pos}")
        return pos + off

    def table(self, pos):
        if pos % 4:
            raise Malformed(f"misaligned table at {pos}")
        vt = pos - self.u("i", pos)
        vt_size = self.u("H", vt)
        if vt_size < 4 or vt_size % 2:
            raise Malformed(f"bad vtable size {vt_size} at {vt}")
        self.u(f"{vt_size}s", vt)
        return Table(self, pos, vt, vt_size)


class Table:
    def __init__(self, buf, pos, vt, vt_size):
        self.b, self.pos, self.vt, self.vt_size = buf, pos, vt, vt_size

    def field(self, slot):
        entry = 4 + 2 * slot
        if entry + 2 > self.vt_size:
            return 0
        return self.b.u("H", self.vt + entry)

    def scalar(self, slot, fmt, default):
        fo = self.field(slot)
        return default if fo == 0 else self.b.u(fmt, self.pos + fo)

    def _target(self, slot):
        fo = self.field(slot)
        return None if fo == 0 else self.b.follow(self.pos + fo)

    def table(self, slot):
        t = self._target(slot)
        return None if t is None else self.b.table(t)

    def string(self, slot):
        t = self._target(slot)
        if t is None:
            return None
        n = self.b.u("I", t)
        raw = self.b.u(f"{n + 1}s", t + 4)
        if raw[-1] != 0:
            raise Malformed(f"string at {t} is not NUL-terminated")
        return raw[:-1].decode("utf-8", errors="replace")

    def tables(self, slot):
        t = self._target(slot)
        if t is None:
            return []
        n = self.b.u("I", t)
        self.b.u(f"{4 * n}s", t + 4)
        return [self.b.table(self.b.follow(t + 4 + 4 * i)) for i in range(n)]

    def bytes_vector(self, slot):
        t = self._target(slot)
        if t is None:
            return None
        n = self.b.u("I", t)
        return self.b.u(f"{n}s", t + 4)

    def int64_vector(self, slot):
        t = self._target(slot)
        if t is None:
            return None
        n = self.b.u("I", t)
        if (t + 4) % 8:
            raise Malformed(f"int64 vector data at {t + 4} is not 8-byte aligned")
        raw = self.b.u(f"{8 * n}s", t + 4)
        return list(struct.unpack_from(f"<{n}q", raw, 0))


def _boxed(table, fmt, default):
    """The single field of an Int/Bool/Float/Double table (None when the table is absent)."""
    return None if table is None else table.scalar(0, fmt, default)


def _tensor(t):
    return {"scalar_type": t.scalar(0, "b", 0), "sizes": t.int64_vector(1), "strides": t.int64_vector(2),
            "offset": t.scalar(3, "q", 0)}


def _value(v):
    if v is None:
        return None
    kind = v.scalar(0, "b", 0)
    out = {"type": VALUE_TYPES[kind] if 0 <= kind < len(VALUE_TYPES) else kind}
    if out["type"] == "Tensor":
        t = v.table(1)
        out["tensors"] = [] if t is None else [_tensor(t)]
    elif out["type"] == "TensorList":
        tl = v.table(2)
        out["tensors"] = [] if tl is None else [_tensor(t) for t in tl.tables(0)]
    elif out["type"] == "Int":
        out["value"] = _boxed(v.table(3), "q", 0)
    elif out["type"] == "Float":
        out["value"] = _boxed(v.table(4), "f", 0.0)
    elif out["type"] == "Double":
        out["value"] = _boxed(v.table(5), "d", 0.0)
    elif out["type"] == "Bool":
        out["value"] = bool(_boxed(v.table(6), "B", 0))
    out["output"] = bool(_boxed(v.table(7), "B", 0))
    return out


def parse(data):
    if len(data) < 12:
        raise Malformed("file too small")
    b = Buf(data)
    if b.u("I", 0) != len(data) - 4:
        raise Malformed(f"size prefix {b.u('I', 0)} != file size {len(data)} - 4")
    if data[8:12] != b"ED00":
        raise Malformed(f"identifier {data[8:12]!r} is not ED00")
    root = b.table(b.follow(4))
    out = {"version": root.scalar(0, "I", 0), "runs": []}
    for rt in root.tables(1):
        run = {
            "name": rt.string(0),
            "bundled_input_index": rt.scalar(1, "i", -1),
            "allocators": [a.string(0) for a in rt.tables(2)],
            "events": [],
        }
        for et in rt.tables(3):
            pe, ae, de = et.table(0), et.table(1), et.table(2)
            if pe is not None:
                meta = pe.bytes_vector(5)
                run["events"].append({
                    "kind": "profile",
                    "name": pe.string(0),
                    "chain_index": pe.scalar(1, "i", 0),
                    "instruction_id": pe.scalar(2, "i", -1),
                    "delegate_debug_id_int": pe.scalar(3, "i", -1),
                    "delegate_debug_id_str": pe.string(4),
                    "delegate_debug_metadata": None if meta is None else meta.hex(),
                    "start_time": pe.scalar(6, "Q", 0),
                    "end_time": pe.scalar(7, "Q", 0),
                })
            elif ae is not None:
                run["events"].append({"kind": "allocation", "allocator_id": ae.scalar(0, "i", 0),
                                      "allocation_size": ae.scalar(1, "Q", 0)})
            elif de is not None:
                run["events"].append({"kind": "debug", "name": de.string(5), "chain_index": de.scalar(0, "Q", 0),
                                      "instruction_id": de.scalar(1, "i", -1),
                                      "delegate_debug_id_int": de.scalar(3, "i", -1),
                                      "delegate_debug_id_str": de.string(4),
                                      "value": _value(de.table(2))})
            else:
                run["events"].append({"kind": "empty"})
        out["runs"].append(run)
    return out


def tensor(entry, debug_buffer):
    """A logged tensor (one of a debug event's value["tensors"]) as a NumPy array read from the debug buffer bytes.

    The bytes sit at entry["offset"] in the tensor's memory order; strides are in elements. A tensor without bytes
    (offset -1, or no elements) comes back as zeros of its shape, as upstream's Inspector does."""
    import numpy as np
    name, size = SCALAR_TYPES[entry["scalar_type"]]
    dtype = np.dtype("uint16" if name == "bfloat16" else name)
    sizes = tuple(entry["sizes"] or ())
    numel = 1
    for d in sizes:
        numel *= d
    if numel == 0 or entry["offset"] < 0:
        return np.zeros(sizes, dtype)
    strides = tuple(entry["strides"] or ())
    span = 1 + sum((n - 1) * s for n, s in zip(sizes, strides))
    end = entry["offset"] + span * size
    if end > len(debug_buffer):
        raise Malformed(f"tensor at offset {entry['offset']} ({span * size} bytes) is past the debug buffer's "
                        f"end ({len(debug_buffer)} bytes)")
    flat = np.frombuffer(debug_buffer, dtype, count=span, offset=entry["offset"])
    out = np.lib.stride_tricks.as_strided(flat, sizes, tuple(s * size for s in strides)).copy()
    if name == "bfloat16":  # the upper half of a float32
        out = (out.astype(np.uint32) << 16).view(np.float32)
    return out


def value(debug_event, debug_buffer):
    """A debug event's value: a NumPy array (Tensor), a list of them (TensorList), or the scalar."""
    v = debug_event["value"]
    if v is None:
        return None
    if v["type"] == "Tensor":
        return tensor(v["tensors"][0], debug_buffer) if v["tensors"] else None
    if v["type"] == "TensorList":
        return [tensor(t, debug_buffer) for t in v["tensors"]]
    return v.get("value")


def _describe_debug(e, debug_buffer):
    v = e["value"] or {"type": "absent", "output": False}
    where = "program output" if v["output"] else f"chain={e['chain_index']:3} instr={e['instruction_id']:3}"
    if e["chain_index"] == UNSET_CHAIN and not v["output"]:
        where = f"chain=unset instr={e['instruction_id']:3}"
    text = f"  <debug> {where} {v['type']}"
    for t in v.get("tensors", []):
        dtype = SCALAR_TYPES.get(t["scalar_type"], (str(t["scalar_type"]), 0))[0]
        text += f" {dtype}{list(t['sizes'] or [])}@{t['offset']}"
    if "value" in v:
        text += f" = {v['value']!r}"
    if debug_buffer is not None and v.get("tensors"):
        try:
            import numpy as np
            vals = value(e, debug_buffer)
            arrays = vals if isinstance(vals, list) else [vals]
            text += " " + " ".join(np.array2string(a.ravel()[:6], precision=4, separator=",") for a in arrays)
        except ImportError:
            pass
    return text


def main(argv):
    args = [a for a in argv[1:] if a != "--json"]
    debug_path = None
    if "--debug-buffer" in args:
        i = args.index("--debug-buffer")
        if i + 1 >= len(args):
            print(__doc__, file=sys.stderr)
            return 2
        debug_path = args[i + 1]
        del args[i:i + 2]
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    with open(args[0], "rb") as f:
        data = f.read()
    debug_buffer = None
    if debug_path:
        with open(debug_path, "rb") as f:
            debug_buffer = f.read()
    try:
        d = parse(data)
    except Malformed as e:
        print(f"{args[0]}: malformed ETDump: {e}", file=sys.stderr)
        return 1
    if "--json" in argv[1:]:
        print(json.dumps(d, indent=1))
        return 0
    print(f"ETDump version {d['version']}, {len(d['runs'])} run(s)")
    for run in d["runs"]:
        print(f"run {run['name']!r} bundled_input_index={run['bundled_input_index']} events={len(run['events'])}")
        for e in run["events"]:
            if e["kind"] == "profile":
                print(f"  {e['name']!s:40} chain={e['chain_index']:3} instr={e['instruction_id']:3} "
                      f"{e['start_time']} -> {e['end_time']}"
                      + (f" delegate_id={e['delegate_debug_id_int']}" if e["delegate_debug_id_int"] != -1 else ""))
            elif e["kind"] == "debug":
                try:
                    print(_describe_debug(e, debug_buffer))
                except Malformed as err:
                    print(f"{args[0]}: {err}", file=sys.stderr)
                    return 1
            else:
                print(f"  <{e['kind']} event> {e}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
