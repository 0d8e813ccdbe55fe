// The int8 GEMM's tile kernel for CPUs with AMX (Intel Sapphire Rapids and later): the same integer sums as the
// VNNI micro-kernels (util/qgemm.h, Note [int8 gemm]) from the CPU's tile multiply, 32 rows by one 32-column panel
// per call.
//
// Note [amx tiles]: eight tile registers of up to 16 rows x 64 bytes. A call keeps four 16 x 16 int32 accumulator
// tiles (rows 0-15 / 16-31 by columns 0-15 / 16-31 of the panel) and, per block of 64 k, loads two tiles of A
// (16 rows x 64 bytes each, at A's row stride) and two of B, then issues four tile dot products (unsigned A bytes
// by signed B bytes, four pairs per int32, as vpdpbusd). B's panel layout is already the tile's: 16 groups of four
// k by 16 columns x 4 bytes is 16 rows of 64 bytes, one 128-byte panel row apart. The packer pads every panel to
// whole blocks of 64 k with zero weights, so the A bytes a block reads past k (the next row's, or the padding)
// add nothing. The accumulators go through memory once, into the float epilogue of the VNNI kernels.
//
// Linux hands a process the tile state only on request (arch_prctl ARCH_REQ_XCOMP_PERM for XTILEDATA); a CPU with
// AMX whose kernel refuses runs the VNNI kernels.
#pragma once

#include <cstdint>
#include <cstring>

#include "etrt/kernels/util/isa.h"

#if defined(ETRT_ISA_X86) && defined(__linux__)
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#define ETRT_AMX 1
#endif

namespace etrt::kernels::qgemm {

/// Whether this process may use the tile registers: asked of the kernel once, on first use.
inline bool amx_permitted() {
#ifdef ETRT_AMX
  static const bool ok = [] {
    constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;  // arch_prctl codes (asm/prctl.h)
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return ok;
#else
  return false;
#endif
}

/// Whether the int8 GEMM runs on the tile kernel (isa level amx, and the kernel's grant).
inline bool has_amx() { return isa::level() >= isa::kAmx && amx_permitted(); }

/// Rows of C one tile-kernel call computes, and the k of one tile block.
inline constexpr int kAmxRows = 32;
inline constexpr int kAmxK = 64;

#ifdef ETRT_AMX
#define ETRT_TARGET_AMX \
  gnu::target("amx-tile,amx-int8,avx512vnni,avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt")

namespace detail {

/// The 64-byte tile configuration: palette 1, every tile 16 rows of 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

constexpr TileConfig tile_config() {
  TileConfig c;
  for (int t = 0; t < 8; ++t) {
    c.colsb[t] = 64;
    c.rows[t] = 16;
  }
  return c;
}

/// Loads the configuration on this thread (before a run of amx_tiles calls; amx_release after them). From a
/// constant in memory: GCC 12 does not see ldtilecfg read its operand and dropped the stores to a local one.
[[ETRT_TARGET_AMX]] inline void amx_configure() {
  static constexpr TileConfig kConfig = tile_config();
  _tile_loadconfig(&kConfig);
}
[[ETRT_TARGET_AMX]] inline void amx_release() { _tile_release(); }

#pragma GCC diagnostic push  // GCC bug 105593, as for micro_vnni
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
/// acc[32][32] (int32, rows of C by the panel's columns) = A (32 rows from a, row stride lda; kblocks x 64 bytes
/// read from each) x the panel at b (kblocks x 16 groups of four k, 128 bytes a group).
[[ETRT_TARGET_AMX]] inline void amx_tiles(const uint8_t* a, int64_t lda, const int8_t* b, int64_t kblocks,
                                          int32_t (*acc)[32]) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t kb = 0; kb < kblocks; ++kb) {
    const uint8_t* ak = a + kb * kAmxK;
    const int8_t* bk = b + kb * 16 * 128;
    _tile_loadd(4, ak, lda);
    _tile_loadd(5, ak + 16 * lda, lda);
    _tile_loadd(6, bk, 128);
    _tile_loadd(7, bk + 64, 128);
    _tile_dpbusd(0, 4, 6);
    _tile_dpbusd(1, 4, 7);
    _tile_dpbusd(2, 5, 6);
    _tile_dpbusd(3, 5, 7);
  }
  _tile_stored(0, &acc[0][0], 128);
  _tile_stored(1, &acc[0][16], 128);
  _tile_stored(2, &acc[16][0], 128);
  _tile_stored(3, &acc[16][16], 128);
}
#pragma GCC diagnostic pop

}  // namespace detail
#endif

}  // namespace etrt::kernels::qgemm
