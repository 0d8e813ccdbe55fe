#!/usr/bin/env bash
# Cross-compiles the Catch2 kernel and runtime suites for aarch64 and runs them under qemu-aarch64: the C++ core
# must stay portable to ARM, where most ExecuTorch users deploy. Run by hand (it takes tens of minutes on 2 cores),
# not in CI.
#
#   tools/arm/run_aarch64_tests.sh [WORK_DIR]        (default /tmp/etrt-aarch64)
#
# Needs Debian's g++-aarch64-linux-gnu, qemu-user and catch2 (v2, header only); apt-get installs them when missing.
# qemu's default CPU has the ARMv8.2 dot product, so the suites run both aarch64 levels (the tests force each:
# neondot and neon, Note [isa dispatch]); the quantized XNNPACK tests then run again as a Cortex-A53 (ARMv8.0, no
# dot product), where the detection must keep SDOT from ever running.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
work="${1:-/tmp/etrt-aarch64}"
cxx=aarch64-linux-gnu-g++
jobs=$(nproc)

need=()
command -v "$cxx" >/dev/null || need+=(g++-aarch64-linux-gnu)
command -v qemu-aarch64 >/dev/null || need+=(qemu-user)
[ -f /usr/include/catch2/catch.hpp ] || need+=(catch2)
if [ ${#need[@]} -gt 0 ]; then
  sudo_cmd=(); [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${need[@]}" >/dev/null
fi

mkdir -p "$work/gen/etrt_generated" "$work/inc/catch2" "$work/obj"
cp /usr/include/catch2/catch.hpp "$work/inc/catch2/"   # header only: no host library enters the link
gen="$work/gen/etrt_generated"
python3 "$root/gen/generate.py" --kernels-header "$gen/portable_kernels.h"
python3 "$root/gen/generate.py" --converters-tu "$gen/kernels__converters.cpp"
for t in "$root"/gen/ops/*.toml; do
  f=$(basename "$t" .toml)
  python3 "$root/gen/generate.py" --part "$f" "$gen/kernels_$f.cpp"
done

flags=(-std=c++20 -O1 -DNDEBUG -DETRT_GENERATED_KERNELS_SPLIT=1 -I"$root/include" -I"$work/gen" -I"$work/inc"
       -I"$root/tests/cpp" -I"$root/tests/cpp/kernels"
       "-DETRT_DEFAULT_FIXTURE_DIR=\"$root/tests/fixtures/exported\""
       "-DETRT_DEFAULT_CORPUS_DIR=\"$root/../shared/corpus\"")
export cxx work root; export flags_str="${flags[*]}"

echo "== compiling the kernel library ($(ls "$gen"/kernels_*.cpp | wc -l) translation units, $jobs jobs)"
mapfile -t kernel_srcs < <(ls "$gen"/kernels_*.cpp)
mapfile -t test_kernel_srcs < <(ls "$root"/tests/cpp/kernels/test_*.cpp)
runtime_srcs=("$root"/tests/cpp/test_{corpus,robustness,fixtures,headers,etdump,xnnpack,xnnpack_quantized,xnnpack_nodes,reliability}.cpp)
all=("${kernel_srcs[@]}" "${test_kernel_srcs[@]}" "${runtime_srcs[@]}" "$root/tests/cpp/kernel_table.cpp"
     "$root/tests/cpp/catch_main.cpp")
printf '%s\n' "${all[@]}" | xargs -P "$jobs" -I{} bash -c \
  'src={}; obj="$work/obj/$(echo "$src" | tr "/" "_").o"; [ -f "$obj" ] && [ -z "$(find "$root/include" "$src" -newer "$obj" -print -quit)" ] || { echo "  $src"; $cxx $flags_str -c "$src" -o "$obj"; }'

o() { echo "$work/obj/$(echo "$1" | tr '/' '_').o"; }
objs() { for s in "$@"; do o "$s"; done; }
mapfile -t kernel_objs < <(objs "${kernel_srcs[@]}")
"$cxx" -o "$work/kernel_tests" $(objs "${test_kernel_srcs[@]}") "$(o "$root/tests/cpp/kernel_table.cpp")" \
  "$(o "$root/tests/cpp/catch_main.cpp")" "${kernel_objs[@]}" -pthread
"$cxx" -o "$work/runtime_tests" $(objs "${runtime_srcs[@]}") "$(o "$root/tests/cpp/kernel_table.cpp")" \
  "$(o "$root/tests/cpp/catch_main.cpp")" "${kernel_objs[@]}" -pthread

rc=0
for t in kernel_tests runtime_tests; do
  echo "== $t under qemu-aarch64"
  (cd "$root" && qemu-aarch64 -L /usr/aarch64-linux-gnu "$work/$t" --durations no) | tail -4 || rc=1
done
echo "== runtime_tests [quantized] under qemu-aarch64 -cpu cortex-a53 (no dot product)"
(cd "$root" && qemu-aarch64 -cpu cortex-a53 -L /usr/aarch64-linux-gnu "$work/runtime_tests" "[quantized]" \
   --durations no) | tail -4 || rc=1
exit $rc
