// The headers every operator family's translation unit parses first, precompiled once per kernel library
// (meson's cpp_pch: it compiles this file and includes it ahead of each source of the library). About 0.7 s of
// each family's compile is parsing these; the kernel libraries hold 30-odd families. Every source of those
// libraries defines ETRT_GENERATED_KERNELS_SPLIT, so it is defined here before anything reads it.
#define ETRT_GENERATED_KERNELS_SPLIT 1
#include "etrt/kernels/arg_unpack.h"
#include "etrt/kernels/kernel.h"
#include "etrt/kernels/util/broadcast.h"
#include "etrt/kernels/util/dtype_util.h"
#include "etrt/kernels/util/isa.h"
#include "etrt/kernels/util/movement_util.h"
