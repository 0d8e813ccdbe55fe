// The one test translation unit that instantiates the generated kernel table (compile time stays bounded).
#define ETRT_GENERATED_KERNELS_SPLIT 1
#include "etrt_generated/portable_kernels.h"

namespace etrt::test {
std::span<const KernelEntry> kernel_table() { return generated::portable_kernels(); }
}  // namespace etrt::test
