"""examples/run_model.py runs every fixture of tests/fixtures/exported (its inputs from the fixture's .npz), in the
current output mode; with torch blocked, a bfloat16 model stops with a message saying torch is needed."""
import importlib.util
import pathlib
import sys

import pytest

from conftest import FIXTURES, ROOT

SPEC = importlib.util.spec_from_file_location("run_model", ROOT / "examples" / "run_model.py")
run_model = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(run_model)

MODELS = sorted(p.name for p in FIXTURES.glob("*.pte"))


def torch_blocked() -> bool:
    return "torch" in sys.modules and sys.modules["torch"] is None


@pytest.mark.parametrize("name", MODELS)
def test_run_model_runs_the_fixture(name, capsys):
    model = FIXTURES / name
    if "bf16" in name and torch_blocked():
        with pytest.raises(SystemExit, match="install torch"):
            run_model.main([str(model), "--calls", "1"])
        return
    assert run_model.main([str(model), "--calls", "1"]) == 0
    out = capsys.readouterr().out
    assert "output 0:" in out and "per-call time" in out


def test_run_model_needs_the_value_of_a_specialised_scalar(tmp_path):
    model = tmp_path / "scalar_inputs.pte"
    model.write_bytes((FIXTURES / "scalar_inputs.pte").read_bytes())  # no .npz beside it
    with pytest.raises(SystemExit, match=r"input 1 \(Int\) is specialised by the exporter"):
        run_model.main([str(model), "--calls", "1"])
