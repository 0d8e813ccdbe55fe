// The generated kernel table for the fuzz target; the kernel families are compiled (instrumented) by run.sh.
#define ETRT_GENERATED_KERNELS_SPLIT 1
#include "etrt_generated/portable_kernels.h"

namespace etrt::fuzz {
std::span<const KernelEntry> kernel_table() { return generated::portable_kernels(); }
}  // namespace etrt::fuzz
