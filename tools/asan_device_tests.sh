#!/usr/bin/env bash
# The device tests (tests/cpp/device: payload parser, CUDA delegate host path, CUDA fixtures on the emulated
# device, truncation and byte-flip sweeps) under AddressSanitizer + UBSan. Needs build-tests (./tests/run_all.sh
# makes it) for the generated kernel table and its library. About 4 minutes on 2 cores.
# Corrupt files ask for huge arenas on purpose; allocator_may_return_null lets those fail as they do in release.
set -euo pipefail
cd "$(dirname "$0")/.."
ninja -C build-tests gen/etrt_generated/libetrt_portable_kernels.a >/dev/null
out=${TMPDIR:-/tmp}/etrt-asan-device-tests
g++ -std=c++20 -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined -march=native \
  -Iinclude -Ibuild-tests/gen -Itests/cpp -DETRT_GENERATED_KERNELS_SPLIT=1 \
  "-DETRT_DEFAULT_CORPUS_DIR=\"$PWD/../shared/corpus\"" \
  "-DETRT_DEFAULT_FIXTURE_DIR=\"$PWD/tests/fixtures/exported\"" \
  "-DETRT_DEFAULT_CUDA_FIXTURE_DIR=\"$PWD/tests/fixtures/cuda\"" \
  tests/cpp/catch_main.cpp tests/cpp/kernel_table.cpp tests/cpp/device/test_*.cpp \
  build-tests/gen/etrt_generated/libetrt_portable_kernels.a -o "$out" -pthread
ASAN_OPTIONS=allocator_may_return_null=1 "$out" 2>&1 | grep -v "^WARNING: AddressSanitizer failed to allocate"
