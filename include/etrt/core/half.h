// 16-bit float storage types. Kernels compute in float and store back with round-to-nearest-even.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

namespace etrt {

struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  BFloat16(float f) : bits(from_float(f)) {}  // NOLINT: arithmetic conversion like a builtin float
  operator float() const { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }
  static uint16_t from_float(float f) {
    uint32_t u = std::bit_cast<uint32_t>(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>(u >> 16);
  }
};

struct Half {
  uint16_t bits = 0;
  Half() = default;
  Half(float f) : bits(from_float(f)) {}  // NOLINT
  operator float() const { return to_float(bits); }

  static float to_float(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t u;
    if (exp == 0) {
      if (man == 0) {
        u = sign;
      } else {  // subnormal: normalise
        exp = 127 - 15 + 1;
        while ((man & 0x400u) == 0) {
          man <<= 1;
          --exp;
        }
        man &= 0x3ffu;
        u = sign | (exp << 23) | (man << 13);
      }
    } else if (exp == 31) {
      u = sign | 0x7f800000u | (man << 13);
    } else {
      u = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    return std::bit_cast<float>(u);
  }

  static uint16_t from_float(float f) {
    const uint32_t u = std::bit_cast<uint32_t>(f);
    const uint32_t sign = (u >> 16) & 0x8000u;
    const uint32_t abs = u & 0x7fffffffu;
    if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
    if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
    if (abs < 0x38800000u) {  // subnormal or zero in half
      const float af = std::bit_cast<float>(abs);
      // 2^-24 is the half subnormal step; rounding via float arithmetic is exact-to-nearest-even here.
      const float scaled = af * 16777216.0f;
      auto m = static_cast<uint32_t>(scaled);
      const float rem = scaled - static_cast<float>(m);
      if (rem > 0.5f || (rem == 0.5f && (m & 1u))) ++m;
      return static_cast<uint16_t>(sign | m);
    }
    uint32_t r = abs - ((127u - 15u) << 23);
    r += 0xfffu + ((r >> 13) & 1u);
    return static_cast<uint16_t>(sign | (r >> 13));
  }
};

}  // namespace etrt
