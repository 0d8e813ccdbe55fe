"""The runtime's log lines go through Python's sys.stderr (not fd 2), as upstream's do: a failed load, a missing
operator, a missing backend and a missing file each leave a line there, and the exception keeps the full message.
_set_log_level("off") (or ETRT_LOG_LEVEL=off) silences them."""
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
ADD = ROOT / "tests" / "fixtures" / "exported" / "add.pte"
XNN = ROOT / "tests" / "fixtures" / "xnnpack" / "xnn_cnn.pte"


def edited(path: pathlib.Path, old: bytes, new: bytes) -> bytes:
    data = path.read_bytes()
    assert data.count(old) == 1 and len(old) == len(new)
    return data.replace(old, new)


def failures(pl, tmp_path):
    """(what, call) for each failure that upstream logs."""
    bad_identifier = bytearray(ADD.read_bytes())
    bad_identifier[4:8] = b"XX99"
    missing_op = edited(ADD, b"aten::add", b"aten::adz")
    missing_backend = edited(XNN, b"XnnpackBackend", b"XnnpackBackenz")
    return [
        ("not an ExecuTorch program", lambda: pl._load_for_executorch_from_buffer(bytes(bad_identifier))),
        ("aten::adz", lambda: pl._load_for_executorch_from_buffer(missing_op).forward([])),
        ("XnnpackBackenz", lambda: pl._load_program_from_buffer(missing_backend).load_method("forward")),
        ("missing.pte", lambda: pl._load_for_executorch(str(tmp_path / "missing.pte"))),
    ]


def test_each_failure_leaves_a_line_on_sys_stderr(portable_lib, capsys, tmp_path):
    # capsys replaces sys.stderr: what the runtime logs is captured only if it goes through sys.stderr.
    for what, call in failures(portable_lib, tmp_path):
        capsys.readouterr()
        with pytest.raises(RuntimeError) as caught:
            call()
        assert what in str(caught.value)
        logged = capsys.readouterr().err
        assert what in logged, f"nothing about {what!r} on sys.stderr; got {logged!r}"
        assert str(caught.value).split(" (Error::")[0].split("] ")[-1] in logged  # the same message, in full


def test_set_log_level_off_silences_them(portable_lib, capsys, tmp_path):
    portable_lib._set_log_level("off")
    try:
        capsys.readouterr()
        for _, call in failures(portable_lib, tmp_path):
            with pytest.raises(RuntimeError):
                call()
        assert capsys.readouterr().err == ""
    finally:
        portable_lib._set_log_level("info")
    with pytest.raises(ValueError, match="log level must be one of"):
        portable_lib._set_log_level("loud")


def test_missing_file_is_both_runtime_error_and_file_not_found(portable_lib, tmp_path):
    missing = tmp_path / "missing.pte"
    for call in (lambda: portable_lib._load_for_executorch(str(missing)),
                 lambda: portable_lib._load_program(str(missing)),
                 lambda: portable_lib._load_for_executorch(str(ADD), data_path=str(tmp_path / "missing.ptd"))):
        with pytest.raises(FileNotFoundError) as caught:
            call()
        assert isinstance(caught.value, RuntimeError) and isinstance(caught.value, portable_lib.ExecuTorchFileNotFoundError)
        assert caught.value.errno == 2 and caught.value.filename.startswith(str(tmp_path))
        assert "missing.pt" in str(caught.value)
