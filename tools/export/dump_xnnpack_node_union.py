"""Writes the XNNPACK delegate's node kinds, as the exporter's schema declares them, to
tests/python/data/xnnpack_node_union.txt: one line per member of the XNode union, in order (the position is the
union's type code), with the table type a member shares when it has one (`XNNAdd _XNNNode2x1`).

    .venv-export/bin/python tools/export/dump_xnnpack_node_union.py

tests/python/test_xnnpack_node_table.py checks the runtime's node kinds' table against this list.
"""
import pathlib
import re
from importlib.metadata import version

import executorch.backends.xnnpack.serialization as serialization

SCHEMA = pathlib.Path(list(serialization.__path__)[0]) / "schema.fbs"  # a namespace package: no __file__
OUT = pathlib.Path(__file__).resolve().parents[2] / "tests" / "python" / "data" / "xnnpack_node_union.txt"

body = re.search(r"union\s+XNodeUnion\s*\{(.*?)\}", SCHEMA.read_text(), re.S).group(1)
members = []
for item in body.split(","):
    item = re.sub(r"//.*", "", item).strip()
    if item:
        name, _, table = (part.strip() for part in item.partition(":"))
        members.append(f"{name} {table}".strip())
OUT.write_text(f"# executorch {version('executorch')}: backends/xnnpack/serialization/schema.fbs, union XNodeUnion "
               f"({len(members)} members, in order)\n" + "\n".join(members) + "\n")
print(f"wrote {len(members)} members to {OUT}")
