"""The backends' tables against what they must agree with.

XNNPACK: the node kinds' table (include/etrt/backends/xnnpack/node_table.h) against the exporter's schema
(tests/python/data/xnnpack_node_union.txt, written by tools/export/dump_xnnpack_node_union.py from executorch 1.5.1):
an entry's position is the union's type code, so the names must come in the schema's order, and a kind that shares a
table type in the schema must be read with that type's field layout.

CUDA: the op table (include/etrt/backends/cuda/op_table.h) against the payload's written specification (PAYLOAD.md's
op table) and the export side's view of it (tools/export/etrt_cuda/payload.py reads the header)."""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
TABLE = ROOT / "include" / "etrt" / "backends" / "xnnpack" / "node_table.h"
UNION = pathlib.Path(__file__).parent / "data" / "xnnpack_node_union.txt"
CUDA_TABLE = ROOT / "include" / "etrt" / "backends" / "cuda" / "op_table.h"
CUDA_SPEC = ROOT / "include" / "etrt" / "backends" / "cuda" / "PAYLOAD.md"

# The schema's shared table types and the field readers (node_fields.h) that read them.
LAYOUT_OF_TABLE_TYPE = {"_XNNNode2x1": "node2x1", "_XNNNode1x1": "node1x1", "_XNNNodeConv": "conv",
                        "_XNNPooling2D": "pooling", "_XNNCat": "concatenate"}


def table_entries():
    body = TABLE.read_text().split("kNodeKinds[] = {", 1)[1].split("};", 1)[0]
    entries = re.findall(r'\{"(\w+)"(?:,\s*fields::(\w+)(?:<(\d+)>)?)?', body)
    return [(name, fields, int(arg) if arg else None) for name, fields, arg in entries]


def schema_members():
    lines = [ln.split() for ln in UNION.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    return [(parts[0], parts[1] if len(parts) > 1 else None) for parts in lines]


def test_the_table_lists_the_schemas_node_kinds_in_order():
    names = [name for name, _, _ in table_entries()]
    assert names[0] == "NONE"
    assert names[1:] == [name for name, _ in schema_members()]


def test_kinds_sharing_a_table_type_use_its_field_layout():
    entries = {name: (fields, arg) for name, fields, arg in table_entries()}
    for name, table_type in schema_members():
        fields, arg = entries[name]
        assert fields, f"{name} has no field reader"
        if table_type:
            assert fields == LAYOUT_OF_TABLE_TYPE[table_type], f"{name} is a {table_type}, read as fields::{fields}"
        if fields == "concatenate":
            assert arg == int(name[-1]), f"{name} reads {arg} inputs"


def test_every_entry_names_a_shape_rule_and_a_run_function():
    body = TABLE.read_text().split("kNodeKinds[] = {", 1)[1].split("};", 1)[0]
    for line in body.splitlines():
        if '{"XNN' in line:
            assert "shape::" in line and "run::" in line, line.strip()


def cuda_entries():
    return [(int(code), name, int(ni), int(no), attrs) for code, name, ni, no, attrs in
            re.findall(r'^\s*\{(\d+),\s*"(\w+)",\s*(\d+),\s*(\d+),\s*"([fi*]*)"', CUDA_TABLE.read_text(), re.M)]


def test_the_cuda_op_table_is_the_specifications():
    spec = {}
    for code, name, ins, outs, attrs in re.findall(r"^\| (\d+) \| `(\w+)` \| ([^|]*) \| ([^|]*) \| ([^|]*) \|",
                                                   CUDA_SPEC.read_text(), re.M):
        # a cell lists the operands by name; sizes ([M,K]) and remarks ((...)) hold commas of their own
        count = lambda cell: 0 if cell.strip() in ("–", "-", "") else len(  # noqa: E731
            re.sub(r"\[[^\]]*\]|\([^)]*\)", "", cell).split(","))
        spec[int(code)] = (name, count(ins), count(outs))
    table = {code: (name, ni, no) for code, name, ni, no, _ in cuda_entries()}
    assert len(table) == 28
    assert table == spec


def test_the_export_side_reads_the_cuda_op_table():
    import importlib.util
    spec = importlib.util.spec_from_file_location("etrt_cuda_payload", ROOT / "tools" / "export" / "etrt_cuda" /
                                                  "payload.py")
    payload = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = payload  # its dataclasses look their module up
    try:
        spec.loader.exec_module(payload)
    finally:
        del sys.modules[spec.name]
    assert {(op.value, op.name) for op in payload.Op} == {(code, name) for code, name, *_ in cuda_entries()}
    assert payload.OP_SIGNATURE[payload.Op.PERMUTE] == (1, 1, "*")
    assert payload.OPTIONAL_INPUTS == {payload.Op.LAYER_NORM: (1, 2)}
