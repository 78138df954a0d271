//===- WarpMatrix.cpp - mma.sync and ldmatrix on the emulator -------------===//
//
// The warp-level tensor-core instructions of Kernels/TensorCore.cuh. Each
// lane gathers the registers of the whole warp and computes its own
// registers as the PTX ISA documents them ("Matrix Fragments for
// mma.m16n8k16 with floating point type", "ldmatrix"), so a kernel that
// puts an element in the wrong lane or register gets wrong results here as
// on a device.
//
//===----------------------------------------------------------------------===//

#include "CUDAEmulator/Device.h"

#include <cstdint>
#include <cstring>

namespace emu = loomrt::cuda::emulator;

namespace {

float bf16Half(uint32_t reg, int half) {
  const uint32_t bits = (half ? reg >> 16 : reg & 0xffffu) << 16;
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

struct Operands {
  uint32_t a[4];
  uint32_t b[2];
};

} // namespace

void emu::mmaM16N8K16BF16(float d[4], const uint32_t a[4],
                          const uint32_t b[2]) {
  Operands mine;
  std::memcpy(mine.a, a, sizeof mine.a);
  std::memcpy(mine.b, b, sizeof mine.b);
  Operands warp[32];
  gatherWarp(&mine, sizeof mine, warp);
  // A (16 x 16): element (row, k) is in lane (row % 8) * 4 + (k % 8) / 2,
  // register (row / 8) + 2 (k / 8), half k % 2.
  auto aAt = [&](int row, int k) {
    const Operands &o = warp[(row % 8) * 4 + (k % 8) / 2];
    return bf16Half(o.a[row / 8 + 2 * (k / 8)], k % 2);
  };
  // B (16 x 8): element (k, n) is in lane n * 4 + (k % 8) / 2, register
  // k / 8, half k % 2.
  auto bAt = [&](int k, int n) {
    const Operands &o = warp[n * 4 + (k % 8) / 2];
    return bf16Half(o.b[k / 8], k % 2);
  };
  const int lane = int(threadIdx.x % 32), g = lane / 4, t = lane % 4;
  for (int i = 0; i < 4; ++i) {
    const int row = g + (i / 2) * 8, col = 2 * t + i % 2;
    // bf16 products are exact in f32; the sum is f32, in k order (a
    // device's order is unspecified).
    float sum = d[i];
    for (int k = 0; k < 16; ++k)
      sum += aAt(row, k) * bAt(k, col);
    d[i] = sum;
  }
}

void emu::loadMatrices(uint32_t *r, int count, bool trans, const void *row) {
  if (reinterpret_cast<uintptr_t>(row) % 16 != 0)
    fail("ldmatrix row address is not 16-byte aligned");
  const unsigned char *rows[32];
  gatherWarp(&row, sizeof row, rows);
  const int lane = int(threadIdx.x % 32);
  for (int m = 0; m < count; ++m) {
    // Matrix m's row i starts at lane 8m + i's address.
    auto element = [&](int i, int j) {
      uint16_t value;
      std::memcpy(&value, rows[8 * m + i] + 2 * j, sizeof value);
      return uint32_t(value);
    };
    const int i = lane / 4, j = 2 * (lane % 4);
    r[m] = trans ? element(j, i) | element(j + 1, i) << 16
                 : element(i, j) | element(i, j + 1) << 16;
  }
}
