//===- CUDAEmulatorTest.cpp - The host CUDA emulator's own checks ---------===//
//
// The emulator (lib/Runtime/CUDA/Emulator) stands in for a GPU in the
// kernels' tests, so it must compute what a device computes where a kernel
// is correct, and report what a device would fail on: invalid launches,
// traps, barriers some threads never reach, misaligned ldmatrix rows. It
// must also surface a missing barrier as wrong data rather than hide it.
//
//===----------------------------------------------------------------------===//

#include "Kernels/AsyncCopy.cuh"
#include "Kernels/Device.cuh"
#include "Kernels/TensorCore.cuh"

#include <cublasLt.h>
#include <gtest/gtest.h>
#include <nvrtc.h>

#include <string>

#include <vector>

using namespace loomrt::cuda;

namespace {

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

/// out[block] = sum of in[block * blockDim + t] over the block's threads.
__global__ void blockSums(const float *in, float *out) {
  const float value = in[blockIdx.x * blockDim.x + threadIdx.x];
  const float sum = groupReduce<true>(value, SumOp());
  if (threadIdx.x == 0)
    out[blockIdx.x] = sum;
}

/// out[t] = the value of lane t ^ mask.
__global__ void shuffled(const int *in, int *out, int mask) {
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, in[threadIdx.x], mask);
}

/// out[t] = whether every thread's in[t] is non-zero.
__global__ void allNonZero(const int *in, int *out) {
  out[threadIdx.x] = __syncthreads_and(in[threadIdx.x]);
}

/// out[t] = the value thread t + 1 put in shared memory, read after a
/// barrier or (wrongly) without one.
__global__ void neighbours(float *out, bool barrier) {
  float *shared = reinterpret_cast<float *>(dynamicShared());
  shared[threadIdx.x] = float(threadIdx.x);
  if (barrier)
    __syncthreads();
  out[threadIdx.x] = shared[(threadIdx.x + 1) % blockDim.x];
}

/// neighbours() with a warp barrier between the write and the read, which
/// orders the lanes of a warp but not the warps.
__global__ void neighboursAcrossWarps(float *out) {
  float *shared = reinterpret_cast<float *>(dynamicShared());
  shared[threadIdx.x] = float(threadIdx.x);
  __syncwarp();
  out[threadIdx.x] = shared[(threadIdx.x + 1) % blockDim.x];
}

/// out[lane] = what the next lower lane wrote, read without a barrier after
/// the warp's first barrier (a single warp: no block barrier at all).
__global__ void lowerLaneAfterWarpBarrier(float *out) {
  float *shared = reinterpret_cast<float *>(dynamicShared());
  __syncwarp();
  shared[threadIdx.x] = float(threadIdx.x);
  out[threadIdx.x] = shared[(threadIdx.x + 31) % 32];
}

/// Lane 5 leaves before the warp's shuffle: a device would hang.
__global__ void shuffleWithoutLane5(int *out) {
  if (threadIdx.x == 5)
    return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, int(threadIdx.x), 1);
}

/// Half of warp 0 waits at __syncthreads, the other half at a warp barrier
/// that needs the first half: a device would hang.
__global__ void crossedBarriers() {
  if (threadIdx.x < 16) {
    __syncthreads();
  } else {
    __syncwarp();
    __syncthreads();
  }
}

__global__ void traps(int *out) {
  if (blockIdx.x == 1 && threadIdx.x == 3)
    __trap();
  out[blockIdx.x * blockDim.x + threadIdx.x] = 1;
}

__global__ void nothing() {}

__global__ void writeAt(float *out, int offset) {
  out[offset + int(threadIdx.x)] = 1.0f;
}

__global__ void addOne(float *x) { x[threadIdx.x] += 1.0f; }

// The fragment layouts of mma.m16n8k16 (bf16) as the PTX ISA's figures
// draw them, written out here independently of WarpMatrix.cpp: g = lane / 4,
// t = lane % 4; register i of A holds (row g + 8 (i % 2), columns
// 2t + 8 (i / 2) and the next), register i of B (k 2t + 8 i and the next,
// n g), accumulator i (row g + 8 (i / 2), column 2t + i % 2).
__device__ uint32_t pack(BF16 lo, BF16 hi) {
  return uint32_t(__bfloat16_as_ushort(lo)) | uint32_t(__bfloat16_as_ushort(hi))
                                                  << 16;
}
/// (m[r][c], m[r][c + 1]) and (m[r][c], m[r + 1][c]) as one register.
__device__ uint32_t rowPair(const BF16 *m, int ld, int r, int c) {
  return pack(m[r * ld + c], m[r * ld + c + 1]);
}
__device__ uint32_t columnPair(const BF16 *m, int ld, int r, int c) {
  return pack(m[r * ld + c], m[(r + 1) * ld + c]);
}

/// One warp. a: 16 x 16 row-major; bnk: 16 x 8 as [n][k] (16 wide), bkn: the
/// same as [k][n] (8 wide, padded to 16). Writes c (16 x 8) = 1 + a b from
/// hand-built fragments, and in `same` per lane whether ldmatrix (loadA,
/// loadBPair both ways) built the same fragments.
__global__ void warpProduct(const BF16 *a, const BF16 *bnk, const BF16 *bkn,
                            float *c, int *same) {
  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  BF16 *tiles = reinterpret_cast<BF16 *>(dynamicShared());
  for (int i = lane; i < 3 * 256; i += 32)
    tiles[i] = i < 256 ? a[i] : i < 512 ? bnk[i - 256] : bkn[i - 512];
  __syncwarp();
  MmaA byHand;
  for (int i = 0; i < 4; ++i)
    byHand.x[i] = rowPair(a, 16, g + 8 * (i % 2), 2 * t + 8 * (i / 2));
  MmaB bHand;
  for (int i = 0; i < 2; ++i)
    bHand.x[i] = rowPair(bnk, 16, g, 2 * t + 8 * i);
  MmaC acc{{1.0f, 1.0f, 1.0f, 1.0f}};
  mma(acc, byHand, bHand);
  for (int i = 0; i < 4; ++i)
    c[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2] = acc.x[i];

  const MmaA loaded = loadA(tiles, 16);
  // Two 8-column B tiles from each layout: columns [0, 8) are b, [8, 16)
  // its copy (the second half of each row of bnk's tile, then of bkn's).
  MmaB fromNK, fromNK2, fromKN, fromKN2;
  loadBPair<false>(fromNK, fromNK2, tiles + 256, 16);
  loadBPair<true>(fromKN, fromKN2, tiles + 512, 16);
  bool ok = true;
  for (int i = 0; i < 4; ++i)
    ok &= loaded.x[i] == byHand.x[i];
  for (int i = 0; i < 2; ++i) {
    ok &= fromNK.x[i] == bHand.x[i];
    ok &= fromNK2.x[i] == rowPair(bnk, 16, g + 8, 2 * t + 8 * i);
    ok &= fromKN.x[i] == columnPair(bkn, 16, 2 * t + 8 * i, g);
    ok &= fromKN2.x[i] == columnPair(bkn, 16, 2 * t + 8 * i, g + 8);
  }
  same[lane] = ok;
}

/// Thread t copies in[2t] (group 1) and in[2t + 1] (group 2) into shared
/// words 2t and 2t + 1 by cp.async, and zeros into 16 bytes further on
/// (group 3); seen[5t..5t+5) is what it reads of them: word 2t before any
/// wait, words 2t and 2t + 1 once only the newest two groups may be in
/// flight, word 2t + 1 and the zeros' first word after every group landed.
__global__ void asyncCopies(const uint32_t *in, uint32_t *seen) {
  uint32_t *words = reinterpret_cast<uint32_t *>(dynamicShared());
  uint32_t *zeros = words + 2 * blockDim.x + 4 * threadIdx.x;
  uint32_t *mine = seen + 5 * threadIdx.x;
  const unsigned t = threadIdx.x;
  copyAsync<4>(words + 2 * t, in + 2 * t, true);
  commitAsyncCopies();
  copyAsync<4>(words + 2 * t + 1, in + 2 * t + 1, true);
  commitAsyncCopies();
  copyAsync<16>(zeros, in, false);
  commitAsyncCopies();
  mine[0] = words[2 * t];
  waitAsyncCopies<2>();
  mine[1] = words[2 * t];
  mine[2] = words[2 * t + 1];
  waitAsyncCopies<0>();
  mine[3] = words[2 * t + 1];
  mine[4] = zeros[0];
}

/// A 16-byte cp.async to a shared address 4 bytes past a 16-byte boundary.
__global__ void misalignedAsyncCopy(const uint32_t *in) {
  copyAsync<16>(dynamicShared() + 4, in, true);
}

/// ldmatrix from a row 8 bytes past a 16-byte boundary.
__global__ void misalignedRows() {
  BF16 *tiles = reinterpret_cast<BF16 *>(dynamicShared());
  (void)loadA(tiles + 4, 16);
}

//===----------------------------------------------------------------------===//
// Tests
//===----------------------------------------------------------------------===//

TEST(CUDAEmulator, BlockReductionsAcrossWarps) {
  const int blocks = 3, threads = 256;
  std::vector<float> in(blocks * threads), out(blocks, -1);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = float(i % 17);
  launchKernel(blockSums, blocks, threads, 0, nullptr, in.data(), out.data());
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  for (int b = 0; b < blocks; ++b) {
    float expected = 0;
    for (int t = 0; t < threads; ++t)
      expected += in[b * threads + t];
    EXPECT_EQ(out[b], expected) << "block " << b;
  }
}

TEST(CUDAEmulator, ShufflesExchangeLanes) {
  std::vector<int> in(64), out(64, -1);
  for (int i = 0; i < 64; ++i)
    in[i] = 100 + i;
  for (int mask : {1, 2, 16}) {
    launchKernel(shuffled, 1, 64, 0, nullptr, in.data(), out.data(), mask);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    for (int i = 0; i < 64; ++i)
      EXPECT_EQ(out[i], 100 + ((i & ~31) | ((i % 32) ^ mask))) << i;
  }
}

TEST(CUDAEmulator, SyncThreadsAnd) {
  std::vector<int> in(96, 1), out(96, -1);
  launchKernel(allNonZero, 1, 96, 0, nullptr, in.data(), out.data());
  EXPECT_EQ(out, std::vector<int>(96, 1));
  in[70] = 0;
  launchKernel(allNonZero, 1, 96, 0, nullptr, in.data(), out.data());
  EXPECT_EQ(out, std::vector<int>(96, 0));
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST(CUDAEmulator, MissingBarrierShowsAsWrongData) {
  const int threads = 64;
  std::vector<float> out(threads);
  launchKernel(neighbours, 1, threads, threads * sizeof(float), nullptr,
               out.data(), true);
  for (int t = 0; t < threads; ++t)
    EXPECT_EQ(out[t], float((t + 1) % threads));
  launchKernel(neighbours, 1, threads, threads * sizeof(float), nullptr,
               out.data(), false);
  int wrong = 0;
  for (int t = 0; t < threads; ++t)
    wrong += out[t] != float((t + 1) % threads);
  EXPECT_GT(wrong, 0) << "reads without a barrier saw every write";
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST(CUDAEmulator, BarriersThatCannotOpenFailTheLaunch) {
  std::vector<int> out(32);
  launchKernel(shuffleWithoutLane5, 1, 32, 0, nullptr, out.data());
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  // Sticky, as on a device, until the device is reset.
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaDeviceReset(), cudaSuccess);
  launchKernel(crossedBarriers, 1, 64, 0, nullptr);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaDeviceReset(), cudaSuccess);
  launchKernel(nothing, 1, 1, 0, nullptr);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST(CUDAEmulator, TrapFailsTheLaunch) {
  std::vector<int> out(4 * 32, 0);
  launchKernel(traps, 4, 32, 0, nullptr, out.data());
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  // Blocks run last to first: 3 and 2 ran, 0 did not.
  EXPECT_EQ(out[3 * 32 + 1], 1);
  EXPECT_EQ(out[0], 0);
  EXPECT_EQ(cudaDeviceReset(), cudaSuccess);
}

TEST(CUDAEmulator, InvalidConfigurations) {
  launchKernel(nothing, 0, 32, 0, nullptr);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  launchKernel(nothing, 1, 2048, 0, nullptr);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  launchKernel(nothing, dim3(1, 70000), 32, 0, nullptr);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  launchKernel(nothing, 1, dim3(32, 32), 0, nullptr); // 1024: the most
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST(CUDAEmulator, DynamicSharedMemoryNeedsTheOptIn) {
  const size_t big = 100 << 10;
  launchKernel(traps, 1, 1, big, nullptr, nullptr);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFuncSetAttribute(reinterpret_cast<const void *>(&nothing),
                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 int(big)),
            cudaSuccess);
  launchKernel(nothing, 1, 1, big, nullptr);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaFuncSetAttribute(reinterpret_cast<const void *>(&nothing),
                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 300 << 10),
            cudaErrorInvalidValue);
}

TEST(CUDAEmulator, AsyncCopiesLandWhenWaitedFor) {
  // What a cp.async destination holds before its group is waited for is
  // undefined on a device; the emulator makes it NaN bytes, so that a read
  // too early shows.
  const int threads = 64;
  std::vector<uint32_t> in(2 * threads), seen(5 * threads, 1);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = uint32_t(1000 + i);
  launchKernel(asyncCopies, 1, threads, threads * 24, nullptr, in.data(),
               seen.data());
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  for (int t = 0; t < threads; ++t) {
    SCOPED_TRACE("thread " + std::to_string(t));
    EXPECT_EQ(seen[5 * t], 0xffffffffu);
    EXPECT_EQ(seen[5 * t + 1], in[2 * t]);
    EXPECT_EQ(seen[5 * t + 2], 0xffffffffu);
    EXPECT_EQ(seen[5 * t + 3], in[2 * t + 1]);
    EXPECT_EQ(seen[5 * t + 4], 0u);
  }
  launchKernel(misalignedAsyncCopy, 1, 32, 64, nullptr, in.data());
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaDeviceReset(), cudaSuccess);
}

TEST(CUDAEmulator, LaneOrderFlipsAtWarpBarriers) {
  // Lanes ran in ascending order up to the barrier; after it they run in
  // descending order, so lane i reads lane i - 1's slot before it is written.
  std::vector<float> out(32);
  launchKernel(lowerLaneAfterWarpBarrier, 1, 32, 32 * sizeof(float), nullptr,
               out.data());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  int stale = 0;
  for (int lane = 1; lane < 32; ++lane)
    stale += out[lane] != float(lane - 1);
  EXPECT_GT(stale, 0) << "every lane saw the lower lane's write";
}

TEST(CUDAEmulator, WarpsRunAheadToBlockBarriers) {
  // Thread 31 reads what thread 32 (the next warp) writes, after a warp
  // barrier only. A warp goes on through its own barriers until a block
  // barrier, so it reads before the other warp wrote.
  const int threads = 64;
  std::vector<float> out(threads);
  launchKernel(neighboursAcrossWarps, 1, threads, threads * sizeof(float),
               nullptr, out.data());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_NE(out[31], 32.0f) << "warp 0 waited for warp 1 without a barrier";
  for (int t = 0; t < threads; ++t)
    if (t != 31 && t != threads - 1) {
      EXPECT_EQ(out[t], float(t + 1)) << "the warp barrier did not order lanes";
    }
}

TEST(CUDAEmulator, WarpMatrixInstructionsFollowThePtxLayouts) {
  // a (16 x 16) and b (16 x 8: k x n), small integers (exact in bf16 and in
  // every f32 sum); b stored as [n][k] and as [k][n], each with a second,
  // different 8-column tile next to it.
  std::vector<BF16> a(256), bnk(256), bkn(256);
  float fa[16][16], fb[16][16];
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      fa[i][j] = float((i * 3 + j * 7) % 9) - 4;
      fb[i][j] = float((i * 5 + j * 3) % 7) - 3; // (k, n), n up to 16
      a[i * 16 + j] = __float2bfloat16_rn(fa[i][j]);
    }
  for (int n = 0; n < 16; ++n)
    for (int k = 0; k < 16; ++k) {
      bnk[n * 16 + k] = __float2bfloat16_rn(fb[k][n]);
      bkn[k * 16 + n] = __float2bfloat16_rn(fb[k][n]);
    }
  std::vector<float> c(128, -1);
  std::vector<int> same(32, 0);
  launchKernel(warpProduct, 1, 32, 3 * 256 * sizeof(BF16), nullptr, a.data(),
               bnk.data(), bkn.data(), c.data(), same.data());
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j) {
      float expected = 1;
      for (int k = 0; k < 16; ++k)
        expected += fa[i][k] * fb[k][j];
      EXPECT_EQ(c[i * 8 + j], expected) << i << "," << j;
    }
  for (int lane = 0; lane < 32; ++lane)
    EXPECT_TRUE(same[lane]) << "lane " << lane;

  launchKernel(misalignedRows, 1, 32, 1024, nullptr);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaDeviceReset(), cudaSuccess);
}

/// Work on a created stream runs when something waits for it; a copy from
/// pageable memory has its source staged when it is enqueued.
TEST(CUDAEmulator, StreamWorkIsDeferredUntilWaitedFor) {
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
            cudaSuccess);
  float *device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, 4 * sizeof(float)), cudaSuccess);
  std::vector<float> source = {1, 2, 3, 4}, back(4, -1);
  ASSERT_EQ(cudaMemcpyAsync(device, source.data(), 4 * sizeof(float),
                            cudaMemcpyHostToDevice, stream),
            cudaSuccess);
  source.assign(4, 9); // after the staging: not what the device gets
  ASSERT_EQ(cudaMemcpyAsync(back.data(), device, 4 * sizeof(float),
                            cudaMemcpyDeviceToHost, stream),
            cudaSuccess);
  EXPECT_EQ(back[0], -1); // nothing ran yet
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(back, std::vector<float>({1, 2, 3, 4}));
  EXPECT_EQ(cudaFree(device), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

/// Work enqueued while a stream captures is recorded, not run; each launch
/// of the instantiated graph runs all of it once, in stream order.
TEST(CUDAEmulator, CapturedGraphsReplayTheirWork) {
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
            cudaSuccess);
  float *device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, 4 * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(device, 0, 4 * sizeof(float), stream), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
            cudaSuccess);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  ASSERT_EQ(cudaStreamIsCapturing(stream, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusActive);
  launchKernel(addOne, 1, 4, 0, stream, device);
  launchKernel(addOne, 1, 4, 0, stream, device);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_NE(graph, nullptr);
  std::vector<float> back(4, -1);
  ASSERT_EQ(cudaMemcpyAsync(back.data(), device, 4 * sizeof(float),
                            cudaMemcpyDeviceToHost, stream),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(back, std::vector<float>(4, 0.0f)); // recorded, not run

  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphDestroy(graph), cudaSuccess); // the instance stays
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(back.data(), device, 4 * sizeof(float),
                            cudaMemcpyDeviceToHost, stream),
            cudaSuccess);
  EXPECT_EQ(back[0], 0.0f); // deferred: the replays have not run yet
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(back, std::vector<float>(4, 4.0f)); // 2 launches x 2 kernels
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaFree(device), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

/// A capture cannot wait for its own stream: the synchronization fails and
/// so does the end of the capture; the legacy stream cannot capture.
TEST(CUDAEmulator, CaptureRefusesSynchronization) {
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
            cudaSuccess);
  EXPECT_EQ(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeThreadLocal),
            cudaErrorStreamCaptureUnsupported);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
            cudaSuccess);
  EXPECT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
            cudaErrorIllegalState);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaErrorStreamCaptureUnsupported);
  cudaGraph_t graph = reinterpret_cast<cudaGraph_t>(&stream);
  EXPECT_EQ(cudaStreamEndCapture(stream, &graph),
            cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(graph, nullptr);
  EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaErrorIllegalState);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess); // not sticky
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

/// An event orders one stream after another; without the wait, the
/// reading stream sees the buffer as it was before the writer's work.
TEST(CUDAEmulator, EventsOrderStreams) {
  cudaStream_t writer, reader;
  cudaEvent_t written;
  ASSERT_EQ(cudaStreamCreateWithFlags(&writer, cudaStreamNonBlocking),
            cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&reader, cudaStreamNonBlocking),
            cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&written, cudaEventDisableTiming),
            cudaSuccess);
  unsigned char *a = nullptr, *b = nullptr;
  ASSERT_EQ(cudaMalloc(&a, 64), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&b, 64), cudaSuccess);
  std::vector<unsigned char> back(64);
  auto readThrough = [&](bool wait) {
    EXPECT_EQ(cudaMemsetAsync(a, 7, 64, writer), cudaSuccess);
    EXPECT_EQ(cudaEventRecord(written, writer), cudaSuccess);
    if (wait) {
      EXPECT_EQ(cudaStreamWaitEvent(reader, written, 0), cudaSuccess);
    }
    EXPECT_EQ(cudaMemcpyAsync(b, a, 64, cudaMemcpyDeviceToDevice, reader),
              cudaSuccess);
    EXPECT_EQ(
        cudaMemcpyAsync(back.data(), b, 64, cudaMemcpyDeviceToHost, reader),
        cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(reader), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(writer), cudaSuccess);
    return back[0];
  };
  EXPECT_EQ(readThrough(false), 0xff); // fresh memory: the race shows
  EXPECT_EQ(readThrough(true), 7);
  EXPECT_EQ(cudaEventSynchronize(written), cudaSuccess);
  cudaEventDestroy(written);
  cudaFree(a);
  cudaFree(b);
  cudaStreamDestroy(reader);
  cudaStreamDestroy(writer);
}

/// Timing events have a time once their stream ran past them.
TEST(CUDAEmulator, EventTimes) {
  cudaStream_t stream;
  cudaEvent_t start, end, untimed;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&end), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming),
            cudaSuccess);
  ASSERT_EQ(cudaEventRecord(start, stream), cudaSuccess);
  launchKernel(nothing, 1, 1, 0, stream);
  ASSERT_EQ(cudaEventRecord(end, stream), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(untimed, stream), cudaSuccess);
  float ms = -1;
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, end), cudaErrorNotReady);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, end), cudaSuccess);
  EXPECT_GE(ms, 0.0f);
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, untimed),
            cudaErrorInvalidResourceHandle);
  for (cudaEvent_t e : {start, end, untimed})
    cudaEventDestroy(e);
  cudaStreamDestroy(stream);
}

/// A kernel that fails on a stream fails the device when it runs: the
/// launch itself reports nothing, the synchronization does.
TEST(CUDAEmulator, DeferredFailuresAreSticky) {
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
            cudaSuccess);
  std::vector<int> out(4 * 32, 0);
  launchKernel(traps, 4, 32, 0, stream, out.data());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(out[0], 0);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaMemsetAsync(nullptr, 0, 0, stream), cudaSuccess);
  EXPECT_EQ(cudaDeviceReset(), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  cudaStreamDestroy(stream);
}

/// Copies name the memory they move between; the device side must lie
/// inside one cudaMalloc block.
TEST(CUDAEmulator, CopiesCheckTheirPointers) {
  unsigned char *device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, 100), cudaSuccess);
  std::vector<unsigned char> host(200, 1);
  EXPECT_EQ(cudaMemcpy(device, host.data(), 100, cudaMemcpyHostToDevice),
            cudaSuccess);
  EXPECT_EQ(
      cudaMemcpy(host.data(), host.data() + 100, 100, cudaMemcpyHostToDevice),
      cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(device, host.data(), 200, cudaMemcpyHostToDevice),
            cudaErrorInvalidValue); // past the block's end
  EXPECT_EQ(cudaMemcpy(device + 50, device, 50, cudaMemcpyDeviceToHost),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemset(device + 99, 0, 2), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(host.data()), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(device), cudaSuccess);
}

/// Device blocks sit between guard pages: a kernel that writes past a
/// block's end (or far enough before its start) stops with a report naming
/// the block and the thread.
TEST(CUDAEmulator, OutOfBoundsAccessesHitGuardPages) {
  float *block = nullptr;
  ASSERT_EQ(cudaMalloc(&block, 256 * sizeof(float)), cudaSuccess);
  launchKernel(writeAt, 1, 256, 0, nullptr, block, 0); // all inside
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_DEATH(launchKernel(writeAt, 1, 32, 0, nullptr, block, 250),
               "out-of-bounds access to device memory: 0 bytes past the end "
               "of the 1024-byte block at .* in block \\(0,0,0\\), thread "
               "\\(6,0,0\\)");
  // The block ends where its pages end, so before its start there is the
  // rest of its first page (3 KiB here) ahead of the guard page.
  EXPECT_DEATH(launchKernel(writeAt, 1, 1, 0, nullptr, block, -769),
               "3076 bytes before the 1024-byte block");
  EXPECT_EQ(cudaFree(block), cudaSuccess);
}

/// A run-time compiled program: NVRTC's calls compile it with the host
/// compiler, the library calls load and launch it.
TEST(CUDAEmulator, RunTimeCompiledPrograms) {
  const char *source = R"(
extern "C" __global__ void __launch_bounds__(64) scaled(const float *in,
                                                        float *out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] = in[i] * 3.0f + normcdff(0.0f);
})";
  nvrtcProgram program;
  ASSERT_EQ(nvrtcCreateProgram(&program, source, "p.cu", 0, nullptr, nullptr),
            NVRTC_SUCCESS);
  ASSERT_EQ(nvrtcCompileProgram(program, 0, nullptr), NVRTC_SUCCESS);
  size_t size = 0;
  ASSERT_EQ(nvrtcGetCUBINSize(program, &size), NVRTC_SUCCESS);
  std::string image(size, '\0');
  ASSERT_EQ(nvrtcGetCUBIN(program, image.data()), NVRTC_SUCCESS);
  nvrtcDestroyProgram(&program);

  cudaLibrary_t library;
  cudaKernel_t kernel;
  ASSERT_EQ(cudaLibraryLoadData(&library, image.data(), nullptr, nullptr, 0,
                                nullptr, nullptr, 0),
            cudaSuccess);
  EXPECT_EQ(cudaLibraryGetKernel(&kernel, library, "missing"),
            cudaErrorSymbolNotFound);
  ASSERT_EQ(cudaLibraryGetKernel(&kernel, library, "scaled"), cudaSuccess);
  std::vector<float> in(100), out(100, -1);
  for (int i = 0; i < 100; ++i)
    in[i] = float(i);
  const float *inArg = in.data();
  float *outArg = out.data();
  int n = 100;
  void *args[] = {&inArg, &outArg, &n};
  ASSERT_EQ(cudaLaunchKernel(reinterpret_cast<const void *>(kernel), dim3(2),
                             dim3(64), args, 0, nullptr),
            cudaSuccess);
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(out[i], float(i) * 3.0f + 0.5f) << i;
}

TEST(CUDAEmulator, ProgramCompileErrorsHaveALog) {
  nvrtcProgram program;
  ASSERT_EQ(nvrtcCreateProgram(&program, "int f() { return undeclared; }",
                               "bad.cu", 0, nullptr, nullptr),
            NVRTC_SUCCESS);
  EXPECT_EQ(nvrtcCompileProgram(program, 0, nullptr), NVRTC_ERROR_COMPILATION);
  size_t size = 0;
  ASSERT_EQ(nvrtcGetProgramLogSize(program, &size), NVRTC_SUCCESS);
  std::string log(size, '\0');
  nvrtcGetProgramLog(program, log.data());
  EXPECT_NE(log.find("undeclared"), std::string::npos) << log;
  nvrtcDestroyProgram(&program);
}

/// The emulated cuBLASLt computes what its documentation says and rejects
/// what it calls invalid.
TEST(CUDAEmulator, CublasLtMatmul) {
  // Column-major A (2 x 3), B (3 x 2): D = A B + bias along D's rows.
  alignas(256) float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {1, 0, 1, 0, 1, 1};
  alignas(256) float d[4] = {}, bias[2] = {10, 20};
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t la, lb, ld, lk;
  ASSERT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
            CUBLAS_STATUS_SUCCESS);
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
  const void *biasPointer = bias;
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                 sizeof epilogue);
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                 &biasPointer, sizeof biasPointer);
  cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, 2, 3, 2);
  cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, 3, 2, 3);
  cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, 2, 2, 2);
  cublasLtMatrixLayoutCreate(&lk, CUDA_R_32F, 2, 2, 2); // k = 2: no chain
  const float one = 1, zero = 0;
  ASSERT_EQ(cublasLtMatmul(nullptr, desc, &one, a, la, b, lb, &zero, d, ld, d,
                           ld, nullptr, nullptr, 0, nullptr),
            CUBLAS_STATUS_SUCCESS);
  // D(0, 0) = 1*1 + 3*0 + 5*1 + 10, D(1, 0) = 2 + 6 + 20, D(0, 1) = 3 + 5
  // + 10, D(1, 1) = 4 + 6 + 20.
  EXPECT_EQ(std::vector<float>(d, d + 4), (std::vector<float>{16, 28, 18, 30}));
  EXPECT_EQ(cublasLtMatmul(nullptr, desc, &one, a, la, a, lk, &zero, d, ld, d,
                           ld, nullptr, nullptr, 0, nullptr),
            CUBLAS_STATUS_INVALID_VALUE);
  // An algorithm chosen for 16-byte operands refuses a 4-byte aligned one.
  cublasLtMatmulPreference_t preference;
  cublasLtMatmulPreferenceCreate(&preference);
  uint32_t alignment = 16;
  cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &alignment,
      sizeof alignment);
  cublasLtMatmulHeuristicResult_t result;
  int count = 0;
  ASSERT_EQ(cublasLtMatmulAlgoGetHeuristic(nullptr, desc, la, lb, ld, ld,
                                           preference, 1, &result, &count),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(count, 1);
  EXPECT_EQ(cublasLtMatmul(nullptr, desc, &one, a, la, b, lb, &zero, d + 1, ld,
                           d + 1, ld, &result.algo, nullptr, 0, nullptr),
            CUBLAS_STATUS_INVALID_VALUE);
  // The GELU input's leading dimension must be a multiple of 8.
  epilogue = CUBLASLT_EPILOGUE_GELU_AUX;
  int64_t auxLd = 2;
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                 sizeof epilogue);
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
                                 &auxLd, sizeof auxLd);
  EXPECT_EQ(cublasLtMatmulAlgoGetHeuristic(nullptr, desc, la, lb, ld, ld,
                                           preference, 1, &result, &count),
            CUBLAS_STATUS_NOT_SUPPORTED);
  cublasLtMatmulPreferenceDestroy(preference);
  for (cublasLtMatrixLayout_t l : {la, lb, ld, lk})
    cublasLtMatrixLayoutDestroy(l);
  cublasLtMatmulDescDestroy(desc);
}

} // namespace

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
