//===- attention_bench.cpp - Loom's attention kernels, timed and checked --===//
//
//   loom-bench-attention [--batch 8] [--heads 12] [--seq 1024] [--dim 64]
//                        [--iters 20] [--warmup 3] [--check-heads 2]
//
// Times the CUDA backend's `attention` and `attention_backward` kernels on
// the operands GPT-2's plan gives them: bf16 q, k and v packed in one
// [B, S, 3, H, D] tensor (seq_major=1, packed_qkv=1) and a causal mask
// [1, 1, S, S]. Prints the mean time of each over ITERS launches and the
// rate in TFLOP/s, counting what a causal attention computes (half of the
// dense 4 B H S^2 D forward and 10 B H S^2 D backward FLOPs, the convention
// of FlashAttention's benchmarks). bench.py prints these next to PyTorch's
// scaled_dot_product_attention on the same GPU.
//
// Before timing, out, lse, dq, dk and dv of CHECK_HEADS (batch, head)
// pairs are compared with a double-precision reference computed here from
// the same bf16 inputs, so that a broken kernel cannot give a fast, wrong
// figure: a mismatch exits 1.
//
//===----------------------------------------------------------------------===//

#include "CPU/BFloat16.h"
#include "CUDA/CUDAKernels.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

using namespace loomrt;
using namespace loomrt::cuda;

namespace {

struct Options {
  int64_t batch = 8, heads = 12, seq = 1024, dim = 64;
  int iters = 20, warmup = 3, checkHeads = 2;
};

[[noreturn]] void fail(const std::string &message) {
  std::fprintf(stderr, "loom-bench-attention: %s\n", message.c_str());
  std::exit(1);
}

void check(cudaError_t error, const char *what) {
  if (error != cudaSuccess)
    fail(std::string(what) + ": " + cudaGetErrorString(error));
}

void check(const Status &status, const char *what) {
  if (!status)
    fail(std::string(what) + ": " + status.message());
}

Options parse(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (i + 1 >= argc)
      fail("missing value after " + arg);
    const long long value = std::atoll(argv[++i]);
    if (value < (arg == "--warmup" ? 0 : 1))
      fail(arg + " takes a " +
           (arg == "--warmup" ? "non-negative" : "positive") + " number");
    if (arg == "--batch")
      o.batch = value;
    else if (arg == "--heads")
      o.heads = value;
    else if (arg == "--seq")
      o.seq = value;
    else if (arg == "--dim")
      o.dim = value;
    else if (arg == "--iters")
      o.iters = int(value);
    else if (arg == "--warmup")
      o.warmup = int(value);
    else if (arg == "--check-heads")
      o.checkHeads = int(value);
    else
      fail("unknown option " + arg);
  }
  return o;
}

TensorRef ref(DType dtype, std::vector<int64_t> shape) {
  TensorRef r;
  r.dtype = dtype;
  r.shape = std::move(shape);
  return r;
}

/// A device buffer of `bytes`, freed at exit.
void *deviceBuffer(size_t bytes) {
  void *p = nullptr;
  check(cudaMalloc(&p, bytes), "cudaMalloc");
  return p;
}

/// Random bf16 values in [-2, 2) (a fixed LCG: runs are repeatable).
std::vector<uint16_t> randomBF16(size_t count, uint64_t seed) {
  std::vector<uint16_t> values(count);
  for (uint16_t &v : values) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    const double x = double(seed >> 11) / double(1ull << 53) * 4.0 - 2.0;
    v = cpu::roundToBF16(float(x));
  }
  return values;
}

double widen(uint16_t v) { return double(cpu::widenBF16(v)); }

/// The element of q (part 0), k (1) or v (2) at (b, s, h, c) of the packed
/// [B, S, 3, H, D] tensor, and of a [B, S, H, D] one.
size_t packedAt(const Options &o, int64_t b, int64_t s, int part, int64_t h,
                int64_t c) {
  return size_t((((b * o.seq + s) * 3 + part) * o.heads + h) * o.dim + c);
}
size_t rowAt(const Options &o, int64_t b, int64_t s, int64_t h, int64_t c) {
  return size_t(((b * o.seq + s) * o.heads + h) * o.dim + c);
}

/// The largest |got - expected| over the largest |expected| (at least 1).
struct Error {
  double worst = 0, scale = 1;
  void add(double got, double expected) {
    worst =
        std::max(worst, std::isnan(got) ? INFINITY : std::abs(got - expected));
    scale = std::max(scale, std::abs(expected));
  }
  double relative() const { return worst / scale; }
};

/// Compares head h of batch b with a double-precision causal attention and
/// its gradient from the same inputs; adds to the forward's and backward's
/// errors.
void checkHead(const Options &o, int64_t b, int64_t h, double scale,
               const std::vector<uint16_t> &qkv,
               const std::vector<uint16_t> &dout,
               const std::vector<uint16_t> &out, const std::vector<float> &lse,
               const std::vector<uint16_t> &dqkv, Error &forward,
               Error &backward) {
  const int64_t S = o.seq, D = o.dim;
  auto q = [&](int64_t i, int64_t c) {
    return widen(qkv[packedAt(o, b, i, 0, h, c)]);
  };
  auto k = [&](int64_t j, int64_t c) {
    return widen(qkv[packedAt(o, b, j, 1, h, c)]);
  };
  auto v = [&](int64_t j, int64_t c) {
    return widen(qkv[packedAt(o, b, j, 2, h, c)]);
  };
  auto g = [&](int64_t i, int64_t c) {
    return widen(dout[rowAt(o, b, i, h, c)]);
  };
  // p (row by row), lse, out and delta = dout . out.
  std::vector<double> p(size_t(S * S), 0.0), delta(size_t(S), 0.0);
  for (int64_t i = 0; i < S; ++i) {
    double max = -INFINITY;
    for (int64_t j = 0; j <= i; ++j) {
      double s = 0;
      for (int64_t c = 0; c < D; ++c)
        s += q(i, c) * k(j, c);
      p[size_t(i * S + j)] = s * scale;
      max = std::max(max, s * scale);
    }
    double sum = 0;
    for (int64_t j = 0; j <= i; ++j)
      sum += std::exp(p[size_t(i * S + j)] - max);
    for (int64_t j = 0; j <= i; ++j)
      p[size_t(i * S + j)] = std::exp(p[size_t(i * S + j)] - max) / sum;
    forward.add(lse[size_t((b * S + i) * o.heads + h)], max + std::log(sum));
    double dot = 0;
    for (int64_t c = 0; c < D; ++c) {
      double o_ = 0;
      for (int64_t j = 0; j <= i; ++j)
        o_ += p[size_t(i * S + j)] * v(j, c);
      forward.add(widen(out[rowAt(o, b, i, h, c)]), o_);
      dot += g(i, c) * o_;
    }
    delta[size_t(i)] = dot;
  }
  // ds = p (dout . v - delta); dq = scale ds k, dk = scale ds^T q,
  // dv = p^T dout.
  std::vector<double> ds(size_t(S * S), 0.0);
  for (int64_t i = 0; i < S; ++i)
    for (int64_t j = 0; j <= i; ++j) {
      double dp = 0;
      for (int64_t c = 0; c < D; ++c)
        dp += g(i, c) * v(j, c);
      ds[size_t(i * S + j)] = p[size_t(i * S + j)] * (dp - delta[size_t(i)]);
    }
  for (int64_t r = 0; r < S; ++r)
    for (int64_t c = 0; c < D; ++c) {
      double dq = 0, dk = 0, dv = 0;
      for (int64_t j = 0; j <= r; ++j)
        dq += ds[size_t(r * S + j)] * k(j, c);
      for (int64_t i = r; i < S; ++i) {
        dk += ds[size_t(i * S + r)] * q(i, c);
        dv += p[size_t(i * S + r)] * g(i, c);
      }
      backward.add(widen(dqkv[packedAt(o, b, r, 0, h, c)]), scale * dq);
      backward.add(widen(dqkv[packedAt(o, b, r, 1, h, c)]), scale * dk);
      backward.add(widen(dqkv[packedAt(o, b, r, 2, h, c)]), dv);
    }
}

/// The mean time (ms) of `iters` launches of `kernel` after `warmup` ones.
float timeLaunches(CUDAKernel &kernel, const LaunchContext &context,
                   const void *const *inputs, void *const *outputs, int warmup,
                   int iters, const char *what) {
  for (int i = 0; i < warmup; ++i)
    check(kernel.launch(context, inputs, outputs), what);
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  check(cudaEventRecord(start, context.stream), "cudaEventRecord");
  for (int i = 0; i < iters; ++i)
    check(kernel.launch(context, inputs, outputs), what);
  check(cudaEventRecord(stop, context.stream), "cudaEventRecord");
  check(cudaEventSynchronize(stop), what);
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / float(iters);
}

} // namespace

int main(int argc, char **argv) {
  const Options o = parse(argc, argv);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIPPED: no CUDA device\n");
    return 77;
  }
  cudaDeviceProp properties;
  check(cudaGetDeviceProperties(&properties, 0), "cudaGetDeviceProperties");
  LaunchContext context;
  check(cudaStreamCreate(&context.stream), "cudaStreamCreate");
  context.computeCapability = properties.major * 10 + properties.minor;
  context.multiprocessors = properties.multiProcessorCount;
  context.workspaceBytes = size_t(32) << 20; // delta: B H S floats
  context.workspace = deviceBuffer(context.workspaceBytes);
  context.error = static_cast<DeviceError *>(deviceBuffer(sizeof(DeviceError)));
  check(cudaMemset(context.error, 0, sizeof(DeviceError)), "cudaMemset");

  const int64_t B = o.batch, S = o.seq, H = o.heads, D = o.dim;
  const double scale = 1.0 / std::sqrt(double(D));
  Attributes attrs{
      {"scale", scale}, {"seq_major", int64_t(1)}, {"packed_qkv", int64_t(1)}};
  const std::vector<int64_t> packed{B, S, 3, H, D}, rows{B, S, H, D},
      mask{1, 1, S, S}, stats{B, S, H};
  Instruction forward;
  forward.kernel = "attention";
  forward.inputs = {ref(DType::BF16, packed), ref(DType::I1, mask)};
  forward.outputs = {ref(DType::BF16, rows), ref(DType::F32, stats)};
  forward.attrs = attrs;
  Instruction backward;
  backward.kernel = "attention_backward";
  backward.inputs = {ref(DType::BF16, packed), ref(DType::BF16, rows),
                     ref(DType::F32, stats), ref(DType::BF16, rows),
                     ref(DType::I1, mask)};
  backward.outputs = {ref(DType::BF16, packed)};
  backward.attrs = attrs;
  auto forwardKernel = createCUDAKernel(context, forward);
  check(forwardKernel.status(), "attention");
  auto backwardKernel = createCUDAKernel(context, backward);
  check(backwardKernel.status(), "attention_backward");

  const size_t packedCount = size_t(B * S * 3 * H * D),
               rowCount = size_t(B * S * H * D), statCount = size_t(B * S * H);
  const std::vector<uint16_t> qkv = randomBF16(packedCount, 1),
                              dout = randomBF16(rowCount, 2);
  std::vector<uint8_t> causal(size_t(S * S));
  for (int64_t i = 0; i < S; ++i)
    for (int64_t j = 0; j < S; ++j)
      causal[size_t(i * S + j)] = j > i;
  void *dQkv = deviceBuffer(packedCount * 2),
       *dMask = deviceBuffer(causal.size()), *dOut = deviceBuffer(rowCount * 2),
       *dLse = deviceBuffer(statCount * 4), *dDout = deviceBuffer(rowCount * 2),
       *dGrad = deviceBuffer(packedCount * 2);
  check(cudaMemcpy(dQkv, qkv.data(), packedCount * 2, cudaMemcpyHostToDevice),
        "cudaMemcpy");
  check(cudaMemcpy(dDout, dout.data(), rowCount * 2, cudaMemcpyHostToDevice),
        "cudaMemcpy");
  check(cudaMemcpy(dMask, causal.data(), causal.size(), cudaMemcpyHostToDevice),
        "cudaMemcpy");
  const void *forwardIn[] = {dQkv, dMask};
  void *forwardOut[] = {dOut, dLse};
  const void *backwardIn[] = {dQkv, dDout, dLse, dOut, dMask};
  void *backwardOut[] = {dGrad};

  check(forwardKernel.value()->launch(context, forwardIn, forwardOut),
        "attention");
  check(backwardKernel.value()->launch(context, backwardIn, backwardOut),
        "attention_backward");
  check(cudaStreamSynchronize(context.stream), "the first launches");
  std::vector<uint16_t> out(rowCount), dqkv(packedCount);
  std::vector<float> lse(statCount);
  check(cudaMemcpy(out.data(), dOut, rowCount * 2, cudaMemcpyDeviceToHost),
        "cudaMemcpy");
  check(cudaMemcpy(lse.data(), dLse, statCount * 4, cudaMemcpyDeviceToHost),
        "cudaMemcpy");
  check(cudaMemcpy(dqkv.data(), dGrad, packedCount * 2, cudaMemcpyDeviceToHost),
        "cudaMemcpy");

  std::printf("loom-bench-attention: B %lld, H %lld, S %lld, D %lld, causal, "
              "bf16 (seq-major, q/k/v packed), %s\n",
              (long long)B, (long long)H, (long long)S, (long long)D,
              properties.name);
  Error forwardError, backwardError;
  const int64_t heads = std::min<int64_t>(o.checkHeads, B * H);
  for (int64_t n = 0; n < heads; ++n) {
    // Spread over the batch and the heads: first, last, in between.
    const int64_t flat = heads == 1 ? 0 : n * (B * H - 1) / (heads - 1);
    checkHead(o, flat / H, flat % H, scale, qkv, dout, out, lse, dqkv,
              forwardError, backwardError);
  }
  // bf16 results: a few bf16 ulps of the largest value.
  const double tolerance = 2e-2;
  const bool ok = forwardError.relative() <= tolerance &&
                  backwardError.relative() <= tolerance;
  std::printf("check: %lld heads against a double-precision reference: "
              "forward error %.2e, backward error %.2e (of the largest "
              "value; tolerance %.0e): %s\n",
              (long long)heads, forwardError.relative(),
              backwardError.relative(), tolerance, ok ? "ok" : "WRONG");
  if (!ok)
    return 1;

  const double causalForward = 4.0 * B * H * S * S * D / 2,
               causalBackward = 10.0 * B * H * S * S * D / 2;
  const float forwardMs =
      timeLaunches(*forwardKernel.value(), context, forwardIn, forwardOut,
                   o.warmup, o.iters, "attention");
  const float backwardMs =
      timeLaunches(*backwardKernel.value(), context, backwardIn, backwardOut,
                   o.warmup, o.iters, "attention_backward");
  std::printf("forward  %.4f ms  %.1f TFLOP/s\n", forwardMs,
              causalForward / (forwardMs * 1e-3) / 1e12);
  std::printf("backward %.4f ms  %.1f TFLOP/s\n", backwardMs,
              causalBackward / (backwardMs * 1e-3) / 1e12);
  return 0;
}
