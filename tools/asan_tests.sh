#!/usr/bin/env bash
# A Catch2 suite under AddressSanitizer + UBSan:
#   tools/asan_tests.sh device    # payload parser, CUDA delegate host path, CUDA fixtures on the emulated device,
#                                 # truncation and byte-flip sweeps (about 4 minutes on 2 cores)
#   tools/asan_tests.sh kernels   # every kernel test: the kernels are templates, so the tests' own instantiations
#                                 # are the instrumented code (about 8 minutes on 2 cores)
#   tools/asan_tests.sh runtime   # corpus, fixtures, robustness sweeps, ETDump
# Needs build-tests (./tests/run_all.sh makes it) for the generated kernel table and its library. Extra arguments
# go to the test binary (e.g. a tag such as "[upsample]").
# Corrupt files ask for huge arenas on purpose; allocator_may_return_null lets those fail as they do in release.
set -euo pipefail
cd "$(dirname "$0")/.."
suite=${1:-device}
shift || true
case "$suite" in
  device) sources=(tests/cpp/device/test_*.cpp) ;;
  kernels) sources=(tests/cpp/kernels/test_*.cpp) ;;
  runtime) sources=(tests/cpp/test_corpus.cpp tests/cpp/test_robustness.cpp tests/cpp/test_fixtures.cpp
                    tests/cpp/test_headers.cpp tests/cpp/test_etdump.cpp tests/cpp/test_reliability.cpp
                    tests/cpp/test_xnnpack.cpp tests/cpp/test_xnnpack_quantized.cpp) ;;
  *) echo "usage: $0 device|kernels|runtime [catch2 args]" >&2; exit 2 ;;
esac
ninja -C build-tests gen/etrt_generated/libetrt_portable_kernels.a >/dev/null
out=${TMPDIR:-/tmp}/etrt-asan-$suite-tests
objdir=$out.objs
mkdir -p "$objdir"
flags=(-std=c++20 -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined -march=native
       -Iinclude -Ibuild-tests/gen -Itests/cpp -Itests/cpp/kernels -DETRT_GENERATED_KERNELS_SPLIT=1
       "-DETRT_DEFAULT_CORPUS_DIR=\"$PWD/../shared/corpus\""
       "-DETRT_DEFAULT_FIXTURE_DIR=\"$PWD/tests/fixtures/exported\""
       "-DETRT_DEFAULT_CUDA_FIXTURE_DIR=\"$PWD/tests/fixtures/cuda\"")
# One object per source, two at a time, so a 2-core machine stays responsive and a rerun rebuilds what changed.
objs=()
pids=()
for src in tests/cpp/catch_main.cpp tests/cpp/kernel_table.cpp "${sources[@]}"; do
  obj=$objdir/$(echo "$src" | tr / _).o
  objs+=("$obj")
  if [ ! -f "$obj" ] || [ "$src" -nt "$obj" ] || [ -n "$(find include -newer "$obj" -name '*.h' -print -quit)" ]; then
    echo "g++ $src"
    g++ "${flags[@]}" -c "$src" -o "$obj" &
    pids+=($!)
    if [ "${#pids[@]}" -ge 2 ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
  fi
done
for p in "${pids[@]}"; do wait "$p"; done   # each wait fails the script (set -e) if that compile failed
g++ "${flags[@]}" "${objs[@]}" build-tests/gen/etrt_generated/libetrt_portable_kernels.a -o "$out" -pthread
ASAN_OPTIONS=allocator_may_return_null=1 "$out" "$@" 2>&1 | grep -v "^WARNING: AddressSanitizer failed to allocate"
