// lc0rs hip-emu: C entry points into HIP-CPU for the kernels of hip/, appended to the kernel
// source when the emulator library is built. Each kernel gets
//   int lc0rs_launch_NAME(const unsigned grid[3], const unsigned block[3], unsigned shared_bytes,
//                         const unsigned long long* slots, int count)
// which unpacks the 8-byte argument slots by the kernel's own parameter types, launches it
// through HIP-CPU and waits for it. Returns 0, an error code below, or -(1000 + L) where some
// thread of a block did not reach the `__syncthreads()` on line L of the translation unit.
#include <cstdint>
#include <tuple>
#include <type_traits>

#define LC0RS_EMU_WRONG_ARGUMENT_COUNT -1
#define LC0RS_EMU_LAUNCH_FAILED -2

// One slot as parameter type P: pointers are addresses, 32-bit values sit in the low bytes.
template <typename P>
static P lc0rs_unpack(unsigned long long slot) {
  if constexpr (std::is_pointer_v<P>) {
    return reinterpret_cast<P>(static_cast<std::uintptr_t>(slot));
  } else if constexpr (std::is_same_v<P, float>) {
    const std::uint32_t bits = static_cast<std::uint32_t>(slot);
    float value;
    std::memcpy(&value, &bits, sizeof value);
    return value;
  } else {
    static_assert(std::is_integral_v<P>, "kernel parameters are pointers, integers or floats");
    return static_cast<P>(slot);
  }
}

template <typename... Ps, std::size_t... I>
static std::tuple<Ps...> lc0rs_unpack_all(const unsigned long long* slots, std::index_sequence<I...>) {
  return std::tuple<Ps...>{lc0rs_unpack<Ps>(slots[I])...};
}

template <typename... Ps>
static int lc0rs_launch(void (*kernel)(Ps...), const unsigned* grid, const unsigned* block,
                        unsigned shared_bytes, const unsigned long long* slots, int count) {
  if (count != static_cast<int>(sizeof...(Ps))) return LC0RS_EMU_WRONG_ARGUMENT_COUNT;
  const auto args = lc0rs_unpack_all<Ps...>(slots, std::index_sequence_for<Ps...>{});
  ++lc0rs_launch_number;  // a new launch: the barrier counts start afresh
  ::hip::detail::launch(
      dim3(grid[0], grid[1], grid[2]), dim3(block[0], block[1], block[2]), shared_bytes, nullptr,
      [=](auto&&... xs) noexcept { kernel(std::forward<decltype(xs)>(xs)...); }, args);
  if (hipDeviceSynchronize() != hipSuccess || hipGetLastError() != hipSuccess) return LC0RS_EMU_LAUNCH_FAILED;
  const int missed = lc0rs_missed_barrier_line.exchange(0);
  return missed ? -(1000 + missed) : 0;
}

#define LC0RS_ENTRY(name)                                                                  \
  extern "C" __attribute__((visibility("default"))) int lc0rs_launch_##name(               \
      const unsigned* grid, const unsigned* block, unsigned shared_bytes,                  \
      const unsigned long long* slots, int count) {                                        \
    return lc0rs_launch(name, grid, block, shared_bytes, slots, count);                    \
  }
