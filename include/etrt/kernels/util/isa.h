// Note [isa dispatch]: the library is built for a baseline x86-64 (meson option `march`, x86-64-v2 by default), so
// it loads on any CPU of that generation. A hot loop gets the machine's width by being compiled again under a
// function-level target attribute and chosen at run time: `isa::dispatch(body)` instantiates `body` (an
// ETRT_ISA_INLINE lambda) once per level and calls the one for `isa::level()`. Only the chosen copy ever runs, so
// no instruction beyond the baseline executes on a CPU that lacks it. The body is inlined into each wrapper, so
// everything it inlines in turn is compiled for that wrapper's instruction set; what it calls out of line stays at
// the baseline, which keeps a library function shared between variants from being built for the wrong CPU.
//
// The level is detected once per process, capped by the ETRT_ISA environment variable (amx, avx512vnni, avx512, avx2,
// baseline) and, in tests, by `force_level`: a cap above what the CPU has is lowered to what it has.
//
// On aarch64 the baseline is ARMv8-A, whose Advanced SIMD (NEON) every core has, so the hot kernels' NEON variants
// are the baseline's (written in intrinsics where GCC's vectorizer leaves speed behind). The one optional extension
// they use is the ARMv8.2 byte dot product (SDOT, `dotprod`), level 1 there (ETRT_ISA=neondot; `neon` caps at 0),
// read from the kernel's hardware capabilities (getauxval); the kernel that uses it emits SDOT itself (Note [qd8 on
// neon]) and runs only at that level.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <string_view>

namespace etrt::kernels::isa {

/// 4 = AVX-512 VNNI and AMX (the tile byte products of the int8 GEMM, util/qgemm_amx.h; usable only once the
/// kernel grants the process the tile state, util/qgemm_amx.h amx_permitted), 3 = AVX-512 with VNNI (the byte dot
/// products of the int8 GEMM, util/qgemm.h), 2 = AVX-512 (F, BW, DQ, VL) with AVX2 + FMA, 1 = AVX2 + FMA + F16C,
/// 0 = the build's baseline. Code that needs neither asks for `>= kAvx512`.
enum Level : int { kBaseline = 0, kAvx2 = 1, kAvx512 = 2, kAvx512Vnni = 3, kAmx = 4 };
/// aarch64's levels: 0 = NEON (the baseline), 1 = NEON with the SDOT byte dot product.
enum ArmLevel : int { kNeon = 0, kNeonDot = 1 };

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ETRT_ISA_X86 1
#define ETRT_TARGET_AVX2 gnu::target("avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt")
#define ETRT_TARGET_AVX512 gnu::target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt")
#define ETRT_TARGET_AVX512VNNI \
  gnu::target("avx512vnni,avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt")
// A lambda inside a target function is compiled as its own function, without the enclosing target; one that uses
// that level's intrinsics names it (the [[]] form after a lambda's parameters would apply to its type).
#define ETRT_LAMBDA_AVX2 __attribute__((always_inline, target("avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt")))
#define ETRT_LAMBDA_AVX512 \
  __attribute__((always_inline, target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt")))
#include <cpuid.h>
#endif

#if defined(__aarch64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__)
#define ETRT_ISA_ARM64 1
#include <sys/auxv.h>
#endif

/// Marks a lambda handed to dispatch(): it must be inlined into each variant, or it would run at the baseline.
#define ETRT_ISA_INLINE __attribute__((always_inline))

/// Tests set this to run a narrower variant (-1: what the CPU has).
inline int force_level = -1;

/// The cap ETRT_ISA asks for, -1 when unset or unknown. Read once, so a process runs one set of kernels.
inline int env_level() {
  static const int level = [] {
    const char* v = std::getenv("ETRT_ISA");
    if (!v) return -1;
    const std::string_view s(v);
    return s == "amx"          ? int{kAmx}
           : s == "avx512vnni" ? int{kAvx512Vnni}
           : s == "avx512"   ? int{kAvx512}
           : s == "avx2"     ? int{kAvx2}
           : s == "baseline" ? int{kBaseline}
           : s == "neondot"  ? int{kNeonDot}
           : s == "neon"     ? int{kNeon}
                             : -1;
  }();
  return level;
}

/// What this CPU supports, detected once.
inline int cpu_supported() {
#ifdef ETRT_ISA_X86
  static const int level = [] {
    __builtin_cpu_init();
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                      __builtin_cpu_supports("f16c") && __builtin_cpu_supports("bmi2");
    const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    const bool vnni = avx512 && __builtin_cpu_supports("avx512vnni");
    // AMX-TILE and AMX-INT8: CPUID leaf 7, EDX bits 24 and 25 (the OS's grant is asked for where it is used).
    unsigned a = 0, b = 0, c = 0, d = 0;
    const bool amx = vnni && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d >> 24 & 1) && (d >> 25 & 1);
    return amx ? int{kAmx} : vnni ? int{kAvx512Vnni} : avx512 ? int{kAvx512} : avx2 ? int{kAvx2} : int{kBaseline};
  }();
  return level;
#elif defined(ETRT_ISA_ARM64)
  static const int level = [] {
    constexpr unsigned long kHwcapAsimdDp = 1ul << 20;  // HWCAP_ASIMDDP in the Linux arm64 ABI
    return getauxval(AT_HWCAP) & kHwcapAsimdDp ? int{kNeonDot} : int{kNeon};
  }();
  return level;
#else
  return kBaseline;
#endif
}

/// The level the kernels run at: the CPU's, capped by force_level or ETRT_ISA.
inline int level() {
  const int want = force_level >= 0 ? force_level : env_level();
  return want >= 0 ? std::min(want, cpu_supported()) : cpu_supported();
}

#ifdef ETRT_ISA_X86
/// Whether AVX-512 VBMI (byte permutes across a register) may run: the CPU has it and the level is AVX-512 or above.
inline bool avx512_vbmi() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512vbmi") != 0;
  }();
  return has && level() >= kAvx512;
}
#endif

/// The name of a level, as ETRT_ISA spells it.
inline std::string_view level_name(int l) {
#ifdef ETRT_ISA_ARM64
  return l >= kNeonDot ? "neondot" : "neon";
#else
  return l >= kAmx          ? "amx"
         : l == kAvx512Vnni ? "avx512vnni"
         : l == kAvx512     ? "avx512"
         : l == kAvx2       ? "avx2"
                            : "baseline";
#endif
}

#ifdef ETRT_ISA_X86
template <class F>
[[ETRT_TARGET_AVX512]] inline decltype(auto) on_avx512(F& body) {
  return body();
}
template <class F>
[[ETRT_TARGET_AVX2]] inline decltype(auto) on_avx2(F& body) {
  return body();
}
#endif

/// Note [vector lanes per level]: a body written over vec::Vec<L> gets L from the level it runs at, one register's
/// floats: `body.template operator()<L>()` with L = 16 at AVX-512, 8 at AVX2, 4 at the baseline (SSE, NEON). GCC
/// lowers a generic vector wider than the target's registers by halves for arithmetic, but its comparisons and
/// selects (`v < lo ? lo : v`, every clamp and range check) one lane at a time: a Vec<16> loop compiled for AVX2
/// ran scalar, and SiLU there took 2.7 ns an element against 0.28 at AVX-512 (efficientnet_b0 2.6x slower at AVX2
/// than at AVX-512 on a Zen 4, whose FMA rate is the same for both). aarch64's GCC does the same to a Vec<16> or a
/// Vec<8> on NEON's 128-bit registers (a compare and a select per lane). kMaxLanes 8 caps it at AVX2, as
/// dispatch_avx2 does, for loops bound by memory.
template <int kMaxLanes = 16, class F>
inline decltype(auto) dispatch_lanes(F&& body) {
  static_assert(kMaxLanes == 16 || kMaxLanes == 8);
#ifdef ETRT_ISA_X86
  const int l = level();
  if constexpr (kMaxLanes == 16) {
    if (l >= kAvx512) {
      auto wide = [&]() ETRT_ISA_INLINE -> decltype(auto) { return body.template operator()<16>(); };
      return on_avx512(wide);
    }
  }
  if (l >= kAvx2) {
    auto wide = [&]() ETRT_ISA_INLINE -> decltype(auto) { return body.template operator()<8>(); };
    return on_avx2(wide);
  }
#endif
  return body.template operator()<4>();
}

/// Runs `body` compiled for the widest level available (Note [isa dispatch]).
template <class F>
inline decltype(auto) dispatch(F&& body) {
  return dispatch_lanes([&]<int>() ETRT_ISA_INLINE -> decltype(auto) { return body(); });
}

/// As dispatch(), with AVX2 as the widest: for loops bound by memory, where an AVX-512 copy adds code and compile
/// time for no speed.
template <class F>
inline decltype(auto) dispatch_avx2(F&& body) {
  return dispatch_lanes<8>([&]<int>() ETRT_ISA_INLINE -> decltype(auto) { return body(); });
}

}  // namespace etrt::kernels::isa
