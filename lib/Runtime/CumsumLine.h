//===- CumsumLine.h - One line of a cumulative sum, for both backends -----===//
//
// The CPU kernel and the CUDA kernel (one thread per line) of `cumsum` run
// this same function, so that both add the same elements in the same order
// in the same type and give the same bits. Compiled as host C++ by the CPU
// backend and the CUDA emulator, and as host and device code by nvcc.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_RUNTIME_CUMSUMLINE_H
#define LOOM_LIB_RUNTIME_CUMSUMLINE_H

#include <cstdint>
#include <type_traits>

#include "HostDevice.h"

namespace loomrt {

/// The type a scan adds in: T, or for integers its unsigned form (which
/// wraps instead of overflowing).
template <typename T, bool = std::is_integral<T>::value>
struct ScanAccumulator {
  using type = T;
};
template <typename T> struct ScanAccumulator<T, true> {
  using type = std::make_unsigned_t<T>;
};

/// The cumulative sum along one line of `n` elements `inner` apart,
/// starting at x and y: element j is the sum of 0..j (`exclusive`: 0..j-1;
/// `reverse`: from the end), added one after the other in T.
template <typename T>
LOOM_HOST_DEVICE inline void cumsumLine(const T *x, T *y, int64_t n,
                                        int64_t inner, bool exclusive,
                                        bool reverse) {
  using Acc = typename ScanAccumulator<T>::type;
  Acc sum = Acc(0);
  for (int64_t k = 0; k < n; ++k) {
    const int64_t at = (reverse ? n - 1 - k : k) * inner;
    const Acc value = Acc(x[at]);
    if (exclusive) {
      y[at] = T(sum);
      sum = Acc(sum + value);
    } else {
      sum = Acc(sum + value);
      y[at] = T(sum);
    }
  }
}

} // namespace loomrt

#undef LOOM_HOST_DEVICE

#endif // LOOM_LIB_RUNTIME_CUMSUMLINE_H
