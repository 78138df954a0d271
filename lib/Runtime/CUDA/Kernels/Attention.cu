//===- Attention.cu - CUDA attention, attention_backward ------------------===//
//
// Scaled dot-product attention and its gradient, with the CPU kernels'
// semantics (see CPU/Attention.cpp): masked scores take mask_value, a score
// of -inf contributes nothing (p = 0), a row whose every score is -inf gives
// out = NaN and lse = -inf, masked entries get ds = 0, p and ds are rounded
// to bf16 before the products that take them when the operands are bf16,
// and every product accumulates in f32 (f64 for f64).
//
// Two implementations:
//
//  - Flash kernels (bf16, D and Dv multiples of 16 up to 128, sm_80+):
//    tensor-core products through nvcuda::wmma (16x16x16 bf16 fragments, f32
//    accumulators), four warps per block, each warp owning 16 rows of a
//    64-row tile. The forward takes one block per (batch, 64 queries) and
//    walks 64-key tiles with an online softmax: scores go to shared memory
//    (f32), each warp updates the running max and sum of its 16 rows (two
//    lanes per row, each taking every other key, so a row's max and sum
//    need one shuffle), rescales its rows of O (f32, in shared memory) and
//    rounds e^(s - max) to bf16 for the P V product; O / sum and
//    max + log(sum) are stored at the end. In every flash kernel, each
//    tile's mask is copied to shared memory in one coalesced pass, which
//    also tells whether the tile is fully masked (skipped) or not masked at
//    all (not read); the dk/dv kernel reads a key's column of it there.
//    The backward recomputes p = e^(s - lse) in two kernels, neither with
//    atomics: dq with one block per (batch, 64 queries) walking 64-key tiles,
//    dk and dv with one block per (batch, 64 keys) walking 32-query tiles.
//    The dq kernel also computes its rows' delta = dout . out and leaves it
//    in the launch workspace (head-major, f32), where the dk/dv kernel,
//    which runs after it on the stream, reads every query's. When the
//    workspace cannot hold every batch's rows, the pair runs on as many
//    batches at a time as it holds.
//    With mask_value -inf a (query tile, key tile) pair whose entries are all
//    masked is skipped (a causal mask skips about half the work); with a
//    finite mask_value masked entries contribute, so nothing is skipped.
//    Partial tiles are zero-padded in shared memory and their scores set to
//    -inf. Operands load 16 bytes at a time when every pointer allows it.
//
//  - Generic kernels (f32, f64, bf16 of other head dims): one block per
//    query row (forward, dq) or key row (dk, dv); each thread takes a key
//    (query) at a time for the scores, then the block sums the weighted rows
//    a chunk of keys (queries) at a time, each output element summed by one
//    thread in key order.
//
// With seq_major=1 the operands are [..., S, H, D] (lse and delta
// [..., S, H]): the kernels walk the same (batch, row) problems, and only
// where a row lives changes (rowIndex; consecutive rows of one head are H
// rows apart), so the flash tiles load strided rows and nothing is copied.
// With packed_qkv=1 q, k and v (and dq, dk, dv) are the three parts of one
// [..., S, 3, H, D] tensor: their sequence positions are 3 H D elements
// apart instead of H D (qkLd, vLd), and each part starts H D further on.
//
// Every output element is written by one thread in a fixed order: the
// results are the same from run to run.
//
//===----------------------------------------------------------------------===//

#include "Device.cuh"

#include <cuda_bf16.h>
#include <mma.h>

#include <cmath>
#include <limits>
#include <type_traits>

using namespace loom::runtime;
using namespace loom::runtime::cuda;

namespace {

/// What every attention kernel takes by value.
struct AttentionParams {
  /// batch counts the head-major batch dims (heads included).
  int64_t batch = 1, sq = 0, sk = 0, d = 0, dv = 0;
  /// H for seq-major operands ([..., S, H, D]), 1 for head-major ones.
  int64_t heads = 1;
  /// Elements between consecutive sequence positions of q and k (and dq,
  /// dk), and of v (and dv): H D and H Dv, or 3 H D when packed.
  int64_t qkLd = 0, vLd = 0;
  /// packed_qkv=1: input 0 holds q, k and v (output 0 dq, dk and dv).
  bool packed = false;
  /// Where dout, lse, out (backward) and the mask are among the inputs.
  int doutInput = 3, lseInput = 4, outInput = 5, maskInput = 3;
  /// The backward's first (head-major) batch in this launch: its delta
  /// workspace holds the rows of batches [batchBegin, batchBegin + grid's).
  int64_t batchBegin = 0;
  double scale = 1;
  double maskValue = -std::numeric_limits<double>::infinity();
  /// The mask's offset (in elements) of batch b's [Sq, Sk] matrix is
  /// stridedOffset(maskDims, b): sizes are q's batch dims, strides the
  /// mask's (0 where it broadcasts).
  bool hasMask = false;
  Dims maskDims;
};

//===----------------------------------------------------------------------===//
// Element access
//===----------------------------------------------------------------------===//

/// p and ds as the products take them: rounded to bf16 for bf16 operands.
template <typename T, typename A> __device__ inline A roundLike(A x) {
  if constexpr (std::is_same_v<T, BF16>)
    return __bfloat162float(roundBF16(x));
  else
    return x;
}

template <typename A> __device__ inline A infinity() {
  return std::numeric_limits<A>::infinity();
}

/// e^(s - shift), 0 for a score of -inf whatever the shift.
template <typename A> __device__ inline A expShift(A s, A shift) {
  return s == -infinity<A>() ? A(0) : expOf(s - shift);
}

/// The index of row i of (head-major) batch b among the rows of an operand
/// with `rows` rows per batch, in the instruction's layout: b * rows + i
/// head-major, ((b / H) * rows + i) * H + b % H seq-major. An operand's
/// element (b, i, c) is at rowIndex * cols + c, and consecutive rows of a
/// batch are `heads * cols` elements apart.
__host__ __device__ inline int64_t rowIndex(const AttentionParams &p, int64_t b,
                                            int64_t i, int64_t rows) {
  return ((b / p.heads) * rows + i) * p.heads + b % p.heads;
}

/// Where row i of (head-major) batch b of q, k, v or a gradient of them,
/// rows of `cols` elements, starts: rowIndex * cols unless packed.
__host__ __device__ inline int64_t qkvRow(const AttentionParams &p, int64_t b,
                                          int64_t i, int64_t rows, int64_t cols,
                                          int64_t ld) {
  return ((b / p.heads) * rows + i) * ld + (b % p.heads) * cols;
}

/// Batch b's [Sq, Sk] mask, or null.
__device__ inline const uint8_t *maskOf(const uint8_t *mask,
                                        const AttentionParams &p, int64_t b) {
  return mask ? mask + stridedOffset<int64_t>(p.maskDims, b) : nullptr;
}

//===----------------------------------------------------------------------===//
// Generic kernels
//===----------------------------------------------------------------------===//

constexpr int kGenericThreads = 128;
/// The most dynamic shared memory the generic kernels take (their rows of
/// q, k, v, dout and accumulators).
constexpr size_t kGenericSharedBytes = 40 * 1024;

template <typename A> __device__ inline A *sharedAs() {
  return reinterpret_cast<A *>(dynamicShared());
}

/// x[0..n) . y[0..n), y in global memory.
template <typename T, typename A>
__device__ inline A dot(const A *x, const T *y, int64_t n) {
  A sum = 0;
  for (int64_t t = 0; t < n; ++t)
    sum += x[t] * widen(y[t]);
  return sum;
}

/// One block per query row (b * Sq + i, head-major).
template <typename T, typename A>
__global__ void __launch_bounds__(kGenericThreads)
    attentionRows(AttentionParams p, const T *q, const T *k, const T *v,
                  const uint8_t *mask, T *out, A *lse) {
  A *qRow = sharedAs<A>(); // d
  A *acc = qRow + p.d;     // dv
  A *weights = acc + p.dv; // blockDim.x
  const int64_t b = blockIdx.x / p.sq, i = blockIdx.x % p.sq;
  const int64_t row = rowIndex(p, b, i, p.sq);
  const uint8_t *m = maskOf(mask, p, b);
  if (m)
    m += i * p.sk;
  const int64_t ldk = p.qkLd, ldv = p.vLd;
  const T *kb = k + qkvRow(p, b, 0, p.sk, p.d, ldk),
          *vb = v + qkvRow(p, b, 0, p.sk, p.dv, ldv);
  const A scale = A(p.scale), maskValue = A(p.maskValue), inf = infinity<A>();
  const T *qi = q + qkvRow(p, b, i, p.sq, p.d, p.qkLd);
  for (int64_t t = threadIdx.x; t < p.d; t += blockDim.x)
    qRow[t] = widen(qi[t]);
  for (int64_t t = threadIdx.x; t < p.dv; t += blockDim.x)
    acc[t] = 0;
  __syncthreads();
  auto score = [&](int64_t j) -> A {
    if (m && m[j])
      return maskValue;
    return scale * dot(qRow, kb + j * ldk, p.d);
  };

  // Each thread's running max and sum over its keys, then the block's.
  A max = -inf, sum = 0;
  for (int64_t j = threadIdx.x; j < p.sk; j += blockDim.x) {
    A s = score(j);
    if (s == -inf)
      continue;
    if (s > max) {
      sum = sum * expOf(max - s) + 1;
      max = s;
    } else {
      sum += expOf(s - max);
    }
  }
  const A rowMax = groupReduce<true>(max, MaxIgnoreNaNOp());
  // A thread that saw no finite score has sum 0 (or NaN from a NaN score,
  // which must reach the result).
  const A rowSum = groupReduce<true>(
      sum == A(0) ? A(0) : sum * expOf(max - rowMax), SumOp());
  if (rowMax == -inf) { // every score -inf: softmax is 0/0
    for (int64_t t = threadIdx.x; t < p.dv; t += blockDim.x)
      store(out + row * p.dv + t, std::numeric_limits<A>::quiet_NaN());
    if (threadIdx.x == 0)
      lse[row] = -inf;
    return;
  }

  // out = sum_j p~[j] v[j], blockDim.x keys at a time.
  for (int64_t j0 = 0; j0 < p.sk; j0 += blockDim.x) {
    const int64_t j = j0 + threadIdx.x;
    if (j < p.sk)
      weights[threadIdx.x] = roundLike<T>(expShift(score(j), rowMax) / rowSum);
    __syncthreads();
    const int64_t n = min(int64_t(blockDim.x), p.sk - j0);
    for (int64_t c = threadIdx.x; c < p.dv; c += blockDim.x) {
      A a = acc[c];
      for (int64_t jj = 0; jj < n; ++jj)
        a += weights[jj] * widen(vb[(j0 + jj) * ldv + c]);
      acc[c] = a;
    }
    __syncthreads();
  }
  for (int64_t c = threadIdx.x; c < p.dv; c += blockDim.x)
    store(out + row * p.dv + c, acc[c]);
  if (threadIdx.x == 0)
    lse[row] = rowMax + logOf(rowSum);
}

/// dq and delta (into `delta`, head-major): one block per query row
/// (b * Sq + i, head-major).
template <typename T, typename A>
__global__ void __launch_bounds__(kGenericThreads)
    attentionQueryGradRows(AttentionParams p, const T *q, const T *k,
                           const T *v, const T *dout, const A *lse,
                           const T *out, const uint8_t *mask, T *dq, A *delta) {
  A *qRow = sharedAs<A>(); // d
  A *doutRow = qRow + p.d; // dv
  A *acc = doutRow + p.dv; // d
  A *weights = acc + p.d;  // blockDim.x
  const int64_t b = p.batchBegin + blockIdx.x / p.sq, i = blockIdx.x % p.sq;
  const int64_t row = rowIndex(p, b, i, p.sq);
  const uint8_t *m = maskOf(mask, p, b);
  if (m)
    m += i * p.sk;
  const int64_t ldk = p.qkLd, ldv = p.vLd;
  const T *kb = k + qkvRow(p, b, 0, p.sk, p.d, ldk),
          *vb = v + qkvRow(p, b, 0, p.sk, p.dv, ldv);
  const A scale = A(p.scale);
  const int64_t qi = qkvRow(p, b, i, p.sq, p.d, p.qkLd);
  for (int64_t t = threadIdx.x; t < p.d; t += blockDim.x) {
    qRow[t] = widen(q[qi + t]);
    acc[t] = 0;
  }
  double rowDot = 0; // delta: products in A, summed in f64 (as on the CPU)
  for (int64_t t = threadIdx.x; t < p.dv; t += blockDim.x) {
    doutRow[t] = widen(dout[row * p.dv + t]);
    rowDot += double(A(doutRow[t] * widen(out[row * p.dv + t])));
  }
  const A rowDelta = A(groupReduce<true>(rowDot, SumOp()));
  if (threadIdx.x == 0)
    delta[blockIdx.x] = rowDelta; // head-major, for the dk/dv kernel
  __syncthreads();
  const A rowLse = lse[row];
  for (int64_t j0 = 0; j0 < p.sk; j0 += blockDim.x) {
    const int64_t j = j0 + threadIdx.x;
    if (j < p.sk) {
      A ds = 0;
      if (!(m && m[j])) {
        A pr = expShift(scale * dot(qRow, kb + j * ldk, p.d), rowLse);
        A dp = dot(doutRow, vb + j * ldv, p.dv);
        ds = roundLike<T>(pr * (dp - rowDelta));
      }
      weights[threadIdx.x] = ds;
    }
    __syncthreads();
    const int64_t n = min(int64_t(blockDim.x), p.sk - j0);
    for (int64_t c = threadIdx.x; c < p.d; c += blockDim.x) {
      A a = acc[c];
      for (int64_t jj = 0; jj < n; ++jj)
        a += weights[jj] * widen(kb[(j0 + jj) * ldk + c]);
      acc[c] = a;
    }
    __syncthreads();
  }
  for (int64_t c = threadIdx.x; c < p.d; c += blockDim.x)
    store(dq + qi + c, scale * acc[c]);
}

/// dk and dv: one block per key row (b * Sk + j, head-major).
template <typename T, typename A>
__global__ void __launch_bounds__(kGenericThreads)
    attentionKeyGradRows(AttentionParams p, const T *q, const T *k, const T *v,
                         const T *dout, const A *lse, const A *delta,
                         const uint8_t *mask, T *dk, T *dv) {
  A *kRow = sharedAs<A>();              // d
  A *vRow = kRow + p.d;                 // dv
  A *accK = vRow + p.dv;                // d
  A *accV = accK + p.d;                 // dv
  A *pWeights = accV + p.dv;            // blockDim.x
  A *dsWeights = pWeights + blockDim.x; // blockDim.x
  const int64_t b = p.batchBegin + blockIdx.x / p.sk, j = blockIdx.x % p.sk;
  const int64_t kj = qkvRow(p, b, j, p.sk, p.d, p.qkLd),
                vj = qkvRow(p, b, j, p.sk, p.dv, p.vLd);
  const uint8_t *m = maskOf(mask, p, b);
  const int64_t ldq = p.qkLd, ldo = p.heads * p.dv;
  const T *qb = q + qkvRow(p, b, 0, p.sq, p.d, ldq),
          *doutb = dout + rowIndex(p, b, 0, p.sq) * p.dv;
  // lse of query i: lseb[i * heads]; delta (head-major, from the
  // launch's first batch): deltab[i].
  const A *lseb = lse + rowIndex(p, b, 0, p.sq),
          *deltab = delta + (b - p.batchBegin) * p.sq;
  const A scale = A(p.scale), maskValue = A(p.maskValue);
  for (int64_t t = threadIdx.x; t < p.d; t += blockDim.x) {
    kRow[t] = widen(k[kj + t]);
    accK[t] = 0;
  }
  for (int64_t t = threadIdx.x; t < p.dv; t += blockDim.x) {
    vRow[t] = widen(v[vj + t]);
    accV[t] = 0;
  }
  __syncthreads();
  for (int64_t i0 = 0; i0 < p.sq; i0 += blockDim.x) {
    const int64_t i = i0 + threadIdx.x;
    if (i < p.sq) {
      const bool masked = m && m[i * p.sk + j];
      A s = masked ? maskValue : scale * dot(kRow, qb + i * ldq, p.d);
      A pr = expShift(s, lseb[i * p.heads]);
      A ds = 0;
      if (!masked)
        ds = roundLike<T>(pr * (dot(vRow, doutb + i * ldo, p.dv) - deltab[i]));
      pWeights[threadIdx.x] = roundLike<T>(pr);
      dsWeights[threadIdx.x] = ds;
    }
    __syncthreads();
    const int64_t n = min(int64_t(blockDim.x), p.sq - i0);
    for (int64_t c = threadIdx.x; c < p.dv; c += blockDim.x) {
      A a = accV[c];
      for (int64_t ii = 0; ii < n; ++ii)
        a += pWeights[ii] * widen(doutb[(i0 + ii) * ldo + c]);
      accV[c] = a;
    }
    for (int64_t c = threadIdx.x; c < p.d; c += blockDim.x) {
      A a = accK[c];
      for (int64_t ii = 0; ii < n; ++ii)
        a += dsWeights[ii] * widen(qb[(i0 + ii) * ldq + c]);
      accK[c] = a;
    }
    __syncthreads();
  }
  for (int64_t c = threadIdx.x; c < p.d; c += blockDim.x)
    store(dk + kj + c, scale * accK[c]);
  for (int64_t c = threadIdx.x; c < p.dv; c += blockDim.x)
    store(dv + vj + c, accV[c]);
}

/// Dynamic shared memory of the generic kernels.
size_t genericForwardBytes(const AttentionParams &p, size_t element) {
  return size_t(p.d + p.dv + kGenericThreads) * element;
}
size_t genericQueryGradBytes(const AttentionParams &p, size_t element) {
  return size_t(2 * p.d + p.dv + kGenericThreads) * element;
}
size_t genericKeyGradBytes(const AttentionParams &p, size_t element) {
  return size_t(2 * p.d + 2 * p.dv + 2 * kGenericThreads) * element;
}

//===----------------------------------------------------------------------===//
// Flash kernels (bf16, tensor cores)
//===----------------------------------------------------------------------===//

namespace wmma = nvcuda::wmma;

/// Query rows of a forward or dq tile, and keys of every key tile.
constexpr int kTile = 64;
/// Query rows per step of the dk/dv kernel (one per lane).
constexpr int kKeyGradQueries = 32;
constexpr int kFlashWarps = kTile / 16;
constexpr int kFlashThreads = 32 * kFlashWarps;
constexpr int kFlashMaxDim = 128;
/// Row padding of the shared tiles (bf16 and f32 elements): keeps wmma's
/// requirements (ldm a multiple of 16 bytes, fragments 32-byte aligned,
/// since they start at multiples of 16 rows and 16 columns) and spreads
/// rows over the banks.
constexpr int kPadBF16 = 8, kPadF32 = 4;

using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, BF16, wmma::row_major>;
using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 16, BF16, wmma::row_major>;
using FragBT =
    wmma::fragment<wmma::matrix_b, 16, 16, 16, BF16, wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

/// Carves the dynamic shared memory into arrays, each 128-byte aligned.
struct SharedCarver {
  size_t bytes = 0;
  __host__ __device__ size_t take(size_t size) {
    size_t offset = bytes;
    bytes += (size + 127) / 128 * 128;
    return offset;
  }
};

/// Row stride (bytes) of the forward's shared copy of a tile's mask.
constexpr int kMaskLd = kTile + 4;

struct ForwardLayout {
  size_t q, k, v, s, p, o, max, sum, mask, bytes;
  __host__ __device__ ForwardLayout(int d, int dv) {
    SharedCarver c;
    q = c.take(size_t(kTile) * (d + kPadBF16) * 2);
    k = c.take(size_t(kTile) * (d + kPadBF16) * 2);
    v = c.take(size_t(kTile) * (dv + kPadBF16) * 2);
    s = c.take(size_t(kTile) * (kTile + kPadF32) * 4);
    p = c.take(size_t(kTile) * (kTile + kPadBF16) * 2);
    o = c.take(size_t(kTile) * (dv + kPadF32) * 4);
    max = c.take(size_t(kTile) * 4);
    sum = c.take(size_t(kTile) * 4);
    mask = c.take(size_t(kTile) * kMaskLd);
    bytes = c.bytes;
  }
};

struct QueryGradLayout {
  size_t q, dout, k, v, s, dp, ds, acc, lse, delta, mask, bytes;
  __host__ __device__ QueryGradLayout(int d, int dv) {
    SharedCarver c;
    q = c.take(size_t(kTile) * (d + kPadBF16) * 2);
    dout = c.take(size_t(kTile) * (dv + kPadBF16) * 2);
    k = c.take(size_t(kTile) * (d + kPadBF16) * 2);
    v = c.take(size_t(kTile) * (dv + kPadBF16) * 2);
    s = c.take(size_t(kTile) * (kTile + kPadF32) * 4);
    dp = c.take(size_t(kTile) * (kTile + kPadF32) * 4);
    ds = c.take(size_t(kTile) * (kTile + kPadBF16) * 2);
    acc = c.take(size_t(kTile) * (d + kPadF32) * 4);
    lse = c.take(size_t(kTile) * 4);
    delta = c.take(size_t(kTile) * 4);
    mask = c.take(size_t(kTile) * kMaskLd);
    bytes = c.bytes;
  }
};

struct KeyGradLayout {
  size_t k, v, q, dout, s, dp, p, ds, accK, accV, lse, delta, mask, bytes;
  __host__ __device__ KeyGradLayout(int d, int dv) {
    SharedCarver c;
    k = c.take(size_t(kTile) * (d + kPadBF16) * 2);
    v = c.take(size_t(kTile) * (dv + kPadBF16) * 2);
    q = c.take(size_t(kKeyGradQueries) * (d + kPadBF16) * 2);
    dout = c.take(size_t(kKeyGradQueries) * (dv + kPadBF16) * 2);
    s = c.take(size_t(kTile) * (kKeyGradQueries + kPadF32) * 4);
    dp = c.take(size_t(kTile) * (kKeyGradQueries + kPadF32) * 4);
    p = c.take(size_t(kTile) * (kKeyGradQueries + kPadBF16) * 2);
    ds = c.take(size_t(kTile) * (kKeyGradQueries + kPadBF16) * 2);
    accK = c.take(size_t(kTile) * (d + kPadF32) * 4);
    accV = c.take(size_t(kTile) * (dv + kPadF32) * 4);
    lse = c.take(size_t(kKeyGradQueries) * 4);
    delta = c.take(size_t(kKeyGradQueries) * 4);
    mask = c.take(size_t(kKeyGradQueries) * kMaskLd);
    bytes = c.bytes;
  }
};

// wmma's bf16 fragments need sm_80; a build for older architectures keeps
// the kernels (the factory never selects them there) with a trap inside.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define LOOM_FLASH_ARCH 0
#else
#define LOOM_FLASH_ARCH 1
#endif

/// Rows [r0, r0 + count) of a [rows, cols] bf16 matrix whose rows are
/// `srcLd` elements apart into shared memory with leading dim `ld`; rows
/// past `rows` are zeros. `cols` and `srcLd` are multiples of 8;
/// `vectorized`: the matrix is 16-byte aligned (so is every row).
__device__ inline void loadTile(BF16 *dst, int ld, const BF16 *src,
                                int64_t srcLd, int64_t rows, int64_t r0,
                                int count, int cols, bool vectorized) {
  if (vectorized) {
    const int chunks = cols / 8;
    for (int idx = threadIdx.x; idx < count * chunks; idx += blockDim.x) {
      const int r = idx / chunks, c = (idx % chunks) * 8;
      uint4 value = make_uint4(0, 0, 0, 0);
      if (r0 + r < rows)
        value = *reinterpret_cast<const uint4 *>(src + (r0 + r) * srcLd + c);
      *reinterpret_cast<uint4 *>(dst + r * ld + c) = value;
    }
    return;
  }
  for (int idx = threadIdx.x; idx < count * cols; idx += blockDim.x) {
    const int r = idx / cols, c = idx % cols;
    dst[r * ld + c] = r0 + r < rows ? src[(r0 + r) * srcLd + c]
                                    : __ushort_as_bfloat16((unsigned short)0);
  }
}

/// Where batch b's rows of a flash operand with `rows` rows of `cols`
/// start, and their stride: loadTile's `src` and `srcLd`. `ld` is the
/// operand's stride between sequence positions (qkLd or vLd for q, k, v;
/// H cols for dout).
struct OperandRows {
  const BF16 *base;
  int64_t ld;
};
__device__ inline OperandRows operandRows(const AttentionParams &p,
                                          const BF16 *x, int64_t b,
                                          int64_t rows, int cols, int64_t ld) {
  return {x + qkvRow(p, b, 0, rows, cols, ld), ld};
}

/// What a flash kernel does with a (query tile, key tile) pair.
enum class TileMask { Skip, Unmasked, Masked };

/// Copies the mask `m` ([Sq, Sk], row stride sk; null: no mask) of rows
/// [i0, i0 + rows) x keys [j0, j0 + cols) into `tile` (rows kMaskLd bytes
/// apart; one coalesced pass, so that the kernel reads it from shared
/// memory) and says what to do with the pair: Skip when every entry is
/// masked and masked entries contribute nothing (`skipMasked`), Unmasked
/// when no entry is masked (the copy need not be read), else Masked. Every
/// thread of the block must call it (it synchronizes the block).
__device__ inline TileMask loadTileMask(uint8_t *tile, const uint8_t *m,
                                        bool skipMasked, int64_t sk, int64_t i0,
                                        int rows, int64_t j0, int cols) {
  if (!m)
    return TileMask::Unmasked;
  int all = 1, none = 1;
  for (int idx = threadIdx.x; idx < rows * cols; idx += blockDim.x) {
    const int r = idx / cols, c = idx % cols;
    const uint8_t masked = m[(i0 + r) * sk + j0 + c];
    tile[r * kMaskLd + c] = masked;
    all &= masked != 0;
    none &= masked == 0;
  }
  const bool allMasked = __syncthreads_and(all) != 0;
  const bool noneMasked = __syncthreads_and(none) != 0;
  if (skipMasked && allMasked)
    return TileMask::Skip;
  return noneMasked ? TileMask::Unmasked : TileMask::Masked;
}

/// out (16 x 16*n, f32, ld) = a (16 x inner, row-major) b^T, where b is
/// (16*n x inner) row-major: one warp.
__device__ inline void productABt(float *out, int ldOut, const BF16 *a, int lda,
                                  const BF16 *b, int ldb, int n, int inner) {
  for (int f = 0; f < n; ++f) {
    FragC acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int t = 0; t < inner; t += 16) {
      FragA fa;
      FragBT fb;
      wmma::load_matrix_sync(fa, a + t, lda);
      wmma::load_matrix_sync(fb, b + f * 16 * ldb + t, ldb);
      wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(out + f * 16, acc, ldOut, wmma::mem_row_major);
  }
}

/// acc (16 x width, f32, ld) += a (16 x inner, row-major) b, where b is
/// (inner x width) row-major: one warp.
__device__ inline void accumulateAB(float *acc, int ldAcc, const BF16 *a,
                                    int lda, const BF16 *b, int ldb, int width,
                                    int inner) {
  for (int c = 0; c < width; c += 16) {
    FragC fc;
    wmma::load_matrix_sync(fc, acc + c, ldAcc, wmma::mem_row_major);
    for (int t = 0; t < inner; t += 16) {
      FragA fa;
      FragB fb;
      wmma::load_matrix_sync(fa, a + t, lda);
      wmma::load_matrix_sync(fb, b + t * ldb + c, ldb);
      wmma::mma_sync(fc, fa, fb, fc);
    }
    wmma::store_matrix_sync(acc + c, fc, ldAcc, wmma::mem_row_major);
  }
}

/// Forward: one block per (batch, 64 queries).
__global__ void __launch_bounds__(kFlashThreads)
    flashForward(AttentionParams p, const BF16 *q, const BF16 *k, const BF16 *v,
                 const uint8_t *mask, BF16 *out, float *lse, bool vectorized) {
#if !LOOM_FLASH_ARCH
  __trap();
#else
  const int d = int(p.d), dv = int(p.dv);
  const ForwardLayout layout(d, dv);
  unsigned char *shared = dynamicShared();
  BF16 *qs = reinterpret_cast<BF16 *>(shared + layout.q);
  BF16 *ks = reinterpret_cast<BF16 *>(shared + layout.k);
  BF16 *vs = reinterpret_cast<BF16 *>(shared + layout.v);
  float *ss = reinterpret_cast<float *>(shared + layout.s);
  BF16 *ps = reinterpret_cast<BF16 *>(shared + layout.p);
  float *os = reinterpret_cast<float *>(shared + layout.o);
  float *rowMax = reinterpret_cast<float *>(shared + layout.max);
  float *rowSum = reinterpret_cast<float *>(shared + layout.sum);
  uint8_t *masks = shared + layout.mask;
  const int ldq = d + kPadBF16, ldv = dv + kPadBF16, lds = kTile + kPadF32,
            ldp = kTile + kPadBF16, ldo = dv + kPadF32;

  const int64_t tiles = (p.sq + kTile - 1) / kTile;
  const int64_t b = blockIdx.x / tiles, i0 = (blockIdx.x % tiles) * kTile;
  const int rows = int(min(int64_t(kTile), p.sq - i0));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const float scale = float(p.scale), maskValue = float(p.maskValue);
  const float inf = infinity<float>();
  const uint8_t *m = maskOf(mask, p, b);
  const bool skipMasked = m && maskValue == -inf;

  const OperandRows qRows = operandRows(p, q, b, p.sq, d, p.qkLd),
                    kRows = operandRows(p, k, b, p.sk, d, p.qkLd),
                    vRows = operandRows(p, v, b, p.sk, dv, p.vLd);
  loadTile(qs, ldq, qRows.base, qRows.ld, p.sq, i0, kTile, d, vectorized);
  for (int idx = threadIdx.x; idx < kTile * dv; idx += blockDim.x)
    os[(idx / dv) * ldo + idx % dv] = 0.0f;
  for (int r = threadIdx.x; r < kTile; r += blockDim.x) {
    rowMax[r] = -inf;
    rowSum[r] = 0.0f;
  }
  __syncthreads();

  for (int64_t j0 = 0; j0 < p.sk; j0 += kTile) {
    const int cols = int(min(int64_t(kTile), p.sk - j0));
    // The tile's mask goes to shared memory once; a tile that masks
    // nothing (most of a causal mask's) is not read at all.
    const TileMask tileMask =
        loadTileMask(masks, m, skipMasked, p.sk, i0, rows, j0, cols);
    if (tileMask == TileMask::Skip)
      continue;
    const bool noneMasked = tileMask == TileMask::Unmasked;
    loadTile(ks, ldq, kRows.base, kRows.ld, p.sk, j0, kTile, d, vectorized);
    loadTile(vs, ldv, vRows.base, vRows.ld, p.sk, j0, kTile, dv, vectorized);
    __syncthreads();

    // S = Q K^T for this warp's 16 rows.
    productABt(ss + warp * 16 * lds, lds, qs + warp * 16 * ldq, ldq, ks, ldq,
               kTile / 16, d);
    __syncwarp();

    // Online softmax of the warp's 16 rows at once: lane l takes row l % 16
    // and every other key (half h = l / 16 takes keys h, h + 2, ...), so a
    // row's max and sum combine two lanes with one shuffle each, where a row
    // at a time took two 32-lane reductions per row.
    {
      const int rr = lane % 16, h = lane / 16, r = warp * 16 + rr;
      const float *scores = ss + r * lds;
      const uint8_t *masked = noneMasked ? nullptr : masks + r * kMaskLd;
      float sv[kTile / 2];
      float tileMax = -inf;
#pragma unroll
      for (int k = 0; k < kTile / 2; ++k) {
        const int c = 2 * k + h;
        float s = -inf;
        if (r < rows && c < cols)
          s = masked && masked[c] ? maskValue : scale * scores[c];
        sv[k] = s;
        tileMax = MaxIgnoreNaNOp()(tileMax, s);
      }
      tileMax =
          MaxIgnoreNaNOp()(tileMax, __shfl_xor_sync(0xffffffffu, tileMax, 16));
      const float oldMax = rowMax[r];
      const float newMax = MaxIgnoreNaNOp()(oldMax, tileMax);
      float sum = 0.0f;
#pragma unroll
      for (int k = 0; k < kTile / 2; ++k) {
        const float e = expShift(sv[k], newMax);
        ps[r * ldp + 2 * k + h] = __float2bfloat16_rn(e);
        sum += e;
      }
      sum += __shfl_xor_sync(0xffffffffu, sum, 16);
      const float alpha = oldMax == -inf ? 0.0f : expf(oldMax - newMax);
      for (int c = h; c < dv; c += 2)
        os[r * ldo + c] *= alpha;
      __syncwarp();
      if (h == 0) {
        rowMax[r] = newMax;
        rowSum[r] = rowSum[r] * alpha + sum;
      }
    }
    __syncwarp();

    // O += P V for this warp's rows.
    accumulateAB(os + warp * 16 * ldo, ldo, ps + warp * 16 * ldp, ldp, vs, ldv,
                 dv, kTile);
    __syncthreads();
  }
  __syncwarp();

  for (int rr = 0; rr < 16; ++rr) {
    const int r = warp * 16 + rr;
    if (r >= rows)
      break;
    const int64_t row = rowIndex(p, b, i0 + r, p.sq);
    const float sum = rowSum[r]; // 0 when every score was -inf: NaN out
    for (int c = lane; c < dv; c += 32)
      out[row * dv + c] = roundBF16(os[r * ldo + c] / sum);
    if (lane == 0)
      lse[row] = rowMax[r] + logf(sum);
  }
#endif
}

/// dq and delta (into `delta`, head-major): one block per (batch, 64
/// queries).
__global__ void __launch_bounds__(kFlashThreads)
    flashQueryGrads(AttentionParams p, const BF16 *q, const BF16 *k,
                    const BF16 *v, const BF16 *dout, const float *lse,
                    const BF16 *out, const uint8_t *mask, BF16 *dq,
                    float *delta, bool vectorized) {
#if !LOOM_FLASH_ARCH
  __trap();
#else
  const int d = int(p.d), dv = int(p.dv);
  const QueryGradLayout layout(d, dv);
  unsigned char *shared = dynamicShared();
  BF16 *qs = reinterpret_cast<BF16 *>(shared + layout.q);
  BF16 *douts = reinterpret_cast<BF16 *>(shared + layout.dout);
  BF16 *ks = reinterpret_cast<BF16 *>(shared + layout.k);
  BF16 *vs = reinterpret_cast<BF16 *>(shared + layout.v);
  float *ss = reinterpret_cast<float *>(shared + layout.s);
  float *dps = reinterpret_cast<float *>(shared + layout.dp);
  BF16 *dss = reinterpret_cast<BF16 *>(shared + layout.ds);
  float *acc = reinterpret_cast<float *>(shared + layout.acc);
  float *lses = reinterpret_cast<float *>(shared + layout.lse);
  float *deltas = reinterpret_cast<float *>(shared + layout.delta);
  uint8_t *masks = shared + layout.mask;
  const int ldq = d + kPadBF16, ldv = dv + kPadBF16, lds = kTile + kPadF32,
            ldds = kTile + kPadBF16, ldacc = d + kPadF32;

  const int64_t tiles = (p.sq + kTile - 1) / kTile;
  const int64_t b = p.batchBegin + blockIdx.x / tiles,
                i0 = (blockIdx.x % tiles) * kTile;
  const int rows = int(min(int64_t(kTile), p.sq - i0));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const float scale = float(p.scale), maskValue = float(p.maskValue);
  const float inf = infinity<float>();
  const uint8_t *m = maskOf(mask, p, b);
  const bool skipMasked = m && maskValue == -inf;

  const OperandRows qRows = operandRows(p, q, b, p.sq, d, p.qkLd),
                    doutRows = operandRows(p, dout, b, p.sq, dv, p.heads * dv),
                    kRows = operandRows(p, k, b, p.sk, d, p.qkLd),
                    vRows = operandRows(p, v, b, p.sk, dv, p.vLd);
  loadTile(qs, ldq, qRows.base, qRows.ld, p.sq, i0, kTile, d, vectorized);
  loadTile(douts, ldv, doutRows.base, doutRows.ld, p.sq, i0, kTile, dv,
           vectorized);
  for (int idx = threadIdx.x; idx < kTile * d; idx += blockDim.x)
    acc[(idx / d) * ldacc + idx % d] = 0.0f;
  for (int r = threadIdx.x; r < kTile; r += blockDim.x)
    lses[r] = r < rows ? lse[rowIndex(p, b, i0 + r, p.sq)] : 0.0f;
  __syncthreads();
  // delta = dout . out for this warp's rows (products in f32, summed in
  // f64 as on the CPU), kept for the loop and stored for the dk/dv kernel.
  for (int rr = 0; rr < 16; ++rr) {
    const int r = warp * 16 + rr;
    double rowDot = 0;
    if (r < rows) {
      const BF16 *o = out + rowIndex(p, b, i0 + r, p.sq) * dv;
      for (int c = lane; c < dv; c += 32)
        rowDot += double(__bfloat162float(douts[r * ldv + c]) *
                         __bfloat162float(o[c]));
    }
    rowDot = warpReduce(rowDot, SumOp());
    if (lane == 0) {
      deltas[r] = r < rows ? float(rowDot) : 0.0f;
      if (r < rows)
        delta[(b - p.batchBegin) * p.sq + i0 + r] = float(rowDot);
    }
  }
  __syncwarp();

  for (int64_t j0 = 0; j0 < p.sk; j0 += kTile) {
    const int cols = int(min(int64_t(kTile), p.sk - j0));
    const TileMask tileMask =
        loadTileMask(masks, m, skipMasked, p.sk, i0, rows, j0, cols);
    if (tileMask == TileMask::Skip)
      continue;
    const bool noneMasked = tileMask == TileMask::Unmasked;
    loadTile(ks, ldq, kRows.base, kRows.ld, p.sk, j0, kTile, d, vectorized);
    loadTile(vs, ldv, vRows.base, vRows.ld, p.sk, j0, kTile, dv, vectorized);
    __syncthreads();

    // S = Q K^T and dP = dO V^T for this warp's 16 rows.
    productABt(ss + warp * 16 * lds, lds, qs + warp * 16 * ldq, ldq, ks, ldq,
               kTile / 16, d);
    productABt(dps + warp * 16 * lds, lds, douts + warp * 16 * ldv, ldv, vs,
               ldv, kTile / 16, dv);
    __syncwarp();

    // dS = P (dP - delta), 0 where masked, rounded to bf16.
    for (int rr = 0; rr < 16; ++rr) {
      const int r = warp * 16 + rr;
      for (int h = 0; h < 2; ++h) {
        const int c = lane + 32 * h;
        float ds = 0.0f;
        if (r < rows && c < cols && (noneMasked || !masks[r * kMaskLd + c])) {
          const float pr = expShift(scale * ss[r * lds + c], lses[r]);
          ds = pr * (dps[r * lds + c] - deltas[r]);
        }
        dss[r * ldds + c] = __float2bfloat16_rn(ds);
      }
    }
    __syncwarp();

    // dQ += dS K for this warp's rows.
    accumulateAB(acc + warp * 16 * ldacc, ldacc, dss + warp * 16 * ldds, ldds,
                 ks, ldq, d, kTile);
    __syncthreads();
  }
  __syncwarp();

  for (int rr = 0; rr < 16; ++rr) {
    const int r = warp * 16 + rr;
    if (r >= rows)
      break;
    BF16 *dqRow = dq + qkvRow(p, b, i0 + r, p.sq, d, p.qkLd);
    for (int c = lane; c < d; c += 32)
      dqRow[c] = roundBF16(scale * acc[r * ldacc + c]);
  }
#endif
}

/// dk and dv: one block per (batch, 64 keys), 32 queries per step.
__global__ void __launch_bounds__(kFlashThreads)
    flashKeyGrads(AttentionParams p, const BF16 *q, const BF16 *k,
                  const BF16 *v, const BF16 *dout, const float *lse,
                  const float *delta, const uint8_t *mask, BF16 *dk, BF16 *dv,
                  bool vectorized) {
#if !LOOM_FLASH_ARCH
  __trap();
#else
  static_assert(kKeyGradQueries == 32, "one query per lane");
  const int d = int(p.d), dvDim = int(p.dv);
  const KeyGradLayout layout(d, dvDim);
  unsigned char *shared = dynamicShared();
  BF16 *ks = reinterpret_cast<BF16 *>(shared + layout.k);
  BF16 *vs = reinterpret_cast<BF16 *>(shared + layout.v);
  BF16 *qs = reinterpret_cast<BF16 *>(shared + layout.q);
  BF16 *douts = reinterpret_cast<BF16 *>(shared + layout.dout);
  float *ss = reinterpret_cast<float *>(shared + layout.s);
  float *dps = reinterpret_cast<float *>(shared + layout.dp);
  BF16 *ps = reinterpret_cast<BF16 *>(shared + layout.p);
  BF16 *dss = reinterpret_cast<BF16 *>(shared + layout.ds);
  float *accK = reinterpret_cast<float *>(shared + layout.accK);
  float *accV = reinterpret_cast<float *>(shared + layout.accV);
  float *lses = reinterpret_cast<float *>(shared + layout.lse);
  float *deltas = reinterpret_cast<float *>(shared + layout.delta);
  uint8_t *masks = shared + layout.mask;
  const int ldq = d + kPadBF16, ldv = dvDim + kPadBF16,
            lds = kKeyGradQueries + kPadF32, ldp = kKeyGradQueries + kPadBF16,
            ldk = d + kPadF32, ldav = dvDim + kPadF32;

  const int64_t tiles = (p.sk + kTile - 1) / kTile;
  const int64_t b = p.batchBegin + blockIdx.x / tiles,
                j0 = (blockIdx.x % tiles) * kTile;
  const int cols = int(min(int64_t(kTile), p.sk - j0));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const float scale = float(p.scale), maskValue = float(p.maskValue);
  const float inf = infinity<float>();
  const uint8_t *m = maskOf(mask, p, b);
  const bool skipMasked = m && maskValue == -inf;

  const OperandRows kRows = operandRows(p, k, b, p.sk, d, p.qkLd),
                    vRows = operandRows(p, v, b, p.sk, dvDim, p.vLd),
                    qRows = operandRows(p, q, b, p.sq, d, p.qkLd),
                    doutRows =
                        operandRows(p, dout, b, p.sq, dvDim, p.heads * dvDim);
  loadTile(ks, ldq, kRows.base, kRows.ld, p.sk, j0, kTile, d, vectorized);
  loadTile(vs, ldv, vRows.base, vRows.ld, p.sk, j0, kTile, dvDim, vectorized);
  for (int idx = threadIdx.x; idx < kTile * d; idx += blockDim.x)
    accK[(idx / d) * ldk + idx % d] = 0.0f;
  for (int idx = threadIdx.x; idx < kTile * dvDim; idx += blockDim.x)
    accV[(idx / dvDim) * ldav + idx % dvDim] = 0.0f;
  __syncthreads();

  for (int64_t i0 = 0; i0 < p.sq; i0 += kKeyGradQueries) {
    const int rows = int(min(int64_t(kKeyGradQueries), p.sq - i0));
    // The tile's mask, [queries][keys], in shared memory: the lanes below
    // read a key's column of it, which in global memory would be a strided
    // load per lane.
    const TileMask tileMask =
        loadTileMask(masks, m, skipMasked, p.sk, i0, rows, j0, cols);
    if (tileMask == TileMask::Skip)
      continue;
    const bool noneMasked = tileMask == TileMask::Unmasked;
    loadTile(qs, ldq, qRows.base, qRows.ld, p.sq, i0, kKeyGradQueries, d,
             vectorized);
    loadTile(douts, ldv, doutRows.base, doutRows.ld, p.sq, i0, kKeyGradQueries,
             dvDim, vectorized);
    for (int r = threadIdx.x; r < kKeyGradQueries; r += blockDim.x) {
      const int64_t row = rowIndex(p, b, i0 + r, p.sq);
      lses[r] = r < rows ? lse[row] : 0.0f;
      deltas[r] = r < rows ? delta[(b - p.batchBegin) * p.sq + i0 + r] : 0.0f;
    }
    __syncthreads();

    // S^T = K Q^T and dP^T = V dO^T for this warp's 16 keys.
    productABt(ss + warp * 16 * lds, lds, ks + warp * 16 * ldq, ldq, qs, ldq,
               kKeyGradQueries / 16, d);
    productABt(dps + warp * 16 * lds, lds, vs + warp * 16 * ldv, ldv, douts,
               ldv, kKeyGradQueries / 16, dvDim);
    __syncwarp();

    // P^T and dS^T (one query per lane), rounded to bf16.
    for (int rr = 0; rr < 16; ++rr) {
      const int r = warp * 16 + rr, c = lane;
      float pr = 0.0f, ds = 0.0f;
      if (r < cols && c < rows) {
        const bool masked = !noneMasked && masks[c * kMaskLd + r];
        const float s = masked ? maskValue : scale * ss[r * lds + c];
        pr = expShift(s, lses[c]);
        if (!masked)
          ds = pr * (dps[r * lds + c] - deltas[c]);
      }
      ps[r * ldp + c] = __float2bfloat16_rn(pr);
      dss[r * ldp + c] = __float2bfloat16_rn(ds);
    }
    __syncwarp();

    // dV += P^T dO and dK += dS^T Q for this warp's keys.
    accumulateAB(accV + warp * 16 * ldav, ldav, ps + warp * 16 * ldp, ldp,
                 douts, ldv, dvDim, kKeyGradQueries);
    accumulateAB(accK + warp * 16 * ldk, ldk, dss + warp * 16 * ldp, ldp, qs,
                 ldq, d, kKeyGradQueries);
    __syncthreads();
  }
  __syncwarp();

  for (int rr = 0; rr < 16; ++rr) {
    const int r = warp * 16 + rr;
    if (r >= cols)
      break;
    BF16 *dkRow = dk + qkvRow(p, b, j0 + r, p.sk, d, p.qkLd),
         *dvRow = dv + qkvRow(p, b, j0 + r, p.sk, dvDim, p.vLd);
    for (int c = lane; c < d; c += 32)
      dkRow[c] = roundBF16(scale * accK[r * ldk + c]);
    for (int c = lane; c < dvDim; c += 32)
      dvRow[c] = roundBF16(accV[r * ldav + c]);
  }
#endif
}

//===----------------------------------------------------------------------===//
// Host side
//===----------------------------------------------------------------------===//

/// The shape of q (of k and v: the same when packed).
std::vector<int64_t> queryShape(const Instruction &inst) {
  std::vector<int64_t> q = inst.inputs[0].shape;
  if (intAttr(inst.attrs, "packed_qkv", 0) == 1)
    q.erase(q.end() - 3); // [..., S, 3, H, D]
  return q;
}

AttentionParams readParams(const Instruction &inst, bool backward) {
  AttentionParams p;
  const std::vector<int64_t> q = queryShape(inst);
  const size_t rank = q.size(), lead = rank - 2;
  const bool seqMajor = intAttr(inst.attrs, "seq_major", 0) == 1;
  p.packed = intAttr(inst.attrs, "packed_qkv", 0) == 1;
  // The head-major dims: [lead..., Sq, D], heads the last lead dim.
  std::vector<int64_t> logical = q;
  if (seqMajor)
    std::swap(logical[rank - 3], logical[rank - 2]);
  p.heads = seqMajor ? q[rank - 2] : 1;
  p.batch = product(logical, 0, lead);
  p.sq = logical[rank - 2];
  p.d = q[rank - 1];
  p.sk = p.packed ? p.sq : inst.inputs[1].shape[seqMajor ? rank - 3 : rank - 2];
  p.dv = p.packed ? p.d : inst.inputs[2].shape[rank - 1];
  p.qkLd = p.packed ? 3 * p.heads * p.d : p.heads * p.d;
  p.vLd = p.packed ? 3 * p.heads * p.d : p.heads * p.dv;
  if (p.packed) {
    p.doutInput = 1;
    p.lseInput = 2;
    p.outInput = 3;
  }
  p.maskInput = p.packed ? (backward ? 4 : 1) : (backward ? 6 : 3);
  p.scale = doubleAttr(inst.attrs, "scale", 1);
  p.maskValue = doubleAttr(inst.attrs, "mask_value",
                           -std::numeric_limits<double>::infinity());
  p.hasMask = inst.inputs.size() > size_t(p.maskInput);
  if (p.hasMask) {
    const std::vector<int64_t> &mask = inst.inputs[p.maskInput].shape;
    p.maskDims.rank = int(lead);
    for (size_t t = 0; t < lead && t < size_t(kMaxDims); ++t) {
      p.maskDims.size[t] = logical[t];
      p.maskDims.stride[t] = mask[t] == 1 ? 0 : product(mask, t + 1, rank);
    }
  }
  return p;
}

/// The largest dynamic shared memory a block of this device may opt into.
Status sharedMemoryOptIn(int &bytes) {
  int device = 0;
  if (Status s = cudaStatus(cudaGetDevice(&device), "cudaGetDevice"); !s)
    return s;
  return cudaStatus(
      cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                             device),
      "cudaDeviceGetAttribute(MaxSharedMemoryPerBlockOptin)");
}

/// Whether the flash kernels take this instruction; when they do, lets them
/// use the dynamic shared memory they need.
StatusOr<bool> useFlash(const LaunchContext &context, DType dtype,
                        const AttentionParams &p, bool backward) {
  if (dtype != DType::BF16 || context.computeCapability < 80)
    return false;
  auto fits = [](int64_t dim) {
    return dim >= 16 && dim <= kFlashMaxDim && dim % 16 == 0;
  };
  if (!fits(p.d) || !fits(p.dv))
    return false;
  const int d = int(p.d), dv = int(p.dv);
  const size_t needed = backward ? std::max(QueryGradLayout(d, dv).bytes,
                                            KeyGradLayout(d, dv).bytes)
                                 : ForwardLayout(d, dv).bytes;
  int optIn = 0;
  if (Status s = sharedMemoryOptIn(optIn); !s)
    return s;
  if (needed > size_t(optIn))
    return false;
  // The attribute is per function, not per launch: allow the most any head
  // dims need (capped by the device), so that instructions with different
  // head dims do not undo each other's setting.
  auto allow = [&](const void *kernel, size_t most, const char *name) {
    const int bytes = int(std::min(most, size_t(optIn)));
    return cudaStatus(
        cudaFuncSetAttribute(
            kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
        std::string("cudaFuncSetAttribute(") + name + ")");
  };
  if (backward) {
    if (Status s = allow(reinterpret_cast<const void *>(&flashQueryGrads),
                         QueryGradLayout(kFlashMaxDim, kFlashMaxDim).bytes,
                         "flashQueryGrads");
        !s)
      return s;
    if (Status s = allow(reinterpret_cast<const void *>(&flashKeyGrads),
                         KeyGradLayout(kFlashMaxDim, kFlashMaxDim).bytes,
                         "flashKeyGrads");
        !s)
      return s;
  } else if (Status s = allow(reinterpret_cast<const void *>(&flashForward),
                              ForwardLayout(kFlashMaxDim, kFlashMaxDim).bytes,
                              "flashForward");
             !s) {
    return s;
  }
  return true;
}

/// Part `part` (0: q, 1: k, 2: v, or their gradients) of a launch's
/// buffers: buffer `part`, or that part of the packed buffer 0.
template <typename T, typename Buffer>
T *qkvPart(const AttentionParams &p, Buffer const *buffers, int part) {
  if (!p.packed)
    return static_cast<T *>(buffers[part]);
  return static_cast<T *>(buffers[0]) + part * p.heads * p.d;
}

template <typename T> const T *inputAt(const void *const *inputs, int index) {
  return static_cast<const T *>(inputs[index]);
}

/// The mask of a launch, or null.
const uint8_t *launchMask(const AttentionParams &p, const void *const *inputs) {
  return p.hasMask ? inputAt<uint8_t>(inputs, p.maskInput) : nullptr;
}

/// A backward launch's inputs, wherever the instruction's form puts them.
template <typename T, typename A> struct BackwardInputs {
  const T *q, *k, *v, *dout;
  const A *lse;
  const T *out;
  const uint8_t *mask;

  BackwardInputs(const AttentionParams &p, const void *const *inputs)
      : q(qkvPart<const T>(p, inputs, 0)), k(qkvPart<const T>(p, inputs, 1)),
        v(qkvPart<const T>(p, inputs, 2)),
        dout(inputAt<T>(inputs, p.doutInput)),
        lse(inputAt<A>(inputs, p.lseInput)),
        out(inputAt<T>(inputs, p.outInput)), mask(launchMask(p, inputs)) {}
};

bool aligned16(const void *pointer) {
  return reinterpret_cast<uintptr_t>(pointer) % 16 == 0;
}

Status checkGrid(int64_t blocks, const char *what) {
  if (blocks <= int64_t(std::numeric_limits<int32_t>::max()))
    return Status::ok();
  return Status::error(std::string(what) + " would need " +
                       std::to_string(blocks) +
                       " blocks, more than a CUDA grid holds");
}

Status checkGenericShared(size_t bytes) {
  if (bytes <= kGenericSharedBytes)
    return Status::ok();
  return Status::error("the CUDA attention kernels hold a row of q, k, v and "
                       "their gradients in shared memory: these head dims "
                       "need " +
                       std::to_string(bytes) + " bytes, more than " +
                       std::to_string(kGenericSharedBytes));
}

/// How many (head-major) batches' delta the launch workspace holds: the
/// backward runs its two kernels on that many batches at a time
/// (createAttentionKernel checked that one batch fits).
int64_t deltaBatches(const LaunchContext &context, const AttentionParams &p,
                     size_t statBytes) {
  if (p.sq == 0)
    return std::max<int64_t>(p.batch, 1);
  const int64_t fit =
      int64_t(context.workspaceBytes / (uint64_t(p.sq) * statBytes));
  return std::max<int64_t>(1, std::min(p.batch, fit));
}

template <typename T, typename A>
KernelOr makeGenericForward(const AttentionParams &p) {
  const size_t shared = genericForwardBytes(p, sizeof(A));
  if (Status s = checkGenericShared(shared); !s)
    return s;
  if (Status s = checkGrid(p.batch * p.sq, "attention"); !s)
    return s;
  return makeKernel([=](const LaunchContext &context, const void *const *inputs,
                        void *const *outputs) {
    const int64_t rows = p.batch * p.sq;
    if (rows == 0)
      return Status::ok();
    launchKernel(attentionRows<T, A>, unsigned(rows), kGenericThreads, shared,
                 context.stream, p, qkvPart<const T>(p, inputs, 0),
                 qkvPart<const T>(p, inputs, 1), qkvPart<const T>(p, inputs, 2),
                 launchMask(p, inputs), static_cast<T *>(outputs[0]),
                 static_cast<A *>(outputs[1]));
    return launchStatus("attention");
  });
}

template <typename T, typename A>
KernelOr makeGenericBackward(const AttentionParams &p) {
  const size_t queryShared = genericQueryGradBytes(p, sizeof(A));
  const size_t keyShared = genericKeyGradBytes(p, sizeof(A));
  if (Status s = checkGenericShared(std::max(queryShared, keyShared)); !s)
    return s;
  if (Status s = checkGrid(std::max(p.batch * p.sq, p.batch * p.sk),
                           "attention_backward");
      !s)
    return s;
  return makeKernel([=](const LaunchContext &context, const void *const *inputs,
                        void *const *outputs) {
    const BackwardInputs<T, A> in(p, inputs);
    A *delta = static_cast<A *>(context.workspace);
    const int64_t chunk = deltaBatches(context, p, sizeof(A));
    for (int64_t begin = 0; begin < p.batch; begin += chunk) {
      AttentionParams part = p;
      part.batchBegin = begin;
      const int64_t count = std::min(chunk, p.batch - begin);
      if (count * p.sq > 0) {
        launchKernel(attentionQueryGradRows<T, A>, unsigned(count * p.sq),
                     kGenericThreads, queryShared, context.stream, part, in.q,
                     in.k, in.v, in.dout, in.lse, in.out, in.mask,
                     qkvPart<T>(p, outputs, 0), delta);
        if (Status s = launchStatus("attention_backward (dq)"); !s)
          return s;
      }
      if (count * p.sk > 0) {
        launchKernel(attentionKeyGradRows<T, A>, unsigned(count * p.sk),
                     kGenericThreads, keyShared, context.stream, part, in.q,
                     in.k, in.v, in.dout, in.lse, delta, in.mask,
                     qkvPart<T>(p, outputs, 1), qkvPart<T>(p, outputs, 2));
        if (Status s = launchStatus("attention_backward (dk, dv)"); !s)
          return s;
      }
    }
    return Status::ok();
  });
}

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

KernelOr makeFlashForward(const AttentionParams &p) {
  const int64_t blocks = p.batch * ceilDiv(p.sq, kTile);
  if (Status s = checkGrid(blocks, "attention"); !s)
    return s;
  const size_t shared = ForwardLayout(int(p.d), int(p.dv)).bytes;
  return makeKernel([=](const LaunchContext &context, const void *const *inputs,
                        void *const *outputs) {
    if (blocks == 0)
      return Status::ok();
    const BF16 *q = qkvPart<const BF16>(p, inputs, 0);
    const BF16 *k = qkvPart<const BF16>(p, inputs, 1);
    const BF16 *v = qkvPart<const BF16>(p, inputs, 2);
    const bool vectorized = aligned16(q) && aligned16(k) && aligned16(v);
    launchKernel(flashForward, unsigned(blocks), kFlashThreads, shared,
                 context.stream, p, q, k, v, launchMask(p, inputs),
                 static_cast<BF16 *>(outputs[0]),
                 static_cast<float *>(outputs[1]), vectorized);
    return launchStatus("attention (flash)");
  });
}

KernelOr makeFlashBackward(const AttentionParams &p) {
  const int64_t queryBlocks = p.batch * ceilDiv(p.sq, kTile);
  const int64_t keyBlocks = p.batch * ceilDiv(p.sk, kTile);
  if (Status s =
          checkGrid(std::max(queryBlocks, keyBlocks), "attention_backward");
      !s)
    return s;
  const size_t queryShared = QueryGradLayout(int(p.d), int(p.dv)).bytes;
  const size_t keyShared = KeyGradLayout(int(p.d), int(p.dv)).bytes;
  return makeKernel([=](const LaunchContext &context, const void *const *inputs,
                        void *const *outputs) {
    const BackwardInputs<BF16, float> in(p, inputs);
    float *delta = static_cast<float *>(context.workspace);
    const bool vectorized = aligned16(in.q) && aligned16(in.k) &&
                            aligned16(in.v) && aligned16(in.dout);
    const int64_t chunk = deltaBatches(context, p, sizeof(float));
    for (int64_t begin = 0; begin < p.batch; begin += chunk) {
      AttentionParams part = p;
      part.batchBegin = begin;
      const int64_t count = std::min(chunk, p.batch - begin);
      const int64_t queryTiles = count * ceilDiv(p.sq, kTile);
      const int64_t keyTiles = count * ceilDiv(p.sk, kTile);
      if (queryTiles > 0) {
        launchKernel(flashQueryGrads, unsigned(queryTiles), kFlashThreads,
                     queryShared, context.stream, part, in.q, in.k, in.v,
                     in.dout, in.lse, in.out, in.mask,
                     qkvPart<BF16>(p, outputs, 0), delta, vectorized);
        if (Status s = launchStatus("attention_backward (flash dq)"); !s)
          return s;
      }
      if (keyTiles > 0) {
        launchKernel(flashKeyGrads, unsigned(keyTiles), kFlashThreads,
                     keyShared, context.stream, part, in.q, in.k, in.v, in.dout,
                     in.lse, delta, in.mask, qkvPart<BF16>(p, outputs, 1),
                     qkvPart<BF16>(p, outputs, 2), vectorized);
        if (Status s = launchStatus("attention_backward (flash dk, dv)"); !s)
          return s;
      }
    }
    return Status::ok();
  });
}

KernelOr createAttentionKernel(const LaunchContext &context,
                               const Instruction &inst, bool backward) {
  const DType dtype = inst.inputs[0].dtype;
  if (Status s = expectDimsAtMost(queryShape(inst).size() - 2,
                                  "the batch dims of " + inst.kernel);
      !s)
    return s;
  const AttentionParams p = readParams(inst, backward);
  // The backward's delta (one per query row) lives in the launch workspace
  // between its two kernels, which run on as many batches at a time as it
  // holds: at least one must fit.
  const size_t statBytes = dtype == DType::F64 ? 8 : 4;
  if (backward && uint64_t(p.sq) * statBytes > context.workspaceBytes)
    return Status::error("attention_backward keeps delta for one batch's " +
                         std::to_string(p.sq) + " query rows (" +
                         std::to_string(uint64_t(p.sq) * statBytes) +
                         " bytes) in the launch workspace, which has " +
                         std::to_string(context.workspaceBytes));
  StatusOr<bool> flash = useFlash(context, dtype, p, backward);
  if (!flash.isOk())
    return flash.status();
  if (flash.value())
    return backward ? makeFlashBackward(p) : makeFlashForward(p);
  switch (dtype) {
  case DType::F32:
    return backward ? makeGenericBackward<float, float>(p)
                    : makeGenericForward<float, float>(p);
  case DType::F64:
    return backward ? makeGenericBackward<double, double>(p)
                    : makeGenericForward<double, double>(p);
  case DType::BF16:
    return backward ? makeGenericBackward<BF16, float>(p)
                    : makeGenericForward<BF16, float>(p);
  default:
    return Status::error(std::string("the CUDA backend has no ") +
                         dtypeName(dtype) + " " + inst.kernel);
  }
}

} // namespace

KernelOr cuda::createAttention(const LaunchContext &context,
                               const Instruction &inst) {
  return createAttentionKernel(context, inst, false);
}

KernelOr cuda::createAttentionBackward(const LaunchContext &context,
                                       const Instruction &inst) {
  return createAttentionKernel(context, inst, true);
}
