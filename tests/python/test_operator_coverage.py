"""The operators upstream's users have (executorch 1.5.1's portable_lib with its quantized and LLM custom-op
libraries loaded; tests/python/data/upstream_operator_names.txt, written by tools/export/dump_upstream_operators.py)
against ours. NOT_YET lists what is still missing, each with why; the test fails when an upstream operator is missing
without being listed, and when a listed one has landed (so the list shrinks as the work lands and stays true)."""
import pathlib

DATA = pathlib.Path(__file__).parent / "data" / "upstream_operator_names.txt"

NOT_YET: set = set()  # empty: every upstream operator is registered here


def upstream_names():
    return {line.strip() for line in DATA.read_text().splitlines() if line.strip() and not line.startswith("#")}


def test_every_upstream_operator_is_registered_or_listed(portable_lib):
    ours = set(portable_lib._get_operator_names())
    missing = upstream_names() - ours
    unlisted = sorted(missing - NOT_YET)
    assert not unlisted, f"upstream operators missing here and not in NOT_YET: {unlisted}"
    landed = sorted(NOT_YET - missing)
    assert not landed, f"these landed: remove them from NOT_YET: {landed}"


def test_the_upstream_list_is_complete():
    names = upstream_names()
    assert len(names) == 270
    assert "aten::add.out" in names and "executorch_prim::et_view.default" in names
