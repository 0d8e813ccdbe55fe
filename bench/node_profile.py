#!/usr/bin/env python3
"""Where an XNNPACK-lowered program spends its time, node by node, in this project's delegate.

    .venv/bin/python bench/node_profile.py PROGRAM.pte [--runs 100] [--threads N] [--top 25]

Builds the module once with -DETRT_NODE_PROFILE into build/prof (include/etrt/backends/xnnpack/node_profile.h: each
node's turn in the executor is timed), runs PROGRAM's forward RUNS times in a child interpreter that loads that build
instead of the installed one, with the inputs in0, in1, ... of PROGRAM.npz beside it (random ones when there is
none), and prints the mean microseconds a forward per node kind and for the slowest nodes. A node that runs the
nodes after it (a block finish, a band pair, an activation chain) counts their time. A developer's tool: the
installed module is never touched, and the numbers are for comparing builds or nodes on one host, not a benchmark
against upstream (bench/run.py is).
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
BUILD = ROOT / "build" / "prof"

CHILD = r"""
import pathlib, sys
import numpy as np
from executorch.extension.pybindings import portable_lib as pl
pte, runs = sys.argv[1], int(sys.argv[2])
m = pl._load_for_executorch(pte)
npz = pathlib.Path(pte).with_suffix(".npz")
if npz.exists():
    z = np.load(npz)
    inputs = [z[f"in{i}"] for i in range(len([k for k in z.files if k.startswith("in")]))]
else:
    meta = m.method_meta("forward")
    inputs = [np.random.default_rng(0).standard_normal(tuple(meta.input_tensor_meta(i).sizes())).astype(np.float32)
              for i in range(meta.num_inputs())]
for _ in range(runs):
    m.forward(inputs)
"""


def build() -> pathlib.Path:
    env = dict(os.environ, PATH=f"{pathlib.Path(sys.executable).parent}:{os.environ.get('PATH', '')}")
    if not (BUILD / "build.ninja").exists():
        subprocess.run(["meson", "setup", str(BUILD), "-Dcuda=disabled", "-Dbuildtype=release",
                        "-Dcpp_args=-DETRT_NODE_PROFILE"], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["ninja", "-C", str(BUILD)], env=env, check=True, stdout=subprocess.DEVNULL)
    found = sorted(BUILD.rglob("_C*.so"))
    if not found:
        sys.exit(f"no _C module under {BUILD}")
    return found[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pte")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--threads", type=int, help="ETRT_NUM_THREADS for the run (default: the module's own)")
    ap.add_argument("--top", type=int, default=25, help="slowest nodes listed")
    a = ap.parse_args()
    module = build()
    spec = importlib.util.find_spec("executorch_portable_lib")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("executorch_portable_lib is not installed in this interpreter (./install_executorch.sh)")
    installed = pathlib.Path(list(spec.submodule_search_locations)[0])
    with tempfile.TemporaryDirectory() as tmp:
        package = pathlib.Path(tmp) / "executorch_portable_lib"
        shutil.copytree(installed, package, ignore=shutil.ignore_patterns("_C*.so", "__pycache__"))
        shutil.copy2(module, package / module.name)
        out = pathlib.Path(tmp) / "nodes.tsv"
        env = dict(os.environ, PYTHONPATH=tmp, ETRT_PROF_OUT=str(out))
        if a.threads:
            env["ETRT_NUM_THREADS"] = str(a.threads)
        subprocess.run([sys.executable, "-c", CHILD, a.pte, str(a.runs)], env=env, check=True)
        rows = []
        for line in out.read_text().splitlines():
            _, index, what, ns, calls = line.split("\t")
            rows.append((int(index), what, float(ns) / int(calls) / 1e3))
    total = sum(us for _, _, us in rows)
    print(f"{a.pte}: {total:.0f} us a forward over {len(rows)} executed nodes ({a.runs} runs, the first included)")
    kinds: dict[str, float] = {}
    for _, what, us in rows:
        kinds[what.split(" ")[0]] = kinds.get(what.split(" ")[0], 0.0) + us
    for kind, us in sorted(kinds.items(), key=lambda kv: -kv[1]):
        print(f"  {kind:32s} {us:9.1f} us {100 * us / total:5.1f}%")
    print(f"slowest {a.top} nodes (index, us, kind and planned shapes):")
    for index, what, us in sorted(rows, key=lambda r: -r[2])[:a.top]:
        print(f"  {index:4d} {us:9.1f}  {what}")


if __name__ == "__main__":
    main()
