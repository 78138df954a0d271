//===- Attention.cu - CUDA attention, attention_backward ------------------===//
//
// Scaled dot-product attention and its gradient, with the CPU kernels'
// semantics (see CPU/Attention.cpp): masked scores take mask_value, a score
// of -inf contributes nothing (p = 0), a row whose every score is -inf gives
// out = NaN and lse = -inf, masked entries get ds = 0, p and ds are rounded
// to bf16 before the products that take them when the operands are bf16,
// and every product accumulates in f32 (f64 for f64). One difference of
// rounding: the flash forward, which cannot know a row's max and sum before
// its last key tile, rounds e^(s - running max) for the P V product and
// divides by the f32 sum at the end, where the CPU rounds p itself; the two
// agree within bf16's precision (the tests' tolerance), not bit for bit.
//
// Two implementations:
//
//  - Flash kernels (bf16, D and Dv multiples of 16 up to 128, sm_80+):
//    tensor-core products through mma.sync m16n8k16 (TensorCore.cuh), four
//    warps per block, the operand tiles in shared memory (read into
//    fragments with ldmatrix) and everything else in registers: a warp owns
//    16-row tiles, and lane l holds rows l / 4 and l / 4 + 8 of each, so a
//    row's max and sum combine the four lanes of a quad, scores turn into
//    probabilities where the product left them, and those become the next
//    product's operand without a trip through shared memory. The forward
//    takes one block per (batch, 128 queries) up to head dim 64 (two row
//    tiles per warp, so each K and V fragment feeds two products) or 64
//    queries beyond, and walks 64-key tiles with an online softmax; O / sum
//    and max + log(sum) are stored at the end.
//    Every flash kernel walks its tiles with the next tile's operands in
//    flight (cp.async into a second buffer, AsyncCopy.cuh) while it
//    computes on the current one, so that the loads overlap the products
//    within a block and not only across the blocks an SM holds (two of
//    every flash kernel on an H100/H200). Each
//    tile's mask is copied to shared memory one tile further ahead, which
//    tells whether the next tile is fully masked (skipped: its operands are
//    not requested) or not masked at all (the copy is not read).
//    The backward recomputes p = e^(s - lse) in two kernels, neither with
//    atomics: dq with one block per (batch, 64 queries) walking 64-key tiles,
//    dk and dv with one block per (batch, 64 keys) walking 64-query steps
//    (32 beyond head dim 64), computing S^T and dP^T so that a key's
//    gradients accumulate in the lanes holding its row.
//    The dq kernel also computes its rows' delta = dout . out and leaves it
//    in the launch workspace (head-major, f32), where the dk/dv kernel,
//    which runs after it on the stream, reads every query's. When the
//    workspace cannot hold every batch's rows, the pair runs on as many
//    batches at a time as it holds.
//    With mask_value -inf a (query tile, key tile) pair whose entries are all
//    masked is skipped (a causal mask skips about half the work); with a
//    finite mask_value masked entries contribute, so nothing is skipped.
//    Partial tiles are zero-padded in shared memory and their scores set to
//    -inf. Operands load 16 bytes at a time (cp.async) when every pointer
//    allows it, else element by element (synchronously, into the same
//    buffers).
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

#include "AsyncCopy.cuh"
#include "Device.cuh"
#include "TensorCore.cuh"

#include <cuda_bf16.h>

#include <cmath>
#include <limits>
#include <tuple>
#include <type_traits>

using namespace loomrt;
using namespace loomrt::cuda;

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

/// Query rows of a forward or dq tile, and keys of every key tile.
constexpr int kTile = 64;
constexpr int kFlashWarps = kTile / 16;
constexpr int kFlashThreads = 32 * kFlashWarps;
constexpr int kFlashMaxDim = 128;
/// Row padding of the shared bf16 tiles: rows stay 16-byte aligned (as
/// ldmatrix needs) and the eight rows an ldmatrix reads fall in different
/// banks.
constexpr int kPadBF16 = 8;

/// Carves the dynamic shared memory into arrays, each 128-byte aligned.
struct SharedCarver {
  size_t bytes = 0;
  __host__ __device__ size_t take(size_t size) {
    size_t offset = bytes;
    bytes += (size + 127) / 128 * 128;
    return offset;
  }
};

/// Row stride (bytes) of the shared copies of a tile's mask.
constexpr int kMaskLd = kTile + 16; // 16-byte aligned rows

/// The flash kernels walk tiles (of keys, or of queries for dk and dv)
/// with the next tile's operands in flight while they compute on the
/// current one (cp.async, AsyncCopy.cuh): two buffers of operands. Masks go
/// one tile further ahead, so that whether the next tile is skipped is known
/// before its operands are requested: three buffers of mask tiles.
constexpr int kOperandBuffers = 2, kMaskBuffers = 3;

/// The offset of buffer `i` of an array of equally spaced buffers (a
/// layout's, taken one after another): base plus stride, where an index
/// into the offsets themselves would put them in local memory.
template <int N>
__host__ __device__ inline size_t bufferAt(const size_t (&offsets)[N], int i) {
  static_assert(N >= 2, "buffers come in twos or threes");
  return offsets[0] + size_t(i) * (offsets[1] - offsets[0]);
}

/// The forward keeps Q, the scores, P and O in registers (mma.sync,
/// TensorCore.cuh): each warp owns 16 * RowTiles query rows, with head dims
/// up to Dim. Head dims up to 64 take two row tiles per warp (each K and V
/// fragment read from shared memory then feeds two products), larger ones
/// one, which keeps O and Q within the registers a thread has.
template <int Dim, int RowTiles> struct ForwardShape {
  static constexpr int kDim = Dim, kRowTiles = RowTiles;
  static constexpr int kRows = kFlashWarps * 16 * RowTiles;
};
using NarrowForward = ForwardShape<64, 2>;
using WideForward = ForwardShape<128, 1>;

/// Query rows of a forward block for head dims d and dv.
__host__ __device__ inline int forwardRows(int d, int dv) {
  return d <= NarrowForward::kDim && dv <= NarrowForward::kDim
             ? NarrowForward::kRows
             : WideForward::kRows;
}

/// Where each shared array of a flash kernel starts (offsets into the
/// dynamic shared memory); `k[i]`, `mask[i]`: buffer i.
struct ForwardLayout {
  size_t q, k[kOperandBuffers], v[kOperandBuffers], mask[kMaskBuffers], bytes;
  __host__ __device__ ForwardLayout(int d, int dv, int rows) {
    SharedCarver c;
    q = c.take(size_t(rows) * (d + kPadBF16) * 2);
    for (int i = 0; i < kOperandBuffers; ++i) {
      k[i] = c.take(size_t(kTile) * (d + kPadBF16) * 2);
      v[i] = c.take(size_t(kTile) * (dv + kPadBF16) * 2);
    }
    for (size_t &m : mask)
      m = c.take(size_t(rows) * kMaskLd);
    bytes = c.bytes;
  }
  __host__ __device__ ForwardLayout(int d, int dv)
      : ForwardLayout(d, dv, forwardRows(d, dv)) {}
};

/// The backward kernels' largest head dim (their fragment arrays are sized
/// for it) and the queries the dk/dv kernel takes per step: 64 up to head
/// dim 64, 32 beyond, which keeps its four sets of accumulators within the
/// registers a thread has.
template <int Dim> struct BackwardShape {
  static constexpr int kDim = Dim;
  static constexpr int kQueries = Dim <= 64 ? 64 : 32;
};
using NarrowBackward = BackwardShape<64>;
using WideBackward = BackwardShape<128>;

__host__ __device__ inline bool narrowBackward(int d, int dv) {
  return d <= NarrowBackward::kDim && dv <= NarrowBackward::kDim;
}

/// The dq kernel's Q and dO tiles are read only before its walk (into
/// registers, and for delta), so they are its second K and V buffers, which
/// the walk first writes after a barrier: at head dim 128 that keeps two
/// blocks per SM.
struct QueryGradLayout {
  size_t q, dout, k[kOperandBuffers], v[kOperandBuffers], delta,
      mask[kMaskBuffers], bytes;
  __host__ __device__ QueryGradLayout(int d, int dv) {
    SharedCarver c;
    for (int i = 0; i < kOperandBuffers; ++i) {
      k[i] = c.take(size_t(kTile) * (d + kPadBF16) * 2);
      v[i] = c.take(size_t(kTile) * (dv + kPadBF16) * 2);
    }
    q = k[1];
    dout = v[1];
    delta = c.take(size_t(kTile) * 4);
    for (size_t &m : mask)
      m = c.take(size_t(kTile) * kMaskLd);
    bytes = c.bytes;
  }
};

struct KeyGradLayout {
  size_t k, v, q[kOperandBuffers], dout[kOperandBuffers], lse[kOperandBuffers],
      delta[kOperandBuffers], mask[kMaskBuffers], bytes;
  __host__ __device__ KeyGradLayout(int d, int dv, int queries) {
    SharedCarver c;
    k = c.take(size_t(kTile) * (d + kPadBF16) * 2);
    v = c.take(size_t(kTile) * (dv + kPadBF16) * 2);
    for (int i = 0; i < kOperandBuffers; ++i) {
      q[i] = c.take(size_t(queries) * (d + kPadBF16) * 2);
      dout[i] = c.take(size_t(queries) * (dv + kPadBF16) * 2);
      lse[i] = c.take(size_t(queries) * 4);
      delta[i] = c.take(size_t(queries) * 4);
    }
    for (size_t &m : mask)
      m = c.take(size_t(queries) * kMaskLd);
    bytes = c.bytes;
  }
  __host__ __device__ KeyGradLayout(int d, int dv)
      : KeyGradLayout(d, dv,
                      narrowBackward(d, dv) ? NarrowBackward::kQueries
                                            : WideBackward::kQueries) {}
};

// mma.sync's bf16 products need sm_80; a build for older architectures keeps
// the kernels (the factory never selects them there) with a trap inside.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define LOOM_FLASH_ARCH 0
#else
#define LOOM_FLASH_ARCH 1
#endif

/// Requests rows [r0, r0 + count) of a [rows, cols] bf16 matrix whose rows
/// are `srcLd` elements apart into shared memory with leading dim `ld`;
/// rows past `rows` are zeros. `cols` and `srcLd` are multiples of 8;
/// `vectorized`: the matrix is 16-byte aligned (so is every row), and the
/// rows come by cp.async, landed once the caller commits and waits; else
/// element by element, landed on return.
__device__ inline void loadTile(BF16 *dst, int ld, const BF16 *src,
                                int64_t srcLd, int64_t rows, int64_t r0,
                                int count, int cols, bool vectorized) {
  if (vectorized) {
    const int chunks = cols / 8;
    for (int idx = threadIdx.x; idx < count * chunks; idx += blockDim.x) {
      const int r = idx / chunks, c = (idx % chunks) * 8;
      const bool inside = r0 + r < rows;
      // A row past the end is zero-filled from a valid address.
      copyAsync<16>(dst + r * ld + c, src + (inside ? (r0 + r) * srcLd + c : 0),
                    inside);
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

/// Requests the mask `m` ([Sq, Sk], row stride sk) of rows [i0, i0 + rows)
/// x keys [j0, j0 + cols) into `tile` (rows kMaskLd bytes apart), so that
/// the kernel reads it from shared memory: 16 entries per cp.async when
/// every row allows (landed once the caller commits and waits), else byte by
/// byte (landed on return). `j0` is a multiple of 16.
__device__ inline void loadTileMask(uint8_t *tile, const uint8_t *m, int64_t sk,
                                    int64_t i0, int rows, int64_t j0,
                                    int cols) {
  if (sk % 16 == 0 && reinterpret_cast<uintptr_t>(m) % 16 == 0) {
    // Every row and `cols` are multiples of 16 entries here.
    const int chunks = cols / 16;
    for (int idx = threadIdx.x; idx < rows * chunks; idx += blockDim.x) {
      const int r = idx / chunks, c = (idx % chunks) * 16;
      copyAsync<16>(tile + r * kMaskLd + c, m + (i0 + r) * sk + j0 + c, true);
    }
    return;
  }
  for (int idx = threadIdx.x; idx < rows * cols; idx += blockDim.x) {
    const int r = idx / cols, c = idx % cols;
    tile[r * kMaskLd + c] = m[(i0 + r) * sk + j0 + c];
  }
}

/// What a flash kernel does with a (query tile, key tile) pair, given the
/// pair's mask tile in shared memory (loadTileMask's; null: no mask): Skip
/// when every entry is masked and masked entries contribute nothing
/// (`skipMasked`), Unmasked when no entry is masked (the tile need not be
/// read), else Masked. Every thread of the block must call it (it
/// synchronizes the block when there is a mask).
__device__ inline TileMask
classifyTileMask(const uint8_t *tile, bool skipMasked, int rows, int cols) {
  if (!tile)
    return TileMask::Unmasked;
  int all = 1, none = 1;
  if (cols % 16 == 0) {
    auto noZeroByte = [](uint32_t w) {
      return ((w - 0x01010101u) & ~w & 0x80808080u) == 0;
    };
    const int chunks = cols / 16;
    for (int idx = threadIdx.x; idx < rows * chunks; idx += blockDim.x) {
      const int r = idx / chunks, c = (idx % chunks) * 16;
      const uint4 w = *reinterpret_cast<const uint4 *>(tile + r * kMaskLd + c);
      all &= noZeroByte(w.x) && noZeroByte(w.y) && noZeroByte(w.z) &&
             noZeroByte(w.w);
      none &= (w.x | w.y | w.z | w.w) == 0;
    }
  } else {
    for (int idx = threadIdx.x; idx < rows * cols; idx += blockDim.x) {
      const uint8_t masked = tile[idx / cols * kMaskLd + idx % cols];
      all &= masked != 0;
      none &= masked == 0;
    }
  }
  const bool allMasked = __syncthreads_and(all) != 0;
  const bool noneMasked = __syncthreads_and(none) != 0;
  if (skipMasked && allMasked)
    return TileMask::Skip;
  return noneMasked ? TileMask::Unmasked : TileMask::Masked;
}

/// Walks a flash kernel's `steps` tiles with the next tile's operands in
/// flight while it computes on the current one. `masks` (null without a
/// mask) is the first of the kMaskBuffers mask tiles, `maskStride` bytes
/// apart; step 0's has landed and the block synchronized since. The callbacks:
///   - classify(t, tile): classifyTileMask of step t's mask tile (null
///     without a mask);
///   - loadMask(t, tile): requests step t's mask into `tile`;
///   - loadOperands(t, buffer): requests step t's operands into operand
///     buffer `buffer`;
///   - compute(t, buffer, tileMask, tile): step t, unless it is skipped.
/// Every thread of the block must call it. Step t + 1's operands, and step
/// t + 2's mask, are requested once every thread is done with step t - 1
/// (whose buffers they take), and have landed, waited for and behind a
/// barrier, before step t + 1 reads them.
template <typename Classify, typename LoadMask, typename LoadOperands,
          typename Compute>
__device__ inline void
walkTiles(int64_t steps, uint8_t *masks, size_t maskStride, Classify classify,
          LoadMask loadMask, LoadOperands loadOperands, Compute compute) {
  if (steps <= 0)
    return;
  auto maskTile = [&](int64_t t) {
    return masks ? masks + size_t(t % kMaskBuffers) * maskStride : nullptr;
  };
  TileMask next = classify(int64_t(0), maskTile(0));
  if (next != TileMask::Skip)
    loadOperands(int64_t(0), 0);
  if (masks && steps > 1)
    loadMask(int64_t(1), maskTile(1));
  commitAsyncCopies();
  for (int64_t t = 0; t < steps; ++t) {
    const TileMask current = next;
    waitAsyncCopies<0>();
    __syncthreads();
    if (t + 1 < steps) {
      next = classify(t + 1, maskTile(t + 1));
      if (next != TileMask::Skip)
        loadOperands(t + 1, int((t + 1) % kOperandBuffers));
      if (masks && t + 2 < steps)
        loadMask(t + 2, maskTile(t + 2));
      commitAsyncCopies();
    }
    if (current != TileMask::Skip)
      compute(t, int(t % kOperandBuffers), current, maskTile(t));
  }
}

/// The walk of the forward and dq kernels: key tiles of K and V for the
/// query rows [i0, i0 + rows), in the K and V buffers at `kBase` and
/// `vBase` (buffer i `stride` bytes further), with the mask's tiles.
struct KeyTiles {
  const AttentionParams &p;
  const uint8_t *m; // batch b's mask, or null
  bool skipMasked;
  int64_t i0;
  int rows;
  OperandRows k, v;
  int ldk, ldv;
  bool vectorized;
  unsigned char *shared;
  size_t kBase, vBase, stride;

  __device__ int cols(int64_t t) const {
    return int(min(int64_t(kTile), p.sk - t * kTile));
  }
  __device__ BF16 *keys(int buffer) const {
    return reinterpret_cast<BF16 *>(shared + kBase + buffer * stride);
  }
  __device__ BF16 *values(int buffer) const {
    return reinterpret_cast<BF16 *>(shared + vBase + buffer * stride);
  }
  __device__ void loadMask(int64_t t, uint8_t *tile) const {
    loadTileMask(tile, m, p.sk, i0, rows, t * kTile, cols(t));
  }
  /// Walks the tiles (walkTiles), `compute` as there.
  template <typename Compute>
  __device__ void walk(uint8_t *masks, size_t maskStride,
                       Compute compute) const {
    walkTiles((p.sk + kTile - 1) / kTile, m ? masks : nullptr, maskStride,
              [&](int64_t t, const uint8_t *tile) {
                return classifyTileMask(tile, skipMasked, rows, cols(t));
              },
              [&](int64_t t, uint8_t *tile) { loadMask(t, tile); },
              [&](int64_t t, int buffer) {
                loadTile(keys(buffer), ldk, k.base, k.ld, p.sk, t * kTile,
                         kTile, int(p.d), vectorized);
                loadTile(values(buffer), ldv, v.base, v.ld, p.sk, t * kTile,
                         kTile, int(p.dv), vectorized);
              },
              compute);
  }
};

/// dst[0, 2) = row half h (rows l / 4 + 8 h) of accumulator c times
/// `factor`, rounded to bf16: a gradient's two columns in this lane.
__device__ inline void storePair(BF16 *dst, const MmaC &c, int h,
                                 float factor) {
  dst[0] = roundBF16(factor * c.x[2 * h]);
  dst[1] = roundBF16(factor * c.x[2 * h + 1]);
}

/// Forward: one block per (batch, Shape::kRows queries), everything but the
/// operand tiles in registers. Lane l of a warp holds, of each 16-row tile
/// it owns, rows l / 4 and l / 4 + 8 (TensorCore.cuh's accumulator layout),
/// so a row's max and sum combine the four lanes of a quad with two
/// shuffles, and O is rescaled where it is.
template <typename Shape>
__global__ void __launch_bounds__(kFlashThreads)
    flashForward(AttentionParams p, const BF16 *q, const BF16 *k, const BF16 *v,
                 const uint8_t *mask, BF16 *out, float *lse, bool vectorized) {
#if !LOOM_FLASH_ARCH
  __trap();
#else
  constexpr int kRowTiles = Shape::kRowTiles, kRows = Shape::kRows;
  constexpr int kDimSteps = Shape::kDim / 16, kKeyTiles = kTile / 8;
  const int d = int(p.d), dv = int(p.dv);
  const ForwardLayout layout(d, dv, kRows);
  unsigned char *shared = dynamicShared();
  BF16 *qs = reinterpret_cast<BF16 *>(shared + layout.q);
  const int ldq = d + kPadBF16, ldv = dv + kPadBF16;

  const int64_t tiles = (p.sq + kRows - 1) / kRows;
  const int64_t b = blockIdx.x / tiles, i0 = (blockIdx.x % tiles) * kRows;
  const int rows = int(min(int64_t(kRows), p.sq - i0));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int quadRow = lane / 4, quadCol = 2 * (lane % 4);
  const int warpRow = warp * 16 * kRowTiles;
  const float scale = float(p.scale), maskValue = float(p.maskValue);
  const float inf = infinity<float>();
  const uint8_t *m = maskOf(mask, p, b);
  const bool skipMasked = m && maskValue == -inf;

  const OperandRows qRows = operandRows(p, q, b, p.sq, d, p.qkLd),
                    kRowsOf = operandRows(p, k, b, p.sk, d, p.qkLd),
                    vRows = operandRows(p, v, b, p.sk, dv, p.vLd);
  uint8_t *masks = shared + layout.mask[0];
  const KeyTiles keyTiles{p,           m,
                          skipMasked,  i0,
                          rows,        kRowsOf,
                          vRows,       ldq,
                          ldv,         vectorized,
                          shared,      layout.k[0],
                          layout.v[0], layout.k[1] - layout.k[0]};
  loadTile(qs, ldq, qRows.base, qRows.ld, p.sq, i0, kRows, d, vectorized);
  if (m)
    keyTiles.loadMask(0, masks);
  commitAsyncCopies();
  waitAsyncCopies<0>();
  __syncthreads();
  MmaA qa[kRowTiles][kDimSteps];
#pragma unroll
  for (int mt = 0; mt < kRowTiles; ++mt)
#pragma unroll
    for (int kk = 0; kk < kDimSteps; ++kk)
      if (kk < d / 16)
        qa[mt][kk] = loadA(qs + (warpRow + mt * 16) * ldq + kk * 16, ldq);

  MmaC o[kRowTiles][2 * kDimSteps];
  float rowMax[kRowTiles][2], rowSum[kRowTiles][2];
#pragma unroll
  for (int mt = 0; mt < kRowTiles; ++mt) {
#pragma unroll
    for (int nd = 0; nd < 2 * kDimSteps; ++nd)
      o[mt][nd] = MmaC{{0.0f, 0.0f, 0.0f, 0.0f}};
    rowMax[mt][0] = rowMax[mt][1] = -inf;
    rowSum[mt][0] = rowSum[mt][1] = 0.0f;
  }

  // A tile that masks nothing (most of a causal mask's) has its mask not
  // read at all.
  auto compute = [&](int64_t t, int buffer, TileMask tileMask,
                     const uint8_t *maskTile) {
    const int cols = keyTiles.cols(t);
    const bool noneMasked = tileMask == TileMask::Unmasked;
    const BF16 *ks = keyTiles.keys(buffer), *vs = keyTiles.values(buffer);

    // S = Q K^T: each pair of K fragments serves every row tile.
    MmaC sc[kRowTiles][kKeyTiles];
#pragma unroll
    for (int mt = 0; mt < kRowTiles; ++mt)
#pragma unroll
      for (int nt = 0; nt < kKeyTiles; ++nt)
        sc[mt][nt] = MmaC{{0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
    for (int kk = 0; kk < kDimSteps; ++kk) {
      if (kk >= d / 16)
        break;
#pragma unroll
      for (int np = 0; np < kKeyTiles / 2; ++np) {
        MmaB b0, b1;
        loadBPair<false>(b0, b1, ks + np * 16 * ldq + kk * 16, ldq);
#pragma unroll
        for (int mt = 0; mt < kRowTiles; ++mt) {
          mma(sc[mt][2 * np], qa[mt][kk], b0);
          mma(sc[mt][2 * np + 1], qa[mt][kk], b1);
        }
      }
    }

    // Online softmax: this lane's two rows of each row tile, their other
    // columns in the three other lanes of its quad.
#pragma unroll
    for (int mt = 0; mt < kRowTiles; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = warpRow + mt * 16 + quadRow + 8 * h;
        const uint8_t *masked = noneMasked ? nullptr : maskTile + r * kMaskLd;
        float tileMax = -inf;
#pragma unroll
        for (int nt = 0; nt < kKeyTiles; ++nt)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int c = nt * 8 + quadCol + e;
            float &s = sc[mt][nt].x[2 * h + e];
            s = r < rows && c < cols
                    ? (masked && masked[c] ? maskValue : scale * s)
                    : -inf;
            tileMax = MaxIgnoreNaNOp()(tileMax, s);
          }
        tileMax =
            MaxIgnoreNaNOp()(tileMax, __shfl_xor_sync(0xffffffffu, tileMax, 1));
        tileMax =
            MaxIgnoreNaNOp()(tileMax, __shfl_xor_sync(0xffffffffu, tileMax, 2));
        const float oldMax = rowMax[mt][h];
        const float newMax = MaxIgnoreNaNOp()(oldMax, tileMax);
        const float alpha = oldMax == -inf ? 0.0f : expf(oldMax - newMax);
        // The sum takes e unrounded; the P V product its bf16 rounding.
        float sum = 0.0f;
#pragma unroll
        for (int nt = 0; nt < kKeyTiles; ++nt)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            float &s = sc[mt][nt].x[2 * h + e];
            s = expShift(s, newMax);
            sum += s;
          }
        // Each lane keeps its part of the sum (every part is rescaled by
        // the same alpha); the quad adds them up at the end.
        rowSum[mt][h] = rowSum[mt][h] * alpha + sum;
        rowMax[mt][h] = newMax;
#pragma unroll
        for (int nd = 0; nd < 2 * kDimSteps; ++nd) {
          o[mt][nd].x[2 * h] *= alpha;
          o[mt][nd].x[2 * h + 1] *= alpha;
        }
      }

      // O += P V, P straight from the score registers.
#pragma unroll
    for (int kk = 0; kk < kTile / 16; ++kk) {
      MmaA pa[kRowTiles];
#pragma unroll
      for (int mt = 0; mt < kRowTiles; ++mt)
        pa[mt] = accumulatorsAsA(sc[mt][2 * kk], sc[mt][2 * kk + 1]);
#pragma unroll
      for (int np = 0; np < kDimSteps; ++np) {
        if (np >= dv / 16)
          break;
        MmaB b0, b1;
        loadBPair<true>(b0, b1, vs + kk * 16 * ldv + np * 16, ldv);
#pragma unroll
        for (int mt = 0; mt < kRowTiles; ++mt) {
          mma(o[mt][2 * np], pa[mt], b0);
          mma(o[mt][2 * np + 1], pa[mt], b1);
        }
      }
    }
  };
  keyTiles.walk(masks, layout.mask[1] - layout.mask[0], compute);

#pragma unroll
  for (int mt = 0; mt < kRowTiles; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float sum = rowSum[mt][h];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const int r = warpRow + mt * 16 + quadRow + 8 * h;
      if (r >= rows)
        continue;
      const int64_t row = rowIndex(p, b, i0 + r, p.sq);
      // sum is 0 when every score was -inf: NaN out, lse -inf.
#pragma unroll
      for (int nd = 0; nd < 2 * kDimSteps; ++nd) {
        if (nd >= dv / 8)
          break;
        BF16 *dst = out + row * dv + nd * 8 + quadCol;
        dst[0] = roundBF16(o[mt][nd].x[2 * h] / sum); // divided, as the CPU
        dst[1] = roundBF16(o[mt][nd].x[2 * h + 1] / sum);
      }
      if (lane % 4 == 0)
        lse[row] = rowMax[mt][h] + logf(sum);
    }
#endif
}

/// dq and delta (into `delta`, head-major): one block per (batch, 64
/// queries), each warp's 16 rows in registers as in the forward.
template <typename Shape>
__global__ void __launch_bounds__(kFlashThreads)
    flashQueryGrads(AttentionParams p, const BF16 *q, const BF16 *k,
                    const BF16 *v, const BF16 *dout, const float *lse,
                    const BF16 *out, const uint8_t *mask, BF16 *dq,
                    float *delta, bool vectorized) {
#if !LOOM_FLASH_ARCH
  __trap();
#else
  constexpr int kDimSteps = Shape::kDim / 16, kKeyTiles = kTile / 8;
  const int d = int(p.d), dv = int(p.dv);
  const QueryGradLayout layout(d, dv);
  unsigned char *shared = dynamicShared();
  BF16 *qs = reinterpret_cast<BF16 *>(shared + layout.q);
  BF16 *douts = reinterpret_cast<BF16 *>(shared + layout.dout);
  float *deltas = reinterpret_cast<float *>(shared + layout.delta);
  uint8_t *masks = shared + layout.mask[0];
  const int ldq = d + kPadBF16, ldv = dv + kPadBF16;

  const int64_t tiles = (p.sq + kTile - 1) / kTile;
  const int64_t b = p.batchBegin + blockIdx.x / tiles,
                i0 = (blockIdx.x % tiles) * kTile;
  const int rows = int(min(int64_t(kTile), p.sq - i0));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int quadRow = lane / 4, quadCol = 2 * (lane % 4), warpRow = warp * 16;
  const float scale = float(p.scale), maskValue = float(p.maskValue);
  const float inf = infinity<float>();
  const uint8_t *m = maskOf(mask, p, b);
  const bool skipMasked = m && maskValue == -inf;

  const OperandRows qRows = operandRows(p, q, b, p.sq, d, p.qkLd),
                    doutRows = operandRows(p, dout, b, p.sq, dv, p.heads * dv),
                    kRows = operandRows(p, k, b, p.sk, d, p.qkLd),
                    vRows = operandRows(p, v, b, p.sk, dv, p.vLd);
  const KeyTiles keyTiles{p,           m,
                          skipMasked,  i0,
                          rows,        kRows,
                          vRows,       ldq,
                          ldv,         vectorized,
                          shared,      layout.k[0],
                          layout.v[0], layout.k[1] - layout.k[0]};
  loadTile(qs, ldq, qRows.base, qRows.ld, p.sq, i0, kTile, d, vectorized);
  loadTile(douts, ldv, doutRows.base, doutRows.ld, p.sq, i0, kTile, dv,
           vectorized);
  if (m)
    keyTiles.loadMask(0, masks);
  commitAsyncCopies();
  waitAsyncCopies<0>();
  __syncthreads();
  // delta = dout . out for this warp's rows (products in f32, summed in
  // f64 as on the CPU), kept for the loop and stored for the dk/dv kernel:
  // two lanes per row, each summing half of it, with every load of `out`
  // issued before the first product.
  {
    const int r = warpRow + lane / 2, half = dv / 2, c0 = (lane % 2) * half;
    double rowDot = 0;
    if (r < rows) {
      const BF16 *o = out + rowIndex(p, b, i0 + r, p.sq) * dv + c0;
      const BF16 *g = douts + r * ldv + c0;
      // Rows of out are 16-byte multiples apart (dv % 16 == 0), and half is
      // a multiple of 8: 16-byte chunks when out is aligned.
      if (reinterpret_cast<uintptr_t>(out) % 16 == 0) {
        constexpr int kChunks = Shape::kDim / 16;
        uint4 chunk[kChunks];
#pragma unroll
        for (int i = 0; i < kChunks; ++i)
          if (8 * i < half)
            chunk[i] = *reinterpret_cast<const uint4 *>(o + 8 * i);
#pragma unroll
        for (int i = 0; i < kChunks; ++i)
          if (8 * i < half) {
            // bf16 widens to the f32 of its bits in the upper half (no
            // type punning of the chunk: it is read as the words it is).
            const uint32_t words[4] = {chunk[i].x, chunk[i].y, chunk[i].z,
                                       chunk[i].w};
            for (int j = 0; j < 8; ++j) {
              const uint32_t w = words[j / 2];
              const float x =
                  __uint_as_float(j % 2 ? w & 0xffff0000u : w << 16);
              rowDot += double(__bfloat162float(g[8 * i + j]) * x);
            }
          }
      } else {
        for (int c = 0; c < half; ++c)
          rowDot += double(__bfloat162float(g[c]) * __bfloat162float(o[c]));
      }
    }
    rowDot += __shfl_xor_sync(0xffffffffu, rowDot, 1);
    if (lane % 2 == 0) {
      deltas[r] = r < rows ? float(rowDot) : 0.0f;
      if (r < rows)
        delta[(b - p.batchBegin) * p.sq + i0 + r] = float(rowDot);
    }
  }
  __syncwarp();

  MmaA qa[kDimSteps], da[kDimSteps];
  MmaC acc[2 * kDimSteps];
#pragma unroll
  for (int kk = 0; kk < kDimSteps; ++kk) {
    if (kk < d / 16)
      qa[kk] = loadA(qs + warpRow * ldq + kk * 16, ldq);
    if (kk < dv / 16)
      da[kk] = loadA(douts + warpRow * ldv + kk * 16, ldv);
    acc[2 * kk] = acc[2 * kk + 1] = MmaC{{0.0f, 0.0f, 0.0f, 0.0f}};
  }
  float rowLse[2], rowDelta[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = warpRow + quadRow + 8 * h;
    rowLse[h] = r < rows ? lse[rowIndex(p, b, i0 + r, p.sq)] : 0.0f;
    rowDelta[h] = deltas[r];
  }

  auto compute = [&](int64_t t, int buffer, TileMask tileMask,
                     const uint8_t *maskTile) {
    const int cols = keyTiles.cols(t);
    const bool noneMasked = tileMask == TileMask::Unmasked;
    const BF16 *ks = keyTiles.keys(buffer), *vs = keyTiles.values(buffer);

    // S = Q K^T and dP = dO V^T for this warp's 16 rows.
    MmaC sc[kKeyTiles], dp[kKeyTiles];
#pragma unroll
    for (int nt = 0; nt < kKeyTiles; ++nt)
      sc[nt] = dp[nt] = MmaC{{0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
    for (int kk = 0; kk < kDimSteps; ++kk) {
#pragma unroll
      for (int np = 0; np < kKeyTiles / 2; ++np) {
        if (kk < d / 16) {
          mmaBPair<false>(&sc[2 * np], qa[kk], ks + np * 16 * ldq + kk * 16,
                          ldq);
        }
        if (kk < dv / 16) {
          mmaBPair<false>(&dp[2 * np], da[kk], vs + np * 16 * ldv + kk * 16,
                          ldv);
        }
      }
    }

    // dS = P (dP - delta), 0 where masked (into the score registers).
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = warpRow + quadRow + 8 * h;
#pragma unroll
      for (int nt = 0; nt < kKeyTiles; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int c = nt * 8 + quadCol + e;
          float ds = 0.0f;
          if (r < rows && c < cols &&
              (noneMasked || !maskTile[r * kMaskLd + c])) {
            const float pr = expShift(scale * sc[nt].x[2 * h + e], rowLse[h]);
            ds = pr * (dp[nt].x[2 * h + e] - rowDelta[h]);
          }
          sc[nt].x[2 * h + e] = ds;
        }
    }

    // dQ += dS K, dS rounded to bf16 on its way into the A operand.
#pragma unroll
    for (int kk = 0; kk < kTile / 16; ++kk) {
      const MmaA dsa = accumulatorsAsA(sc[2 * kk], sc[2 * kk + 1]);
#pragma unroll
      for (int np = 0; np < kDimSteps; ++np) {
        if (np >= d / 16)
          break;
        mmaBPair<true>(&acc[2 * np], dsa, ks + kk * 16 * ldq + np * 16, ldq);
      }
    }
  };
  keyTiles.walk(masks, layout.mask[1] - layout.mask[0], compute);

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = warpRow + quadRow + 8 * h;
    if (r >= rows)
      continue;
    BF16 *dqRow = dq + qkvRow(p, b, i0 + r, p.sq, d, p.qkLd);
#pragma unroll
    for (int nd = 0; nd < 2 * kDimSteps; ++nd) {
      if (nd >= d / 8)
        break;
      storePair(dqRow + nd * 8 + quadCol, acc[nd], h, scale);
    }
  }
#endif
}

/// dk and dv: one block per (batch, 64 keys), each warp's 16 keys in
/// registers, Shape::kQueries queries per step. The products are the
/// transposed ones (S^T = K Q^T, dP^T = V dO^T), so that a key's gradients
/// accumulate in the lanes that hold its row.
template <typename Shape>
__global__ void __launch_bounds__(kFlashThreads)
    flashKeyGrads(AttentionParams p, const BF16 *q, const BF16 *k,
                  const BF16 *v, const BF16 *dout, const float *lse,
                  const float *delta, const uint8_t *mask, BF16 *dk, BF16 *dv,
                  bool vectorized) {
#if !LOOM_FLASH_ARCH
  __trap();
#else
  constexpr int kDimSteps = Shape::kDim / 16, kQueries = Shape::kQueries;
  constexpr int kQueryTiles = kQueries / 8;
  const int d = int(p.d), dvDim = int(p.dv);
  const KeyGradLayout layout(d, dvDim, kQueries);
  unsigned char *shared = dynamicShared();
  BF16 *ks = reinterpret_cast<BF16 *>(shared + layout.k);
  BF16 *vs = reinterpret_cast<BF16 *>(shared + layout.v);
  uint8_t *masks = shared + layout.mask[0];
  const int ldq = d + kPadBF16, ldv = dvDim + kPadBF16;

  const int64_t tiles = (p.sk + kTile - 1) / kTile;
  const int64_t b = p.batchBegin + blockIdx.x / tiles,
                j0 = (blockIdx.x % tiles) * kTile;
  const int cols = int(min(int64_t(kTile), p.sk - j0));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int quadRow = lane / 4, quadCol = 2 * (lane % 4), warpRow = warp * 16;
  const float scale = float(p.scale), maskValue = float(p.maskValue);
  const float inf = infinity<float>();
  const uint8_t *m = maskOf(mask, p, b);
  const bool skipMasked = m && maskValue == -inf;

  const OperandRows kRows = operandRows(p, k, b, p.sk, d, p.qkLd),
                    vRows = operandRows(p, v, b, p.sk, dvDim, p.vLd),
                    qRows = operandRows(p, q, b, p.sq, d, p.qkLd),
                    doutRows =
                        operandRows(p, dout, b, p.sq, dvDim, p.heads * dvDim);
  // The step's mask, [queries][keys], in shared memory: a lane reads its
  // keys' columns of it, which in global memory would be strided loads.
  auto loadMask = [&](int64_t t, uint8_t *tile) {
    const int64_t i0 = t * kQueries;
    loadTileMask(tile, m, p.sk, i0, int(min(int64_t(kQueries), p.sq - i0)), j0,
                 cols);
  };
  loadTile(ks, ldq, kRows.base, kRows.ld, p.sk, j0, kTile, d, vectorized);
  loadTile(vs, ldv, vRows.base, vRows.ld, p.sk, j0, kTile, dvDim, vectorized);
  if (m)
    loadMask(0, masks);
  commitAsyncCopies();
  waitAsyncCopies<0>();
  __syncthreads();
  MmaC accK[2 * kDimSteps], accV[2 * kDimSteps];
#pragma unroll
  for (int nd = 0; nd < 2 * kDimSteps; ++nd)
    accK[nd] = accV[nd] = MmaC{{0.0f, 0.0f, 0.0f, 0.0f}};

  auto classify = [&](int64_t t, const uint8_t *tile) {
    return classifyTileMask(tile, skipMasked,
                            int(min(int64_t(kQueries), p.sq - t * kQueries)),
                            cols);
  };
  auto loadQueries = [&](int64_t t, int buffer) {
    const int64_t i0 = t * kQueries;
    loadTile(reinterpret_cast<BF16 *>(shared + bufferAt(layout.q, buffer)), ldq,
             qRows.base, qRows.ld, p.sq, i0, kQueries, d, vectorized);
    loadTile(reinterpret_cast<BF16 *>(shared + bufferAt(layout.dout, buffer)),
             ldv, doutRows.base, doutRows.ld, p.sq, i0, kQueries, dvDim,
             vectorized);
    float *lses =
        reinterpret_cast<float *>(shared + bufferAt(layout.lse, buffer));
    float *deltas =
        reinterpret_cast<float *>(shared + bufferAt(layout.delta, buffer));
    const float *deltaRows = delta + (b - p.batchBegin) * p.sq;
    for (int r = threadIdx.x; r < kQueries; r += blockDim.x) {
      const bool inside = i0 + r < p.sq;
      copyAsync<4>(lses + r, lse + (inside ? rowIndex(p, b, i0 + r, p.sq) : 0),
                   inside);
      copyAsync<4>(deltas + r, deltaRows + (inside ? i0 + r : 0), inside);
    }
  };
  auto compute = [&](int64_t t, int buffer, TileMask tileMask,
                     const uint8_t *maskTile) {
    const int rows = int(min(int64_t(kQueries), p.sq - t * kQueries));
    const bool noneMasked = tileMask == TileMask::Unmasked;
    const BF16 *qs =
        reinterpret_cast<const BF16 *>(shared + bufferAt(layout.q, buffer));
    const BF16 *douts =
        reinterpret_cast<const BF16 *>(shared + bufferAt(layout.dout, buffer));
    const float *lses =
        reinterpret_cast<const float *>(shared + bufferAt(layout.lse, buffer));
    const float *deltas = reinterpret_cast<const float *>(
        shared + bufferAt(layout.delta, buffer));

    // S^T = K Q^T and dP^T = V dO^T for this warp's 16 keys (K and V
    // fragments from shared memory: registers go to the accumulators).
    MmaC sc[kQueryTiles], dp[kQueryTiles];
#pragma unroll
    for (int nt = 0; nt < kQueryTiles; ++nt)
      sc[nt] = dp[nt] = MmaC{{0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
    for (int kk = 0; kk < kDimSteps; ++kk) {
      if (kk < d / 16) {
        const MmaA ka = loadA(ks + warpRow * ldq + kk * 16, ldq);
#pragma unroll
        for (int np = 0; np < kQueryTiles / 2; ++np) {
          mmaBPair<false>(&sc[2 * np], ka, qs + np * 16 * ldq + kk * 16, ldq);
        }
      }
      if (kk < dvDim / 16) {
        const MmaA va = loadA(vs + warpRow * ldv + kk * 16, ldv);
#pragma unroll
        for (int np = 0; np < kQueryTiles / 2; ++np) {
          mmaBPair<false>(&dp[2 * np], va, douts + np * 16 * ldv + kk * 16,
                          ldv);
        }
      }
    }

    // P^T into sc and dS^T into dp (masked entries still weigh v with a
    // finite mask_value; their ds is 0).
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = warpRow + quadRow + 8 * h;
#pragma unroll
      for (int nt = 0; nt < kQueryTiles; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int c = nt * 8 + quadCol + e;
          float pr = 0.0f, ds = 0.0f;
          if (r < cols && c < rows) {
            const bool masked = !noneMasked && maskTile[c * kMaskLd + r];
            const float s = masked ? maskValue : scale * sc[nt].x[2 * h + e];
            pr = expShift(s, lses[c]);
            if (!masked)
              ds = pr * (dp[nt].x[2 * h + e] - deltas[c]);
          }
          sc[nt].x[2 * h + e] = pr;
          dp[nt].x[2 * h + e] = ds;
        }
    }

    // dV += P^T dO and dK += dS^T Q, P and dS rounded to bf16.
#pragma unroll
    for (int kk = 0; kk < kQueries / 16; ++kk) {
      const MmaA pa = accumulatorsAsA(sc[2 * kk], sc[2 * kk + 1]);
      const MmaA dsa = accumulatorsAsA(dp[2 * kk], dp[2 * kk + 1]);
#pragma unroll
      for (int np = 0; np < kDimSteps; ++np) {
        if (np < dvDim / 16) {
          mmaBPair<true>(&accV[2 * np], pa, douts + kk * 16 * ldv + np * 16,
                         ldv);
        }
        if (np < d / 16) {
          mmaBPair<true>(&accK[2 * np], dsa, qs + kk * 16 * ldq + np * 16, ldq);
        }
      }
    }
  };
  walkTiles((p.sq + kQueries - 1) / kQueries, m ? masks : nullptr,
            layout.mask[1] - layout.mask[0], classify, loadMask, loadQueries,
            compute);

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = warpRow + quadRow + 8 * h;
    if (r >= cols)
      continue;
    BF16 *dkRow = dk + qkvRow(p, b, j0 + r, p.sk, d, p.qkLd),
         *dvRow = dv + qkvRow(p, b, j0 + r, p.sk, dvDim, p.vLd);
#pragma unroll
    for (int nd = 0; nd < 2 * kDimSteps; ++nd) {
      if (nd < d / 8) {
        storePair(dkRow + nd * 8 + quadCol, accK[nd], h, scale);
      }
      if (nd < dvDim / 8) {
        storePair(dvRow + nd * 8 + quadCol, accV[nd], h, 1.0f);
      }
    }
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
    for (auto [query, key, dim] :
         {std::tuple(
              reinterpret_cast<const void *>(&flashQueryGrads<NarrowBackward>),
              reinterpret_cast<const void *>(&flashKeyGrads<NarrowBackward>),
              NarrowBackward::kDim),
          std::tuple(
              reinterpret_cast<const void *>(&flashQueryGrads<WideBackward>),
              reinterpret_cast<const void *>(&flashKeyGrads<WideBackward>),
              WideBackward::kDim)}) {
      if (Status s =
              allow(query, QueryGradLayout(dim, dim).bytes, "flashQueryGrads");
          !s)
        return s;
      if (Status s = allow(key, KeyGradLayout(dim, dim).bytes, "flashKeyGrads");
          !s)
        return s;
    }
  } else if (Status s = allow(
                 reinterpret_cast<const void *>(&flashForward<NarrowForward>),
                 ForwardLayout(NarrowForward::kDim, NarrowForward::kDim).bytes,
                 "flashForward");
             !s) {
    return s;
  } else if (Status s = allow(
                 reinterpret_cast<const void *>(&flashForward<WideForward>),
                 ForwardLayout(WideForward::kDim, WideForward::kDim).bytes,
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
  const int rows = forwardRows(int(p.d), int(p.dv));
  const int64_t blocks = p.batch * ceilDiv(p.sq, rows);
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
    launchKernel(rows == NarrowForward::kRows ? flashForward<NarrowForward>
                                              : flashForward<WideForward>,
                 unsigned(blocks), kFlashThreads, shared, context.stream, p, q,
                 k, v, launchMask(p, inputs), static_cast<BF16 *>(outputs[0]),
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
  const bool narrow = narrowBackward(int(p.d), int(p.dv));
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
        launchKernel(narrow ? flashQueryGrads<NarrowBackward>
                            : flashQueryGrads<WideBackward>,
                     unsigned(queryTiles), kFlashThreads, queryShared,
                     context.stream, part, in.q, in.k, in.v, in.dout, in.lse,
                     in.out, in.mask, qkvPart<BF16>(p, outputs, 0), delta,
                     vectorized);
        if (Status s = launchStatus("attention_backward (flash dq)"); !s)
          return s;
      }
      if (keyTiles > 0) {
        launchKernel(narrow ? flashKeyGrads<NarrowBackward>
                            : flashKeyGrads<WideBackward>,
                     unsigned(keyTiles), kFlashThreads, keyShared,
                     context.stream, part, in.q, in.k, in.v, in.dout, in.lse,
                     delta, in.mask, qkvPart<BF16>(p, outputs, 1),
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
