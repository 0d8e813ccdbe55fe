"""Prints the XNNPACK payloads of a .pte as JSON (the exporter's own schema and flatc), for reading what a flow emits.

    .venv-export/bin/python tools/export/dump_xnnpack_payload.py FILE.pte|- [--summary]
"""
import json
import pathlib
import re
import subprocess
import sys
import tempfile

from executorch.exir._serialize._program import deserialize_pte_binary
import executorch.backends.xnnpack.serialization.xnnpack_graph_serialize as ser

SCHEMA = pathlib.Path(ser.__file__).parent / "schema.fbs"
FLATC = pathlib.Path(sys.executable).parent / "flatc"


def payloads(pte_bytes):
    program = deserialize_pte_binary(pte_bytes).program
    for plan in program.execution_plan:
        for i, d in enumerate(plan.delegates):
            if d.id != "XnnpackBackend":
                continue
            data = d.processed
            blob = program.backend_delegate_data[data.index].data
            yield plan.name, i, bytes(blob)


def to_json(blob):
    fb_off = int.from_bytes(blob[10:14], "little")
    fb_size = int.from_bytes(blob[14:18], "little")
    with tempfile.TemporaryDirectory() as tmp:
        p = pathlib.Path(tmp) / "g.bin"
        p.write_bytes(blob[fb_off:fb_off + fb_size])
        subprocess.run([str(FLATC), "--json", "--strict-json", "--raw-binary", "-o", tmp, str(SCHEMA), "--", str(p)],
                       check=True)
        text = (pathlib.Path(tmp) / "g.json").read_text()
        # flatc prints non-finite floats as inf / nan, which Python's json spells Infinity / NaN.
        text = re.sub(r"(?<=[:\[,\s])(-?)inf\b", r"\1Infinity", text)
        return json.loads(re.sub(r"(?<=[:\[,\s])nan\b", "NaN", text))


def main():
    pte = sys.stdin.buffer.read() if sys.argv[1] == "-" else pathlib.Path(sys.argv[1]).read_bytes()
    for name, i, blob in payloads(pte):
        g = to_json(blob)
        if "--summary" in sys.argv:
            kinds = {}
            for n in g.get("xnodes", []):
                kinds[n["xnode_union_type"]] = kinds.get(n["xnode_union_type"], 0) + 1
            dts = {}
            for v in g.get("xvalues", []):
                tv = v["xvalue_union"].get("tensor_value", v["xvalue_union"])
                qp = v["xvalue_union"].get("quant_params_type", "")
                key = f'{tv.get("datatype", "?")}:{qp}'
                dts[key] = dts.get(key, 0) + 1
            print(name, "delegate", i, "nodes", kinds, "values", dts)
        else:
            print(json.dumps(g, indent=1))


if __name__ == "__main__":
    main()
