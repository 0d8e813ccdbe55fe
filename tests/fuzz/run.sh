#!/usr/bin/env bash
# Builds the libFuzzer target (clang, ASan + UBSan, no suppressions) and fuzzes the runtime for SECONDS.
#
#   tests/fuzz/run.sh SECONDS [libFuzzer args...]     e.g. tests/fuzz/run.sh 60, or tests/fuzz/run.sh 3600 -jobs=2
#   tests/fuzz/run.sh --replay FILE...               runs the target once on each file (a finding, a regression)
#
# The seed corpus is the project's own fixtures (tests/fixtures/{exported,xnnpack,xnnpack_quantized,cuda,
# reliability,dynamic,llm_ops,quantized_ops,cortex_m}) plus every input that once was a finding
# (tests/fuzz/regressions, replayed first: a regression fails the run). New inputs the fuzzer finds go to
# build-fuzz/corpus, which is not committed. Any finding (a crash, a sanitizer report, a leak, a 25 s timeout, more
# than 2 GB of RSS or one allocation over 2 GB) fails the run, writes the input to build-fuzz/findings/ and exits
# non-zero; fix it and commit the input under tests/fuzz/regressions/. The timeout is wall-clock: on a loaded machine
# a slow input can trip it, and --replay tells whether it is real.
# Needs clang and libFuzzer (Debian: clang, libclang-rt-dev), which install_executorch.sh installs.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
out=${ETRT_FUZZ_BUILD:-$root/build-fuzz}
CXX=${CXX_FUZZ:-clang++}
command -v "$CXX" >/dev/null || { echo "run.sh: $CXX not found (apt-get install clang libclang-rt-dev)" >&2; exit 2; }
py=python3
"$py" -c "import tomllib" 2>/dev/null || py="$root/.venv/bin/python"

mkdir -p "$out/gen/etrt_generated" "$out/obj" "$out/corpus" "$out/findings"
# -Wno-psabi as in meson.build: the always-inlined Vec helpers (util/vec.h) never pass a vector across a call.
flags=(-std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all -Wno-psabi
       -Iinclude -I"$out/gen" -DETRT_GENERATED_KERNELS_SPLIT=1
       "-DETRT_FUZZ_PTD_PROGRAM=\"$root/tests/fixtures/reliability/program_data.pte\"")

# 1. The generated kernel table and one source per operator family (regenerated when gen/ changes).
stamp="$out/gen/.stamp"
if [ ! -f "$stamp" ] || [ -n "$(find gen -newer "$stamp" -type f -print -quit)" ]; then
  "$py" gen/generate.py --kernels-header "$out/gen/etrt_generated/portable_kernels.h"
  for toml in gen/ops/*.toml; do
    fam=$(basename "$toml" .toml)
    "$py" gen/generate.py --part "$fam" "$out/gen/etrt_generated/kernels_$fam.cpp"
  done
  "$py" gen/generate.py --converters-tu "$out/gen/etrt_generated/kernels__converters.cpp"
  touch "$stamp"
fi

# 2. Objects, two compiles at a time; an object is rebuilt when its source, any header or the flags changed.
# The kernel families are built without comparison tracing (trace-cmp): their loops compare loop counters on every
# element, and tracing those took over half of the campaign's time for no guidance (the shape checks that decide
# what a file reaches run in the loader, the method and the payload parsers, which keep full tracing). They keep
# edge coverage. They come first on the link line so that a kernel template also instantiated by the harness's own
# translation unit (the XNNPACK executor calls kernels directly) resolves to the untraced copy.
sources=("$out"/gen/etrt_generated/kernels_*.cpp tests/fuzz/fuzz_kernel_table.cpp tests/fuzz/fuzz_runtime.cpp)
kernel_flags=(-fno-sanitize-coverage=trace-cmp)
flags_id=$(printf '%s\n' "$CXX" "${flags[@]}" "${kernel_flags[@]}" | sha1sum | cut -c1-12)
if [ "$(cat "$out/obj/.flags" 2>/dev/null)" != "$flags_id" ]; then rm -f "$out"/obj/*.o; echo "$flags_id" > "$out/obj/.flags"; fi
objs=()
pids=()
for src in "${sources[@]}"; do
  obj="$out/obj/$(basename "$src" .cpp).o"
  objs+=("$obj")
  if [ ! -f "$obj" ] || [ "$src" -nt "$obj" ] || [ -n "$(find include -newer "$obj" -name '*.h' -print -quit)" ]; then
    echo "fuzz: compiling $(basename "$src")"
    extra=(-fsanitize=fuzzer-no-link)
    case "$src" in */kernels_*.cpp) extra+=("${kernel_flags[@]}") ;; esac
    "$CXX" "${flags[@]}" "${extra[@]}" -c "$src" -o "$obj" &
    pids+=($!)
    if [ "${#pids[@]}" -ge 2 ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
  fi
done
for p in "${pids[@]}"; do wait "$p"; done
bin="$out/fuzz_runtime"
"$CXX" "${flags[@]}" -fsanitize=fuzzer "${objs[@]}" -o "$bin" -pthread

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
limits=(-rss_limit_mb=2048 -malloc_limit_mb=2048 -timeout=25)

if [ "${1:-}" = "--replay" ]; then
  shift
  exec "$bin" "${limits[@]}" -runs=1 "$@"
fi

seconds=${1:-60}
shift || true
# 3. Regressions first: every committed finding must run clean.
shopt -s nullglob
regressions=(tests/fuzz/regressions/*)
shopt -u nullglob
if [ "${#regressions[@]}" -gt 0 ]; then
  echo "fuzz: replaying ${#regressions[@]} regression input(s)"
  "$bin" "${limits[@]}" -runs=1 "${regressions[@]}"
fi
# 4. The campaign.
seeds=(tests/fixtures/exported tests/fixtures/xnnpack tests/fixtures/xnnpack_quantized tests/fixtures/cuda
       tests/fixtures/reliability tests/fixtures/dynamic tests/fixtures/llm_ops tests/fixtures/quantized_ops
       tests/fixtures/cortex_m
       tests/fuzz/regressions)
echo "fuzz: running for ${seconds}s"
"$bin" "${limits[@]}" -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$out/findings/" \
  -max_len=262144 "$@" "$out/corpus" "${seeds[@]}"
