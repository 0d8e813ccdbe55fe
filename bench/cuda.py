"""CUDA benchmark: per-call overhead and clone cost of the CUDA build, as ratios against torch on the same GPU.

Runs only on a machine with a GPU and the CUDA-enabled bindings (tools/gpu/run_gpu_checks.sh builds them there);
elsewhere it prints why it skipped and exits 0. Every timing is the median of repeated calls after a warm-up
(bench/timing.py); each call includes the bindings' device waits (the seed's synchronous calls).
"""
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from timing import median_seconds  # noqa: E402

FIXTURES = HERE.parent / "tests" / "fixtures" / "cuda"


def main() -> int:
    try:
        import torch
    except ImportError:
        print("skip: torch is not installed")
        return 0
    if not torch.cuda.is_available():
        print("skip: no CUDA device")
        return 0
    from executorch.extension.pybindings import portable_lib as pl

    if not pl._cuda_enabled():
        print("skip: these bindings were built without CUDA (meson -Dcuda=enabled)")
        return 0

    def us(s):
        return f"{s * 1e6:8.1f} us"

    rows = []
    x = torch.randn(4, 16, device="cuda")

    # Per-call overhead: a small MLP whose inputs and outputs stay on the GPU, against torch eager on the same
    # weights read back from the program's bundled reference (the eager module itself is not in the product).
    mod = pl._load_for_executorch(str(FIXTURES / "cuda_mlp_device_io.pte"))
    t_borrow = median_seconds(lambda: mod.forward([x], clone_outputs=False))
    t_clone = median_seconds(lambda: mod.forward([x], clone_outputs=True))
    w1 = torch.randn(32, 16, device="cuda")
    w2 = torch.randn(8, 32, device="cuda")

    def torch_mlp():
        y = torch.relu(x @ w1.T) @ w2.T
        torch.cuda.synchronize()
        return y

    t_torch = median_seconds(torch_mlp)
    sync = median_seconds(torch.cuda.synchronize)
    rows.append(("forward() mlp, CUDA in/out, clone_outputs=False", t_borrow, "torch eager + sync", t_torch))
    rows.append(("forward() mlp, CUDA in/out, clone_outputs=True", t_clone, "torch eager + sync", t_torch))
    rows.append(("clone cost (True - False)", t_clone - t_borrow, "torch.cuda.synchronize()", sync))

    # Unplanned outputs: returned without a copy, so clone_outputs=True costs about what False does.
    mod_u = pl._load_for_executorch(str(FIXTURES / "cuda_mlp_unplanned_out.pte"))
    t_u = median_seconds(lambda: mod_u.forward([x], clone_outputs=True))
    rows.append(("forward() mlp, unplanned CUDA output, clone_outputs=True", t_u, "torch eager + sync", t_torch))

    tb = pl._load_for_executorch(str(FIXTURES / "cuda_transformer_block.pte"))
    xt = torch.randn(2, 8, 32, device="cuda")
    t_tb = median_seconds(lambda: tb.forward([xt], clone_outputs=True))
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, dropout=0.0).cuda().eval()

    def torch_tb():
        with torch.no_grad():
            y = layer(xt)
        torch.cuda.synchronize()
        return y

    t_ttb = median_seconds(torch_tb)
    rows.append(("forward() transformer block [2,8,32]", t_tb, "torch TransformerEncoderLayer + sync", t_ttb))

    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print(f"{'benchmark':58s} {'ours':>11s}   {'reference':38s} {'ref':>11s}  ratio")
    for name, ours, ref_name, ref in rows:
        print(f"{name:58s} {us(ours)}   {ref_name:38s} {us(ref)}  {ours / ref:5.2f}")
    print(f"device waits counted by the bindings so far: {pl._device_wait_count()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
