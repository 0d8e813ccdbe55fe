"""Corrupted programs, loaded AND executed, raise exceptions; they never crash the process.

Each run flips a few random bits (fixed seeds) in real exported programs and runs them with valid inputs, in a
child process so that a crash shows up as a failed exit code instead of killing the test run.
"""
import subprocess
import sys

from conftest import FIXTURES, ROOT

CHILD = r"""
import json, random, sys, pathlib
import numpy as np
from executorch.extension.pybindings import portable_lib as pl
fix = pathlib.Path(sys.argv[1])
manifest = json.loads((fix / "manifest.json").read_text())
rng = random.Random(int(sys.argv[2]))
trials = int(sys.argv[3])
for fx in manifest["fixtures"]:
    if fx["npz"]["bf16_as_uint16"]:
        continue
    data = (fix / fx["files"]["pte"]).read_bytes()
    z = np.load(fix / fx["files"]["npz"])
    kinds = [e["type"] for e in fx["methods"][fx["main_method"]]["eager_inputs"][0]]
    inputs = [int(z[f"in{i}"]) if k == "int" else float(z[f"in{i}"]) if k == "float"
              else np.ascontiguousarray(z[f"in{i}"]) for i, k in enumerate(kinds)]
    for t in range(trials):
        b = bytearray(data)
        for _ in range(rng.randint(1, 6)):
            pos = rng.randrange(len(b))
            b[pos] ^= 1 << rng.randrange(8)
        sys.stdout.write(f"{fx['name']} {t}\n")
        sys.stdout.flush()
        try:
            m = pl._load_for_executorch_from_buffer(bytes(b))
            m.run_method(fx["main_method"], [x.copy() if hasattr(x, "copy") else x for x in inputs])
        except (RuntimeError, IndexError):
            pass
print("done")
"""


def test_bit_flipped_programs_never_crash():
    r = subprocess.run([sys.executable, "-c", CHILD, str(FIXTURES), "7", "150"], capture_output=True, text=True,
                       timeout=600, cwd=str(ROOT / "tests" / "python"))
    last = r.stdout.strip().splitlines()[-1:] or [""]
    assert r.returncode == 0, f"crashed (exit {r.returncode}) at: {last[0]}\n{r.stderr[-2000:]}"
    assert last[0] == "done"
