//===- TensorCore.cuh - Warp-level tensor-core products ----*- CUDA -*-===//
//
// mma.sync m16n8k16 (bf16 operands, f32 accumulators) and ldmatrix, the PTX
// instructions register-resident kernels (the flash attention kernels) are
// built from. Unlike wmma's, their fragment layouts are documented (PTX ISA,
// "Matrix Fragments for mma.m16n8k16" and "ldmatrix"), so a kernel may
// compute on its accumulators where they are: lane l holds rows l / 4 and
// l / 4 + 8, columns 2 (l % 4) and 2 (l % 4) + 1 of a 16x8 tile.
//
// On the host emulator (LOOM_CUDA_EMULATOR) the same functions exchange the
// warp's registers and compute what the PTX ISA documents for each lane
// (Emulator/WarpMatrix.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_RUNTIME_CUDA_KERNELS_TENSORCORE_CUH
#define LOOM_LIB_RUNTIME_CUDA_KERNELS_TENSORCORE_CUH

#include "Device.cuh"

#include <cstdint>

namespace loomrt {
namespace cuda {

/// A 16x16 bf16 A operand (row-major): registers 0..3 hold (row g, columns
/// 2t, 2t+1), (g + 8, 2t..), (g, 2t + 8..), (g + 8, 2t + 8..) for g = lane / 4,
/// t = lane % 4, the lower column in the lower half.
struct MmaA {
  uint32_t x[4];
};
/// A 16x8 bf16 B operand (k x n, "col"): registers 0, 1 hold (k 2t, 2t+1;
/// n g) and (k 2t + 8, 2t + 9; n g).
struct MmaB {
  uint32_t x[2];
};
/// A 16x8 f32 accumulator: x[0..3] are (g, 2t), (g, 2t+1), (g + 8, 2t),
/// (g + 8, 2t+1).
struct MmaC {
  float x[4];
};

/// Two floats as one register of bf16 (round to nearest even), `lo` in the
/// lower half: the element order of every fragment above.
__device__ inline uint32_t packBF16(float lo, float hi) {
  const uint32_t l = __bfloat16_as_ushort(roundBF16(lo));
  const uint32_t h = __bfloat16_as_ushort(roundBF16(hi));
  return l | (h << 16);
}

/// d += a b (products exact, sums in f32): one warp, every lane.
__device__ inline void mma(MmaC &d, const MmaA &a, const MmaB &b) {
#ifdef LOOM_CUDA_EMULATOR
  emulator::mmaM16N8K16BF16(d.x, a.x, b.x);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};\n"
               : "+f"(d.x[0]), "+f"(d.x[1]), "+f"(d.x[2]), "+f"(d.x[3])
               : "r"(a.x[0]), "r"(a.x[1]), "r"(a.x[2]), "r"(a.x[3]),
                 "r"(b.x[0]), "r"(b.x[1]));
#else
  __trap(); // the factories select these kernels from sm_80 on
#endif
}

/// ldmatrix.sync.aligned.m8n8.x4{.trans}.shared.b16: lanes 8m..8m+7 give the
/// rows (16 bytes, 16-byte aligned, in shared memory) of 8x8 matrix m, and
/// r[m] receives (row lane / 4, columns 2 (lane % 4), +1) of matrix m, or of
/// its transpose with `Trans`.
template <bool Trans>
__device__ inline void loadMatrices(uint32_t (&r)[4], const void *row) {
#ifdef LOOM_CUDA_EMULATOR
  emulator::loadMatrices(r, 4, Trans, row);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned address = unsigned(__cvta_generic_to_shared(row));
  if constexpr (Trans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 "
                 "{%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 "
                 "{%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
#else
  (void)row;
  r[0] = r[1] = r[2] = r[3] = 0;
  __trap();
#endif
}

/// The A operand of rows [0, 16) x columns [0, 16) of a row-major bf16
/// matrix in shared memory, `ld` elements (a multiple of 8) between rows.
__device__ inline MmaA loadA(const BF16 *tile, int ld) {
  const int lane = threadIdx.x % 32, m = lane / 8;
  MmaA a;
  loadMatrices<false>(a.x, tile + ((m & 1) * 8 + lane % 8) * ld + (m >> 1) * 8);
  return a;
}

/// The B operands of two adjacent 8-column tiles, for k in [0, 16), of a
/// shared bf16 matrix. `KMajor` false: the matrix is [n][k] row-major (rows
/// of K for Q K^T); true: [k][n] row-major (V for P V). b0 covers columns
/// n [0, 8), b1 [8, 16).
template <bool KMajor>
__device__ inline void loadBPair(MmaB &b0, MmaB &b1, const BF16 *tile, int ld) {
  const int lane = threadIdx.x % 32, m = lane / 8, i = lane % 8;
  uint32_t r[4];
  if constexpr (KMajor) {
    // Matrices: (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15),
    // (k 8-15, n 8-15), each transposed on the way.
    loadMatrices<true>(r, tile + ((m & 1) * 8 + i) * ld + (m >> 1) * 8);
  } else {
    // Matrices: (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7),
    // (n 8-15, k 8-15).
    loadMatrices<false>(r, tile + ((m >> 1) * 8 + i) * ld + (m & 1) * 8);
  }
  b0.x[0] = r[0];
  b0.x[1] = r[1];
  b1.x[0] = r[2];
  b1.x[1] = r[3];
}

/// c[0], c[1] += a times the two B tiles loadBPair<KMajor> reads at `tile`:
/// a 16x16 block of the product, for one A operand.
template <bool KMajor>
__device__ inline void mmaBPair(MmaC *c, const MmaA &a, const BF16 *tile,
                                int ld) {
  MmaB b0, b1;
  loadBPair<KMajor>(b0, b1, tile, ld);
  mma(c[0], a, b0);
  mma(c[1], a, b1);
}

/// The A operand whose 16 columns are the accumulators `lo` (columns
/// [0, 8)) and `hi` ([8, 16)) rounded to bf16: a product's result fed to
/// the next product without leaving the registers.
__device__ inline MmaA accumulatorsAsA(const MmaC &lo, const MmaC &hi) {
  MmaA a;
  a.x[0] = packBF16(lo.x[0], lo.x[1]);
  a.x[1] = packBF16(lo.x[2], lo.x[3]);
  a.x[2] = packBF16(hi.x[0], hi.x[1]);
  a.x[3] = packBF16(hi.x[2], hi.x[3]);
  return a;
}

} // namespace cuda
} // namespace loomrt

#endif // LOOM_LIB_RUNTIME_CUDA_KERNELS_TENSORCORE_CUH
