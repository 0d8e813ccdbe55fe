#!/usr/bin/env python3
"""Prints the runs and profile events of an ETDump (.etdp) file.

A stand-alone reader (struct module only) of the size-prefixed "ED00" flatbuffer described in
shared/reference/SCHEMA.md section 6, independent of the C++ code, used to check that files written by
etrt::etdump::write_etdump parse with a second implementation of the schema.

Usage: tools/etdump_dump.py FILE.etdp [--json]
Exit status 0 on success, 1 on a malformed file.
"""
import json
import struct
import sys


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
                                      "instruction_id": de.scalar(1, "i", -1)})
            else:
                run["events"].append({"kind": "empty"})
        out["runs"].append(run)
    return out


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1], "rb") as f:
        data = f.read()
    try:
        d = parse(data)
    except Malformed as e:
        print(f"{argv[1]}: malformed ETDump: {e}", file=sys.stderr)
        return 1
    if "--json" in argv[2:]:
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
            else:
                print(f"  <{e['kind']} event> {e}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
