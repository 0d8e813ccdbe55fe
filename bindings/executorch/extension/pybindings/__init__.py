"""ExecuTorch Python bindings backed by a header-only runtime (no ATen, no libtorch)."""
