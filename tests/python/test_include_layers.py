"""Includes in include/etrt point down the layers only: core -> format -> program -> the interfaces the method calls
through (kernel and backend) -> method -> backends -> adapters (a lower layer never includes a higher one)."""
import pathlib
import re

INCLUDE = pathlib.Path(__file__).resolve().parents[2] / "include" / "etrt"
LAYERS = {"core": 0, "device": 0, "format": 1, "program": 2, "kernels": 3, "backend": 3, "method": 4, "backends": 5,
          "bundled": 5, "devtools": 5, "adapters": 6}


def test_every_folder_has_a_layer():
    folders = {p.name for p in INCLUDE.iterdir() if p.is_dir()}
    assert folders <= LAYERS.keys(), f"give {sorted(folders - LAYERS.keys())} a layer in LAYERS"


def test_no_include_points_up():
    up = []
    for path in INCLUDE.rglob("*.h"):
        top = path.relative_to(INCLUDE).parts[0]
        if top not in LAYERS:
            continue  # runtime.h, the umbrella header, may include anything
        for m in re.finditer(r'#include\s+"(etrt/(\w+)/[^"]+)"', path.read_text()):
            edge = f"{path.relative_to(INCLUDE)} -> {m.group(1)}"
            if m.group(2) in LAYERS and LAYERS[m.group(2)] > LAYERS[top]:
                up.append(edge)
    assert not up, up
