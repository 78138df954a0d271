//===- DropoutMask.h - Which elements a dropout keeps, for both backends --===//
//
// The CPU kernel and the CUDA kernel of `dropout` draw their masks with
// these functions, so that both keep the same elements (plan-format.md,
// `dropout`). The mask is a counter-based hash of the seed, the training
// step and each element's index in the logical (unsplit) tensor, so a
// rank's block of a split tensor draws exactly its part of the whole
// tensor's mask. Compiled as host C++ by the CPU backend and the CUDA
// emulator, and as host and device code by nvcc.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_RUNTIME_DROPOUTMASK_H
#define LOOM_LIB_RUNTIME_DROPOUTMASK_H

#include <cstdint>

#include "HostDevice.h"

namespace loomrt {

/// The most dimensions a split dropout's block may have.
constexpr int kDropoutMaxRank = 8;

/// One step of the splitmix64 generator from state `x`: add the golden-ratio
/// increment, then mix.
LOOM_HOST_DEVICE inline uint64_t splitmix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// The stream a dropout draws from at training step `step` (0 outside
/// training): a new one every step.
LOOM_HOST_DEVICE inline uint64_t dropoutStream(int64_t seed, double step) {
  // A step is a whole count; anything else (a corrupt state) counts as 0
  // rather than an undefined conversion, alike on both backends.
  uint64_t count = step >= 0 && step < 9.0e18 ? uint64_t(step) : 0;
  return splitmix64(uint64_t(seed) * 0x9E3779B97F4A7C15ull ^ splitmix64(count));
}

/// Whether the element with logical index `index` is kept: the top 24 bits
/// of its hash, read as u in [0, 1), are at least the ratio (`threshold` is
/// ratio * 2^24; both sides are exact in a double).
LOOM_HOST_DEVICE inline bool dropoutKeeps(uint64_t stream, uint64_t index,
                                          double threshold) {
  return double(splitmix64(stream + index) >> 40) >= threshold;
}

/// Where a rank's block sits in the logical tensor: element k (row-major
/// in the block) has global index
/// `g = sum_d (offsets[d] + i_d) * globalStrides[d]`, with i the block's
/// multi-index of k (`rank` 0: the block is the whole tensor, g = k), and
/// logical index `base + g` or, with chunks, `base + (g / chunk) *
/// chunkStride + g % chunk`.
struct DropoutBlock {
  int64_t base = 0;
  int64_t chunk = 0, chunkStride = 0;
  int rank = 0;
  int64_t shape[kDropoutMaxRank] = {};
  int64_t globalStrides[kDropoutMaxRank] = {};
};

LOOM_HOST_DEVICE inline uint64_t
dropoutIndex(const DropoutBlock &block, const int64_t *offsets, int64_t k) {
  // In uint64_t, which wraps where int64_t would overflow (the plan check
  // keeps a valid plan's indices below 2^63).
  uint64_t global = uint64_t(k);
  if (block.rank != 0) {
    global = 0;
    for (int d = block.rank - 1; d >= 0; --d) {
      global += (uint64_t(offsets[d]) + uint64_t(k % block.shape[d])) *
                uint64_t(block.globalStrides[d]);
      k /= block.shape[d];
    }
  }
  if (block.chunk > 0)
    global = global / uint64_t(block.chunk) * uint64_t(block.chunkStride) +
             global % uint64_t(block.chunk);
  return uint64_t(block.base) + global;
}

/// The block of local shape `shape` in a logical tensor of shape `global`
/// (`rank` dimensions each), numbered from `base`.
inline DropoutBlock makeDropoutBlock(const int64_t *shape,
                                     const int64_t *global, int rank,
                                     int64_t base) {
  DropoutBlock block;
  block.base = base;
  block.rank = rank;
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    block.shape[d] = shape[d];
    block.globalStrides[d] = stride;
    stride *= global[d];
  }
  return block;
}

} // namespace loomrt

#endif // LOOM_LIB_RUNTIME_DROPOUTMASK_H
