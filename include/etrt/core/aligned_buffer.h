// Heap storage on 64-byte boundaries for the kernels' vector loads. A block from new[] or malloc large enough to be
// mapped on its own starts 16 bytes past a page boundary, so every 64-byte load of it straddled two cache lines: the
// XNNPACK delegate's arena, packed weights and scratch all did, and a depthwise layer ran 25% slower for it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>

namespace etrt {

inline constexpr std::align_val_t kBufferAlign{64};

template <class T>
struct AlignedDelete {
  void operator()(T* p) const noexcept { ::operator delete[](p, kBufferAlign); }
};

/// An array of trivial values (left uninitialised) on a 64-byte boundary; null where it cannot be allocated.
template <class T>
using AlignedArray = std::unique_ptr<T[], AlignedDelete<T>>;

template <class T>
inline AlignedArray<T> make_aligned_array(size_t n) noexcept {
  static_assert(std::is_trivially_default_constructible_v<T> && std::is_trivially_destructible_v<T>);
  if (n == 0) n = 1;
  if (n > SIZE_MAX / sizeof(T)) return AlignedArray<T>(nullptr);
  return AlignedArray<T>(static_cast<T*>(::operator new[](n * sizeof(T), kBufferAlign, std::nothrow)));
}

/// The calling thread's scratch array of at least n values, kept for its next call (no allocation once it fits);
/// null where it cannot be allocated. Each Tag names one user's array, so two kernels' scratch never alias.
template <class T, class Tag>
inline T* thread_scratch(size_t n) noexcept {
  thread_local AlignedArray<T> array;
  thread_local size_t capacity = 0;
  if (n > capacity) {
    array = make_aligned_array<T>(n);
    capacity = array ? n : 0;
  }
  return array.get();
}

/// For std::vector's storage on a 64-byte boundary.
template <class T>
struct AlignedAllocator {
  using value_type = T;
  AlignedAllocator() = default;
  template <class U>
  AlignedAllocator(const AlignedAllocator<U>&) noexcept {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kBufferAlign)); }
  void deallocate(T* p, size_t) noexcept { ::operator delete(p, kBufferAlign); }
  template <class U>
  bool operator==(const AlignedAllocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace etrt
