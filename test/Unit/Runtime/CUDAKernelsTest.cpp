//===- CUDAKernelsTest.cpp - The CUDA backend's kernels against the CPU's -===//
//
// Every kernel kind runs on random inputs through createCUDAKernel / launch
// on a device and through the CPU kernel, and the outputs are compared:
// bit for bit for data movement and dropout (and integer math), within a
// relative tolerance for floating-point math (the two backends sum in
// different orders and use different transcendental functions), within
// bf16's precision for bf16. Out-of-range indices must be recorded in the
// DeviceError with the instruction, index, position and bound.
//
// Without a CUDA device the program prints "SKIPPED: no CUDA device" and
// exits 77, which ctest reports as skipped. The same tests also build
// against the host emulator (cuda-kernels-emulated), which runs the
// nvcc-compiled kernels on any machine.
//
//===----------------------------------------------------------------------===//

#include "CUDA/CUDAKernels.h"
#include "CUDA/Kernels/Elementwise.h"
#include "TestTensors.h"
#include "loom/Runtime/Kernels.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <random>

using namespace loomrt;
using namespace loomrt::cuda;
using namespace loomrt::test;

namespace {

//===----------------------------------------------------------------------===//
// The device
//===----------------------------------------------------------------------===//

struct Device {
  cudaStream_t stream = nullptr;
  cublasLtHandle_t lt = nullptr;
  void *workspace = nullptr;
  size_t workspaceBytes = size_t(32) << 20;
  DeviceError *error = nullptr;
  int computeCapability = 0;
  int multiprocessors = 0;
};

Device &device() {
  static Device d;
  return d;
}

/// The instruction index the tests launch with (checked in DeviceError).
constexpr int32_t kInstruction = 7;

LaunchContext launchContext(bool allowTF32 = false) {
  LaunchContext context;
  context.stream = device().stream;
  context.lt = device().lt;
  context.workspace = device().workspace;
  context.workspaceBytes = device().workspaceBytes;
  context.error = device().error;
  context.instruction = kInstruction;
  context.allowTF32 = allowTF32;
  context.computeCapability = device().computeCapability;
  context.multiprocessors = device().multiprocessors;
  return context;
}

//===----------------------------------------------------------------------===//
// Tensors
//===----------------------------------------------------------------------===//

std::mt19937 &rng() {
  static std::mt19937 generator(20240611);
  return generator;
}

/// Random values in [lo, hi) (integers for integer dtypes, 0/1 for i1).
Tensor random(DType dtype, std::vector<int64_t> shape, double lo = -2,
              double hi = 2) {
  return randomTensor(rng(), dtype, std::move(shape), lo, hi);
}

/// Random bytes: any dtype, for the data movement kernels.
Tensor randomBytes(DType dtype, std::vector<int64_t> shape) {
  Tensor t(dtype, std::move(shape));
  for (uint8_t &b : t.bytes)
    b = uint8_t(rng()());
  if (dtype == DType::I1)
    for (uint8_t &b : t.bytes)
      b &= 1;
  return t;
}

Tensor filled(DType dtype, std::vector<int64_t> shape,
              const std::vector<double> &values) {
  Tensor t(dtype, std::move(shape));
  for (int64_t i = 0; i < t.size(); ++i)
    t.set(i, values[size_t(i)]);
  return t;
}

Instruction makeInstruction(const std::string &kernel,
                            const std::vector<const Tensor *> &inputs,
                            const std::vector<TensorRef> &outputs,
                            Attributes attrs = {}) {
  Instruction instruction;
  instruction.kernel = kernel;
  for (const Tensor *t : inputs)
    instruction.inputs.push_back(t->ref());
  instruction.outputs = outputs;
  instruction.attrs = std::move(attrs);
  return instruction;
}

TensorRef ref(DType dtype, std::vector<int64_t> shape) {
  TensorRef r;
  r.dtype = dtype;
  r.shape = std::move(shape);
  return r;
}

//===----------------------------------------------------------------------===//
// Running on both backends
//===----------------------------------------------------------------------===//

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

/// Runs on the CPU; returns the runtime error (empty when none).
std::string runCPU(const Instruction &instruction,
                   const std::vector<const Tensor *> &inputs,
                   std::vector<Tensor> &outputs) {
  const KernelInfo *kernel = lookupCPUKernel(instruction.kernel);
  outputs.clear();
  for (const TensorRef &r : instruction.outputs)
    outputs.emplace_back(r);
  Status status = kernel->check(instruction);
  EXPECT_TRUE(status.isOk()) << status.message();
  if (!status)
    return status.message();
  std::vector<const void *> in;
  for (const Tensor *t : inputs)
    in.push_back(t->bytes.data());
  std::vector<void *> out;
  for (Tensor &t : outputs)
    out.push_back(t.bytes.data());
  std::string error;
  KernelArgs args{instruction, in.data(), out.data(), &error};
  kernel->run(args);
  return error;
}

/// Runs on the device: copies the inputs in, launches, copies the outputs
/// and the DeviceError back. Outputs start as 0xff bytes, so that elements
/// a kernel fails to write show. With `inPlace`, output 0 is written into
/// input 0's buffer. With `misalignBF16`, every bf16 operand starts 2 bytes
/// past a cudaMalloc'ed address (as an arena may place it), so that kernels
/// must not assume 16-byte alignment.
void runGPU(const Instruction &instruction,
            const std::vector<const Tensor *> &inputs,
            std::vector<Tensor> &outputs, DeviceError &error,
            bool allowTF32 = false, bool inPlace = false,
            bool misalignBF16 = false) {
  outputs.clear();
  for (const TensorRef &r : instruction.outputs)
    outputs.emplace_back(r);
  LaunchContext context = launchContext(allowTF32);
  auto created = createCUDAKernel(context, instruction);
  ASSERT_TRUE(created.isOk()) << created.status().message();
  std::vector<void *> in, out, allocations;
  for (const Tensor *t : inputs) {
    size_t shift = misalignBF16 && t->dtype == DType::BF16 ? 2 : 0;
    void *p = nullptr;
    CUDA_OK(cudaMalloc(&p, t->bytes.size() + shift + 1));
    allocations.push_back(p);
    uint8_t *data = static_cast<uint8_t *>(p) + shift;
    CUDA_OK(cudaMemcpy(data, t->bytes.data(), t->bytes.size(),
                       cudaMemcpyHostToDevice));
    in.push_back(data);
  }
  for (size_t o = 0; o < outputs.size(); ++o) {
    if (inPlace && o == 0) {
      out.push_back(in[0]);
      continue;
    }
    size_t shift = misalignBF16 && outputs[o].dtype == DType::BF16 ? 2 : 0;
    void *p = nullptr;
    CUDA_OK(cudaMalloc(&p, outputs[o].bytes.size() + shift + 1));
    allocations.push_back(p);
    uint8_t *data = static_cast<uint8_t *>(p) + shift;
    CUDA_OK(cudaMemset(data, 0xff, outputs[o].bytes.size()));
    out.push_back(data);
  }
  CUDA_OK(cudaMemset(device().error, 0, sizeof(DeviceError)));
  Status launched = created.value()->launch(context, in.data(), out.data());
  EXPECT_TRUE(launched.isOk()) << launched.message();
  CUDA_OK(cudaStreamSynchronize(device().stream));
  for (size_t o = 0; o < outputs.size(); ++o)
    CUDA_OK(cudaMemcpy(outputs[o].bytes.data(), out[o], outputs[o].bytes.size(),
                       cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(&error, device().error, sizeof(DeviceError),
                     cudaMemcpyDeviceToHost));
  for (void *p : allocations)
    CUDA_OK(cudaFree(p));
}

/// Compares element by element with |a - e| <= atol + rtol * |e| (exactly,
/// byte for byte, when both are 0); NaNs must match.
void expectClose(const Tensor &actual, const Tensor &expected, double rtol,
                 double atol, const std::string &what) {
  ASSERT_EQ(actual.shape, expected.shape) << what;
  if (rtol == 0 && atol == 0 && actual.dtype == expected.dtype) {
    for (size_t i = 0; i < actual.bytes.size(); ++i)
      if (actual.bytes[i] != expected.bytes[i]) {
        size_t element = i / dtypeSize(actual.dtype);
        ADD_FAILURE() << what << ": element " << element << " differs: got "
                      << actual.get(int64_t(element)) << ", expected "
                      << expected.get(int64_t(element));
        return;
      }
    return;
  }
  int failures = 0;
  for (int64_t i = 0; i < actual.size() && failures < 10; ++i) {
    double a = actual.get(i), e = expected.get(i);
    bool ok = std::isnan(e)   ? std::isnan(a)
              : std::isinf(e) ? a == e
                              : std::abs(a - e) <= atol + rtol * std::abs(e);
    if (!ok) {
      ++failures;
      ADD_FAILURE() << what << ": element " << i << ": got " << a
                    << ", expected " << e;
    }
  }
}

/// Default tolerances by dtype: exact for integers and i1.
void tolerances(DType dtype, double &rtol, double &atol) {
  switch (dtype) {
  case DType::F32:
    rtol = 1e-5;
    atol = 1e-6;
    return;
  case DType::F64:
    rtol = 1e-12;
    atol = 1e-13;
    return;
  case DType::BF16:
    rtol = 2e-2;
    atol = 1e-2;
    return;
  default:
    rtol = atol = 0;
  }
}

/// Runs on both backends (bf16 inputs placed 2 bytes off alignment on the
/// device with `misalignBF16`); neither may fail.
void runBoth(const Instruction &instruction,
             const std::vector<const Tensor *> &inputs,
             std::vector<Tensor> &cpu, std::vector<Tensor> &gpu,
             bool misalignBF16 = false) {
  EXPECT_EQ(runCPU(instruction, inputs, cpu), "");
  DeviceError error{};
  runGPU(instruction, inputs, gpu, error, false, false, misalignBF16);
  EXPECT_EQ(error.code, DeviceError::None);
}

/// Tolerances of GEMM results: the dtype's, and for f32 sums of k products
/// in another order than the CPU's (f64 for its bias gradients) 1e-4.
void matmulTolerances(DType dtype, double &rtol, double &atol) {
  tolerances(dtype, rtol, atol);
  if (dtype == DType::F32)
    rtol = atol = 1e-4;
}

/// Runs on both backends and compares every output; `rtol`/`atol` < 0 use
/// the output dtype's defaults.
void expectSame(const Instruction &instruction,
                const std::vector<const Tensor *> &inputs, double rtol = -1,
                double atol = -1, bool allowTF32 = false) {
  SCOPED_TRACE(instruction.kernel);
  std::vector<Tensor> cpu, gpu;
  std::string cpuError = runCPU(instruction, inputs, cpu);
  ASSERT_EQ(cpuError, "");
  DeviceError error{};
  runGPU(instruction, inputs, gpu, error, allowTF32);
  EXPECT_EQ(error.code, DeviceError::None);
  for (size_t o = 0; o < cpu.size(); ++o) {
    double r = rtol, a = atol;
    if (r < 0)
      tolerances(cpu[o].dtype, r, a);
    expectClose(gpu[o], cpu[o], r, a, "output " + std::to_string(o));
  }
}

//===----------------------------------------------------------------------===//
// matmul
//===----------------------------------------------------------------------===//

/// C[batch..., m, n] = A[batchA..., m, k] B[batchB..., k, n], the operands
/// stored transposed where asked; C's batch dims are the longer of the two.
void testMatmul(DType dtype, std::vector<int64_t> batchA,
                std::vector<int64_t> batchB, int64_t m, int64_t k, int64_t n,
                bool transA, bool transB, bool allowTF32 = false) {
  std::vector<int64_t> a = batchA, b = batchB;
  a.push_back(transA ? k : m);
  a.push_back(transA ? m : k);
  b.push_back(transB ? n : k);
  b.push_back(transB ? k : n);
  std::vector<int64_t> c = batchA.size() >= batchB.size() ? batchA : batchB;
  c.push_back(m);
  c.push_back(n);
  SCOPED_TRACE(shapeString(a) + " x " + shapeString(b) +
               (transA ? " transA" : "") + (transB ? " transB" : ""));
  Tensor x = random(dtype, a), y = random(dtype, b);
  Attributes attrs{{"transpose_lhs", int64_t(transA)},
                   {"transpose_rhs", int64_t(transB)}};
  Instruction inst =
      makeInstruction("matmul", {&x, &y}, {ref(dtype, c)}, attrs);
  double tol = dtype == DType::F64 ? 1e-11 : 1e-4, atol = tol;
  if (allowTF32) {
    // TF32 keeps 10 of the operands' mantissa bits: each product of values
    // in [-2, 2) is off by up to 4 * 2^-10, and k of them with random signs
    // add up to about sqrt(k) times that (0.04 for k = 128).
    tol = 5e-3;
    atol = 4.0 * std::ldexp(1.0, -10) * std::sqrt(double(k));
  }
  expectSame(inst, {&x, &y}, tol, atol, allowTF32);
}

TEST(CUDAKernels, MatmulBatching) {
  using Dims = std::vector<int64_t>;
  for (DType dtype : {DType::F32, DType::F64}) {
    SCOPED_TRACE(dtypeName(dtype));
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        testMatmul(dtype, {}, {}, 7, 5, 9, ta, tb); // one GEMM
        // B shared: folded into M unless A is transposed.
        testMatmul(dtype, Dims{2, 3}, {}, 4, 5, 6, ta, tb);
        testMatmul(dtype, Dims{3}, Dims{3}, 4, 5, 6, ta, tb); // equal
        testMatmul(dtype, {}, Dims{2, 3}, 4, 5, 6, ta, tb);   // A shared
        // A proper suffix: one strided-batched call per outer batch.
        testMatmul(dtype, Dims{2, 3}, Dims{3}, 4, 5, 6, ta, tb);
        testMatmul(dtype, Dims{3}, Dims{2, 3}, 4, 5, 6, ta, tb);
      }
    // Batches that leave operands misaligned for 16-byte algorithms.
    testMatmul(dtype, Dims{2, 3}, Dims{3}, 3, 5, 7, false, false);
    testMatmul(dtype, {}, {}, 65, 129, 33, false, true);
  }
}

TEST(CUDAKernels, MatmulTF32AndEmpty) {
  testMatmul(DType::F32, {}, {}, 64, 128, 32, false, false, true);
  // k = 0: zeros.
  testMatmul(DType::F32, {}, {}, 3, 0, 4, false, false);
  // An empty batch: nothing to do.
  testMatmul(DType::F32, {0}, {}, 3, 4, 5, false, false);
}

TEST(CUDAKernels, MatmulBF16) {
  Tensor x = random(DType::BF16, {2, 16, 32});
  Tensor y = random(DType::BF16, {32, 24});
  Instruction inst =
      makeInstruction("matmul", {&x, &y}, {ref(DType::BF16, {2, 16, 24})});
  if (!lookupCPUKernel("matmul")->check(inst))
    GTEST_SKIP() << "the CPU matmul does not take bf16 yet";
  // Reference: the f32 product of the same (bf16) values.
  Tensor x32 = x.as(DType::F32), y32 = y.as(DType::F32);
  Instruction reference =
      makeInstruction("matmul", {&x32, &y32}, {ref(DType::F32, {2, 16, 24})});
  std::vector<Tensor> cpu, gpu;
  ASSERT_EQ(runCPU(reference, {&x32, &y32}, cpu), "");
  DeviceError error{};
  runGPU(inst, {&x, &y}, gpu, error);
  expectClose(gpu[0].as(DType::F32), cpu[0], 1e-2, 2e-2, "bf16 matmul");
}

/// A matmul with an epilogue (bias, activation, preactivation output) on
/// both backends: cuBLASLt's epilogues for single f32/bf16 GEMMs, the own
/// epilogue kernel for the rest.
void testMatmulEpilogue(DType dtype, std::vector<int64_t> batchA,
                        std::vector<int64_t> batchB, int64_t m, int64_t k,
                        int64_t n, bool bias, const std::string &activation,
                        bool keepPre, bool nanInBias = false) {
  std::vector<int64_t> a = batchA, b = batchB;
  a.insert(a.end(), {m, k});
  b.insert(b.end(), {n, k}); // the weight stored transposed, as PyTorch's
  std::vector<int64_t> c = batchA.size() >= batchB.size() ? batchA : batchB;
  c.insert(c.end(), {m, n});
  SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + shapeString(a) + " x " +
               shapeString(b) + (bias ? " bias" : "") + " " + activation +
               (keepPre ? " preactivation" : ""));
  Tensor x = random(dtype, a), y = random(dtype, b), z = random(dtype, {n});
  if (nanInBias) // a NaN column: every activation must keep it
    z.set(n / 2, std::numeric_limits<double>::quiet_NaN());
  std::vector<const Tensor *> inputs{&x, &y};
  if (bias)
    inputs.push_back(&z);
  std::vector<TensorRef> outputs{ref(dtype, c)};
  if (keepPre)
    outputs.push_back(ref(dtype, c));
  Attributes attrs{{"transpose_rhs", int64_t(1)}};
  if (!activation.empty())
    attrs["activation"] = activation;
  Instruction inst = makeInstruction("matmul", inputs, outputs, attrs);
  double tol = dtype == DType::F64 ? 1e-11 : -1;
  if (dtype == DType::F32)
    tol = 1e-4;
  expectSame(inst, inputs, tol, tol);
}

TEST(CUDAKernels, MatmulEpilogues) {
  using Dims = std::vector<int64_t>;
  for (DType dtype : {DType::F32, DType::BF16, DType::F64}) {
    // A linear layer (one GEMM): cuBLASLt's BIAS, GELU_BIAS, GELU_AUX_BIAS,
    // GELU; a ReLU (with or without its input kept) runs in the own kernel
    // after cuBLASLt's BIAS.
    testMatmulEpilogue(dtype, Dims{2, 3}, {}, 16, 32, 64, true, "", false);
    testMatmulEpilogue(dtype, Dims{2, 3}, {}, 16, 32, 64, true, "relu", false);
    testMatmulEpilogue(dtype, Dims{2, 3}, {}, 16, 32, 64, true, "gelu_tanh",
                       false);
    testMatmulEpilogue(dtype, Dims{2, 3}, {}, 16, 32, 64, true, "gelu_tanh",
                       true);
    testMatmulEpilogue(dtype, {}, {}, 16, 32, 64, false, "gelu_tanh", false);
    testMatmulEpilogue(dtype, {}, {}, 16, 32, 64, true, "relu", true);
    // NaN stays NaN through the bias and the activation, as on the CPU.
    for (const char *activation : {"", "relu", "gelu_tanh"})
      testMatmulEpilogue(dtype, {}, {}, 16, 32, 64, true, activation, false,
                         true);
    // An aux leading dimension that is not a multiple of 8, batched GEMMs
    // and k = 0: the own kernel.
    testMatmulEpilogue(dtype, {}, {}, 10, 24, 36, true, "gelu_tanh", true);
    testMatmulEpilogue(dtype, Dims{3}, Dims{3}, 8, 16, 24, true, "gelu_tanh",
                       true);
    testMatmulEpilogue(dtype, {}, {}, 4, 0, 8, true, "relu", false);
  }
}

/// An input gradient through a tanh GELU (`activation_grad=gelu_tanh`)
/// against the CPU kernel: cuBLASLt's DGELU for a single aligned bf16 GEMM,
/// the plain GEMM and the own kernel for f32 and batched GEMMs, an aux leading
/// dimension not a multiple of 8 and misaligned operands. Returns the
/// share of elements equal to the CPU's.
double testMatmulGeluGrad(DType dtype, std::vector<int64_t> batchB, int64_t m,
                          int64_t k, int64_t n, bool misalign) {
  SCOPED_TRACE(std::string(dtypeName(dtype)) + " m=" + std::to_string(m) +
               " k=" + std::to_string(k) + " n=" + std::to_string(n) +
               (batchB.empty() ? "" : " batched") +
               (misalign ? " misaligned" : ""));
  Tensor g = random(dtype, {2, m, k});
  std::vector<int64_t> wShape = batchB;
  wShape.insert(wShape.end(), {k, n});
  Tensor w = random(dtype, wShape);
  Tensor x = random(dtype, {2, m, n}, -4, 4);
  std::vector<const Tensor *> in{&g, &w, &x};
  Instruction inst =
      makeInstruction("matmul", in, {ref(dtype, {2, m, n})},
                      {{"activation_grad", std::string("gelu_tanh")}});
  std::vector<Tensor> cpu, gpu;
  runBoth(inst, in, cpu, gpu, misalign);
  double rtol, atol;
  matmulTolerances(dtype, rtol, atol);
  expectClose(gpu[0], cpu[0], rtol, atol, "result");
  int64_t equal = 0;
  for (int64_t i = 0; i < cpu[0].size(); ++i)
    equal += gpu[0].get(i) == cpu[0].get(i);
  return double(equal) / double(cpu[0].size());
}

/// Whether the tests run on the host emulator, whose cuBLASLt computes the
/// documented epilogues in f32 with libm's tanh; a GPU's may differ in
/// the last f32 bits, and so tip a bf16 rounding now and then.
bool onEmulator() {
  cudaDeviceProp properties{};
  return cudaGetDeviceProperties(&properties, 0) == cudaSuccess &&
         std::strstr(properties.name, "emulator") != nullptr;
}

TEST(CUDAKernels, MatmulGeluGrad) {
  for (DType dtype : {DType::F32, DType::BF16, DType::F64}) {
    testMatmulGeluGrad(dtype, {}, 16, 32, 64, false);  // bf16: DGELU
    testMatmulGeluGrad(dtype, {2}, 16, 32, 64, false); // batched
    testMatmulGeluGrad(dtype, {}, 10, 24, 36, false);  // aux ld 36
    testMatmulGeluGrad(dtype, {}, 0, 24, 32, false);   // no rows
    testMatmulGeluGrad(dtype, {}, 8, 0, 32, false);    // k = 0: zeros
  }
  // bf16 DGELU rounds once, as the CPU kernel does: the results are the
  // CPU's but where the f32 sums' order tips a rounding. The own kernel
  // multiplies the rounded product and rounds again. On a GPU the shares
  // are printed (its DGELU's derivative need not be the CPU's to the bit).
  double fused = testMatmulGeluGrad(DType::BF16, {}, 64, 96, 128, false);
  double own = testMatmulGeluGrad(DType::BF16, {}, 64, 96, 128, true);
  if (onEmulator()) {
    EXPECT_GE(fused, 0.99);
    EXPECT_LT(own, 0.9);
  } else {
    std::printf("bf16 DGELU: %.1f%% of elements equal to the CPU's (own "
                "kernel: %.1f%%)\n",
                100 * fused, 100 * own);
  }
}

/// Where a matmul's epilogue runs (what the backend's summary counts).
std::string epilogueChoiceOf(DType dtype, std::vector<int64_t> batchB,
                             int64_t m, int64_t k, int64_t n, Attributes attrs,
                             bool bias, bool pre, bool geluInput = false) {
  Tensor x = random(dtype, {2, m, k});
  batchB.insert(batchB.end(), {k, n});
  Tensor w = random(dtype, batchB), b = random(dtype, {n});
  Tensor g = random(dtype, {2, m, n});
  std::vector<const Tensor *> in{&x, &w};
  if (bias)
    in.push_back(&b);
  if (geluInput)
    in.push_back(&g);
  std::vector<TensorRef> out{ref(dtype, {2, m, n})};
  if (pre)
    out.push_back(ref(dtype, {2, m, n}));
  auto kernel = createCUDAKernel(launchContext(),
                                 makeInstruction("matmul", in, out, attrs));
  EXPECT_TRUE(kernel.isOk()) << kernel.status().message();
  return kernel.isOk() ? (*kernel)->epilogueChoice() : "";
}

TEST(CUDAKernels, MatmulEpilogueChoices) {
  const Attributes gelu{{"activation", std::string("gelu_tanh")}};
  const Attributes relu{{"activation", std::string("relu")}};
  const Attributes dgelu{{"activation_grad", std::string("gelu_tanh")}};
  // What the own kernel takes whatever cuBLASLt offers.
  EXPECT_EQ(epilogueChoiceOf(DType::F32, {}, 8, 16, 32, {}, false, false), "");
  EXPECT_EQ(epilogueChoiceOf(DType::BF16, {2}, 8, 16, 32, gelu, true, true),
            "own: batched");
  EXPECT_EQ(epilogueChoiceOf(DType::F64, {}, 8, 16, 32, gelu, true, false),
            "own: f64");
  EXPECT_EQ(epilogueChoiceOf(DType::BF16, {}, 8, 16, 36, gelu, true, true),
            "own: aux leading dimension");
  EXPECT_EQ(
      epilogueChoiceOf(DType::BF16, {}, 8, 16, 36, dgelu, false, false, true),
      "own: aux leading dimension");
  EXPECT_EQ(epilogueChoiceOf(DType::F32, {}, 8, 0, 32, {}, true, false),
            "own: k = 0");
  // An H200's f32 DGELU was 0.7% off the derivative: never cuBLASLt's.
  EXPECT_EQ(
      epilogueChoiceOf(DType::F32, {}, 8, 16, 32, dgelu, false, false, true),
      "own: f32 DGELU is approximate");
  EXPECT_EQ(epilogueChoiceOf(DType::F32, {}, 8, 16, 32, relu, false, false),
            "own: ReLU");
  // cuBLASLt's, where it has an algorithm (the emulator has one for every
  // epilogue it implements; a GPU's cuBLASLt may not).
  if (!onEmulator())
    return;
  EXPECT_EQ(epilogueChoiceOf(DType::BF16, {}, 8, 16, 32, gelu, true, true),
            "GELU_AUX_BIAS");
  EXPECT_EQ(epilogueChoiceOf(DType::F32, {}, 8, 16, 32, gelu, false, false),
            "GELU");
  EXPECT_EQ(epilogueChoiceOf(DType::BF16, {}, 8, 16, 32, {}, true, false),
            "BIAS");
  EXPECT_EQ(epilogueChoiceOf(DType::F32, {}, 8, 16, 32, relu, true, false),
            "BIAS + own ReLU");
  EXPECT_EQ(
      epilogueChoiceOf(DType::BF16, {}, 8, 16, 32, dgelu, false, false, true),
      "DGELU");
}

/// A residual projection (accumulate=1): bf16 operands, an f32 result, f32
/// bias and addend, against the CPU kernel. A linear layer takes cuBLASLt's
/// BIAS epilogue with C = the addend and beta = 1; without a bias, the
/// plain GEMM with beta = 1; batched, the plain GEMMs and the own bias
/// kernel; k = 0, the addend copied and the bias added; misaligned bf16
/// operands, the unaligned algorithm.
void testMatmulResidual(std::vector<int64_t> batchB, int64_t m, int64_t k,
                        int64_t n, bool bias, bool misalign) {
  SCOPED_TRACE("m=" + std::to_string(m) + " k=" + std::to_string(k) +
               " n=" + std::to_string(n) + (batchB.empty() ? "" : " batched") +
               (bias ? " bias" : "") + (misalign ? " misaligned" : ""));
  Tensor x = random(DType::BF16, {2, m, k});
  std::vector<int64_t> wShape = batchB;
  wShape.push_back(n);
  wShape.push_back(k);
  Tensor w = random(DType::BF16, wShape);
  Tensor b = random(DType::F32, {n});
  Tensor r = random(DType::F32, {2, m, n}, -4, 4);
  std::vector<const Tensor *> in{&x, &w};
  if (bias)
    in.push_back(&b);
  in.push_back(&r);
  Instruction inst = makeInstruction(
      "matmul", in, {ref(DType::F32, {2, m, n})},
      {{"transpose_rhs", int64_t(1)}, {"accumulate", int64_t(1)}});
  std::vector<Tensor> cpu, gpu;
  runBoth(inst, in, cpu, gpu, misalign);
  // f32 sums in another order, the bias and addend added in another order.
  expectClose(gpu[0], cpu[0], 1e-5, 1e-5, "result");
}

TEST(CUDAKernels, MatmulResidual) {
  testMatmulResidual({}, 16, 32, 64, true, false);
  testMatmulResidual({}, 16, 32, 64, false, false);
  testMatmulResidual({2}, 8, 16, 24, true, false);
  testMatmulResidual({}, 4, 0, 8, true, false);
  testMatmulResidual({}, 16, 32, 64, true, true);
}

/// Tuning (CUDAKernel::tune) times several algorithms on the launch's own
/// operands, and the launch that follows must still compute the result:
/// here a residual added in place (the addend is the output, so the timed
/// launches would otherwise add the product to it again and again), as a
/// linear layer (cuBLASLt's BIAS epilogue), as a batched GEMM (the plain
/// algorithm and the own bias kernel), as several calls (x's outer batch
/// over a weight with a batch of its own) and with misaligned bf16
/// operands (the unaligned algorithm). A second kernel of the same problem
/// takes the first's algorithm without being timed. The plan's operands
/// all sit at offset 0, so the kernel asks for scratch for every input.
void testTunedResidualInPlace(std::vector<int64_t> xBatch,
                              std::vector<int64_t> wBatch, bool misalign) {
  SCOPED_TRACE("x batch " + shapeString(xBatch) + ", w batch " +
               shapeString(wBatch) + (misalign ? ", misaligned" : ""));
  const int64_t m = 16, k = 32, n = 64;
  std::vector<int64_t> xShape = xBatch, wShape = wBatch, rShape = xBatch;
  xShape.insert(xShape.end(), {m, k});
  wShape.insert(wShape.end(), {n, k});
  rShape.insert(rShape.end(), {m, n});
  Tensor x = random(DType::BF16, xShape), w = random(DType::BF16, wShape);
  Tensor b = random(DType::F32, {n}), r = random(DType::F32, rShape, -4, 4);
  std::vector<const Tensor *> in{&x, &w, &b, &r};
  Instruction inst = makeInstruction(
      "matmul", in, {ref(DType::F32, rShape)},
      {{"transpose_rhs", int64_t(1)}, {"accumulate", int64_t(1)}});
  std::vector<Tensor> cpu;
  ASSERT_EQ(runCPU(inst, in, cpu), "");

  LaunchContext context = launchContext();
  MatmulTuning tuning;
  for (int kernel = 0; kernel < 2; ++kernel) {
    auto created = createCUDAKernel(context, inst);
    ASSERT_TRUE(created.isOk()) << created.status().message();
    const uint64_t scratchBytes = created.value()->tuningScratchBytes();
    EXPECT_GE(scratchBytes, r.bytes.size());
    CUDA_OK(cudaMalloc(&context.tuningScratch, scratchBytes));
    context.tuningScratchBytes = scratchBytes;
    std::vector<void *> allocations;
    std::vector<void *> buffers;
    for (const Tensor *t : in) {
      size_t shift = misalign && t->dtype == DType::BF16 ? 2 : 0;
      void *p = nullptr;
      CUDA_OK(cudaMalloc(&p, t->bytes.size() + shift));
      allocations.push_back(p);
      void *data = static_cast<char *>(p) + shift;
      CUDA_OK(cudaMemcpy(data, t->bytes.data(), t->bytes.size(),
                         cudaMemcpyHostToDevice));
      buffers.push_back(data);
    }
    const void *inputs[] = {buffers[0], buffers[1], buffers[2], buffers[3]};
    void *outputs[] = {buffers[3]}; // the residual, added in place
    Status tuned = created.value()->tune(context, inputs, outputs, tuning);
    ASSERT_TRUE(tuned.isOk()) << tuned.message();
    Status launched = created.value()->launch(context, inputs, outputs);
    ASSERT_TRUE(launched.isOk()) << launched.message();
    Tensor result(DType::F32, rShape);
    CUDA_OK(cudaMemcpy(result.bytes.data(), buffers[3], result.bytes.size(),
                       cudaMemcpyDeviceToHost));
    expectClose(result, cpu[0], 1e-5, 1e-5, "result");
    for (void *p : allocations)
      CUDA_OK(cudaFree(p));
    CUDA_OK(cudaFree(context.tuningScratch));
  }
  EXPECT_EQ(tuning.instructions, 2);
  EXPECT_EQ(tuning.problems, 1);
  EXPECT_GE(tuning.mostCandidates, 1);
  EXPECT_GT(tuning.chosenSeconds, 0);
  EXPECT_LE(tuning.chosenSeconds, tuning.heuristicSeconds);
}

TEST(CUDAKernels, MatmulTuningKeepsTheInputsItOverwrites) {
  testTunedResidualInPlace({2}, {}, false);
  testTunedResidualInPlace({2}, {2}, false);
  testTunedResidualInPlace({3, 2}, {2}, false);
  testTunedResidualInPlace({2}, {}, true);
}

/// A weight-gradient GEMM with its bias gradient (`bias_grad`) against the
/// CPU kernel: cuBLASLt's BGRADB (lhs summed) or BGRADA (rhs summed), or,
/// for misaligned bf16 operands, the plain GEMM and the own sum kernel.
void testMatmulBiasGrad(DType dtype, const std::string &operand, int64_t m,
                        int64_t k, int64_t n, bool transA, bool transB,
                        bool misalign) {
  SCOPED_TRACE(std::string(dtypeName(dtype)) + " bias_grad=" + operand +
               " m=" + std::to_string(m) + " k=" + std::to_string(k) +
               " n=" + std::to_string(n) + (transA ? " transA" : "") +
               (transB ? " transB" : "") + (misalign ? " misaligned" : ""));
  Tensor x = random(dtype, transA ? std::vector<int64_t>{k, m}
                                  : std::vector<int64_t>{m, k});
  Tensor y = random(dtype, transB ? std::vector<int64_t>{n, k}
                                  : std::vector<int64_t>{k, n});
  Attributes attrs{{"transpose_lhs", int64_t(transA)},
                   {"transpose_rhs", int64_t(transB)},
                   {"bias_grad", operand}};
  Instruction inst = makeInstruction(
      "matmul", {&x, &y},
      {ref(dtype, {m, n}), ref(dtype, {operand == "lhs" ? m : n})}, attrs);
  std::vector<Tensor> cpu, gpu;
  runBoth(inst, {&x, &y}, cpu, gpu, misalign);
  double rtol, atol;
  matmulTolerances(dtype, rtol, atol);
  expectClose(gpu[0], cpu[0], rtol, atol, "result");
  expectClose(gpu[1], cpu[1], rtol, atol, "bias gradient");
}

TEST(CUDAKernels, MatmulBiasGrad) {
  for (DType dtype : {DType::F32, DType::BF16, DType::F64})
    for (const char *operand : {"lhs", "rhs"}) {
      // The weight gradients of a linear layer: g^T x and x^T g, K = rows.
      testMatmulBiasGrad(dtype, operand, 24, 300, 40, true, false, false);
      // Other layouts; a length that is not a multiple of 32.
      testMatmulBiasGrad(dtype, operand, 37, 65, 20, false, true, false);
      // K = 0: zeros.
      testMatmulBiasGrad(dtype, operand, 8, 0, 16, true, false, false);
    }
  // Misaligned bf16 operands: the plain GEMM and the own sum kernel.
  for (const char *operand : {"lhs", "rhs"})
    testMatmulBiasGrad(DType::BF16, operand, 24, 300, 40, true, false, true);
}

//===----------------------------------------------------------------------===//
// elementwise
//===----------------------------------------------------------------------===//

ProgramOp op(const std::string &name, DType dtype, std::vector<int> operands,
             Attributes attrs = {}) {
  ProgramOp p;
  p.op = name;
  p.dtype = dtype;
  p.operands = std::move(operands);
  p.attrs = std::move(attrs);
  return p;
}

/// An elementwise instruction yielding every op's value; output dtypes
/// follow the yielded values.
Instruction program(const std::vector<const Tensor *> &inputs,
                    std::vector<int64_t> shape, std::vector<ProgramOp> ops,
                    std::vector<int> yields) {
  Instruction inst = makeInstruction("elementwise", inputs, {});
  std::vector<DType> types;
  for (const Tensor *t : inputs)
    types.push_back(t->dtype);
  for (const ProgramOp &p : ops)
    types.push_back(p.dtype);
  inst.program = std::move(ops);
  inst.yields = std::move(yields);
  for (int y : inst.yields)
    inst.outputs.push_back(ref(types[size_t(y)], shape));
  return inst;
}

/// Each op once, on x (dense) and a broadcast row and scalar; every result
/// yielded.
Instruction everyOp(DType t, const std::vector<const Tensor *> &inputs,
                    std::vector<int64_t> shape) {
  const bool isFloat = t == DType::F32 || t == DType::F64 || t == DType::BF16;
  std::vector<ProgramOp> ops;
  const int x = 0, row = 1, scalar = 2;
  int next = 3;
  std::vector<int> yields;
  auto add = [&](ProgramOp p) {
    ops.push_back(std::move(p));
    yields.push_back(next);
    return next++;
  };
  for (const char *name : {"add", "sub", "mul", "div", "max", "min"}) {
    add(op(name, t, {x, row}));
    add(op(name, t, {scalar, x}));
  }
  add(op("pow", t, {x, isFloat ? row : scalar}));
  if (isFloat)
    add(op("fmod", t, {x, row}));
  for (const char *name : {"neg", "relu", "abs"})
    add(op(name, t, {x}));
  if (isFloat) {
    for (const char *name : {"sqrt", "rsqrt", "exp", "log", "erf", "tanh",
                             "sigmoid", "reciprocal", "sin", "cos", "gelu"})
      add(op(name, t, {x}));
    add(op("gelu", t, {x}, {{"approximate", std::string("tanh")}}));
  }
  int c = add(op("const", t, {}, {{"value", 0.5}}));
  int flag = 0;
  for (const char *direction : {"eq", "ne", "lt", "le", "gt", "ge"})
    flag = add(op("compare", DType::I1, {x, row},
                  {{"direction", std::string(direction)}}));
  add(op("select", t, {flag, x, c}));
  for (DType to : {DType::F32, DType::F64, DType::I1, DType::I32, DType::I64})
    add(op("cast", to, {x}));
  return program(inputs, std::move(shape), std::move(ops), std::move(yields));
}

TEST(CUDAKernels, ElementwiseEveryOp) {
  for (DType t : {DType::F32, DType::F64, DType::I32, DType::I64}) {
    SCOPED_TRACE(dtypeName(t));
    bool isInt = t == DType::I32 || t == DType::I64;
    double lo = isInt ? -20 : -3, hi = isInt ? 20 : 3;
    Tensor x = random(t, {6, 7, 9}, lo, hi), row = random(t, {7, 1}, lo, hi);
    Tensor scalar = random(t, {}, lo, hi);
    if (isInt) {
      // Division by zero and by -1, small exponents.
      row.set(0, 0);
      row.set(1, -1);
      scalar.set(0, 3);
    }
    Instruction inst = everyOp(t, {&x, &row, &scalar}, {6, 7, 9});
    expectSame(inst, {&x, &row, &scalar});
  }
}

TEST(CUDAKernels, ElementwiseIntegerEdges) {
  const double i32min = -2147483648.0, i32max = 2147483647.0;
  Tensor a =
      filled(DType::I32, {8}, {i32max, i32min, i32min, 7, -7, 2, -2, 46341});
  Tensor b = filled(DType::I32, {8}, {1, -1, 1, 0, 2, 31, 31, 46341});
  Instruction inst =
      program({&a, &b}, {8},
              {op("add", DType::I32, {0, 1}), op("sub", DType::I32, {0, 1}),
               op("mul", DType::I32, {0, 1}), op("div", DType::I32, {0, 1}),
               op("pow", DType::I32, {0, 1}), op("neg", DType::I32, {0}),
               op("abs", DType::I32, {0})},
              {2, 3, 4, 5, 6, 7, 8});
  expectSame(inst, {&a, &b});
}

TEST(CUDAKernels, ElementwiseCastsSaturate) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (DType from : {DType::F32, DType::F64}) {
    Tensor x = filled(from, {10},
                      {nan, inf, -inf, 3e9, -3e9, 1e19, -1e19, -2.7, 2.7, 0});
    Instruction inst =
        program({&x}, {10},
                {op("cast", DType::I32, {0}), op("cast", DType::I64, {0}),
                 op("cast", DType::I1, {0}), op("cast", DType::F32, {0})},
                {1, 2, 3, 4});
    expectSame(inst, {&x});
  }
  Tensor big = filled(DType::I64, {3}, {5e9, -5e9, 12345});
  expectSame(program({&big}, {3},
                     {op("cast", DType::I32, {0}), op("cast", DType::F32, {0})},
                     {1, 2}),
             {&big});
}

TEST(CUDAKernels, ElementwiseBooleans) {
  Tensor a = random(DType::I1, {5, 8}), b = random(DType::I1, {8});
  Instruction inst = program(
      {&a, &b}, {5, 8},
      {op("max", DType::I1, {0, 1}), op("min", DType::I1, {0, 1}),
       op("compare", DType::I1, {0, 1}, {{"direction", std::string("lt")}}),
       op("select", DType::I1, {4, 0, 1}),
       op("const", DType::I1, {}, {{"value", 1.0}}),
       op("cast", DType::F32, {0}), op("cast", DType::I64, {1})},
      {2, 3, 4, 5, 6, 7, 8});
  expectSame(inst, {&a, &b});
}

TEST(CUDAKernels, ElementwiseVectorAndScalarPaths) {
  // 4096 elements (vector kernel), 4095 (scalar kernel), a bias row (strided).
  for (int64_t n : {4096, 4095}) {
    Tensor x = random(DType::F32, {n}), s = random(DType::F32, {});
    Instruction inst = program(
        {&x, &s}, {n},
        {op("mul", DType::F32, {0, 1}), op("gelu", DType::F32, {2})}, {3, 2});
    expectSame(inst, {&x, &s});
  }
  Tensor x = random(DType::F64, {33, 64}), bias = random(DType::F64, {64});
  expectSame(
      program({&x, &bias}, {33, 64}, {op("add", DType::F64, {0, 1})}, {2}),
      {&x, &bias});
}

TEST(CUDAKernels, ElementwiseInPlace) {
  Tensor x = random(DType::F32, {1000}), y = random(DType::F32, {1000});
  Instruction inst = program(
      {&x, &y}, {1000},
      {op("mul", DType::F32, {0, 1}), op("tanh", DType::F32, {2})}, {3});
  std::vector<Tensor> cpu, gpu;
  ASSERT_EQ(runCPU(inst, {&x, &y}, cpu), "");
  DeviceError error{};
  runGPU(inst, {&x, &y}, gpu, error, false, /*inPlace=*/true);
  expectClose(gpu[0], cpu[0], 1e-5, 1e-6, "in place");
}

/// The update an optimizer applies to one parameter: y0 = x * s + g (f32)
/// and y1 = bf16(y0), for x and g of `n` elements and a scalar s.
Instruction groupMember(const Tensor &x, const Tensor &g, const Tensor &s) {
  return program({&x, &g, &s}, x.shape,
                 {op("mul", DType::F32, {0, 2}), op("cast", DType::F32, {1}),
                  op("add", DType::F32, {3, 4}), op("cast", DType::BF16, {5})},
                 {5, 6});
}

TEST(CUDAKernels, ElementwiseGroupComputesWhatItsMembersKernelsDo) {
  // More members than one launch takes, of sizes that take the vector path
  // and sizes that do not, and members whose operands sit one element past
  // an aligned address (the scalar path): each member's outputs must be
  // its own kernel's, byte for byte.
  const std::vector<int64_t> sizes = {1,    3,    4,    100,  4096,
                                      4097, 4101, 9000, 12288};
  Tensor s = random(DType::F32, {});
  std::vector<Tensor> xs, gs;
  std::vector<Instruction> members;
  const size_t count = 80;
  for (size_t k = 0; k < count; ++k) {
    const int64_t n = sizes[k % sizes.size()];
    xs.push_back(random(DType::F32, {n}));
    gs.push_back(random(DType::BF16, {n}));
  }
  for (size_t k = 0; k < count; ++k)
    members.push_back(groupMember(xs[k], gs[k], s));
  // The group's kernel comes from a member whose scalar is a scalar (a
  // one-element member's is as dense as its other inputs, so its signature
  // differs, but the group kernel computes it alike).
  const Instruction &representative = members[count - 1];
  ASSERT_LT(size_t(elementwiseGroupCapacity(representative)), count);
  for (const Instruction &member : members)
    if (member.outputs[0].elements() > 1) {
      ASSERT_EQ(elementwiseGroupSignature(member),
                elementwiseGroupSignature(representative));
    }

  LaunchContext context = launchContext();
  auto group = createElementwiseGroup(context, representative);
  ASSERT_TRUE(group.isOk()) << group.status().message();
  std::vector<void *> allocations;
  // Each buffer has 16 spare bytes, all 0xff but what an input holds: a
  // member must not write past its elements.
  std::vector<std::pair<uint8_t *, size_t>> tails;
  auto deviceCopy = [&](const Tensor *t, size_t bytes, bool misalign) {
    void *p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, bytes + 16), cudaSuccess);
    allocations.push_back(p);
    const size_t shift = misalign ? dtypeSize(DType::F32) : 0;
    uint8_t *data = static_cast<uint8_t *>(p) + shift;
    EXPECT_EQ(cudaMemset(p, 0xff, bytes + 16), cudaSuccess);
    if (t) {
      EXPECT_EQ(
          cudaMemcpy(data, t->bytes.data(), bytes, cudaMemcpyHostToDevice),
          cudaSuccess);
    }
    tails.push_back({data + bytes, 16 - shift});
    return data;
  };
  void *scalar = deviceCopy(&s, s.bytes.size(), false);
  std::vector<GroupMember> operands(count);
  for (size_t k = 0; k < count; ++k) {
    const bool misalign = k % 7 == 3;
    const int64_t n = xs[k].size();
    operands[k].elements = n;
    operands[k].inputs = {deviceCopy(&xs[k], xs[k].bytes.size(), misalign),
                          deviceCopy(&gs[k], gs[k].bytes.size(), misalign),
                          scalar};
    operands[k].outputs = {deviceCopy(nullptr, size_t(n) * 4, misalign),
                           deviceCopy(nullptr, size_t(n) * 2, misalign)};
    // Some members update x in place.
    if (k % 5 == 2)
      operands[k].outputs[0] = const_cast<void *>(operands[k].inputs[0]);
  }
  Status launched = group.value()->launch(context, operands);
  ASSERT_TRUE(launched.isOk()) << launched.message();
  CUDA_OK(cudaStreamSynchronize(device().stream));
  for (size_t k = 0; k < count; ++k) {
    SCOPED_TRACE("member " + std::to_string(k) + " of " +
                 std::to_string(xs[k].size()) + " elements");
    std::vector<Tensor> own;
    DeviceError error{};
    runGPU(members[k], {&xs[k], &gs[k], &s}, own, error, false,
           /*inPlace=*/k % 5 == 2);
    for (size_t o = 0; o < own.size(); ++o) {
      Tensor grouped(members[k].outputs[o]);
      CUDA_OK(cudaMemcpy(grouped.bytes.data(), operands[k].outputs[o],
                         grouped.bytes.size(), cudaMemcpyDeviceToHost));
      expectClose(grouped, own[o], 0, 0, "output " + std::to_string(o));
    }
  }
  for (const auto &[tail, bytes] : tails) {
    std::vector<uint8_t> host(bytes);
    CUDA_OK(cudaMemcpy(host.data(), tail, bytes, cudaMemcpyDeviceToHost));
    for (uint8_t b : host)
      ASSERT_EQ(b, 0xff) << "a byte past a buffer's elements changed";
  }
  for (void *p : allocations)
    CUDA_OK(cudaFree(p));
}

TEST(CUDAKernels, ElementwiseBF16) {
  Tensor x = random(DType::BF16, {16, 32}), b = random(DType::BF16, {32});
  Instruction inst =
      program({&x, &b}, {16, 32},
              {op("add", DType::BF16, {0, 1}), op("gelu", DType::BF16, {2}),
               op("cast", DType::F32, {3})},
              {3, 4});
  if (!lookupCPUKernel("elementwise")->check(inst))
    GTEST_SKIP() << "the CPU elementwise does not take bf16 yet";
  expectSame(inst, {&x, &b});
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

void testReduce(const std::string &kernel, DType dtype,
                std::vector<int64_t> shape, std::vector<int64_t> axes,
                bool keep, DType resultType = DType::F16, double lo = -50,
                double hi = 50) {
  if (resultType == DType::F16) // not given: the input's
    resultType = dtype;
  SCOPED_TRACE(kernel + " " + dtypeName(dtype) + " " + shapeString(shape) +
               " axes " + shapeString(axes));
  Tensor x = random(dtype, shape, lo, hi);
  std::vector<bool> reduced(shape.size());
  for (int64_t a : axes)
    reduced[size_t(a < 0 ? a + int64_t(shape.size()) : a)] = true;
  std::vector<int64_t> out;
  for (size_t d = 0; d < shape.size(); ++d)
    if (!reduced[d] || keep)
      out.push_back(reduced[d] ? 1 : shape[d]);
  Instruction inst =
      makeInstruction(kernel, {&x}, {ref(resultType, out)}, {{"axes", axes}});
  // Sums in another order differ by up to the unit roundoff times the count
  // times the largest |x| (50): with cancellation, more than any relative
  // tolerance of the result allows.
  double rtol = -1, atol = -1;
  if (kernel != "reduce_max" &&
      (resultType == DType::F32 || resultType == DType::F64)) {
    int64_t count = 1;
    for (size_t d = 0; d < shape.size(); ++d)
      count *= reduced[d] ? shape[d] : 1;
    tolerances(resultType, rtol, atol);
    const double roundoff = resultType == DType::F64 ? 0x1p-53 : 0x1p-24;
    const double largest = std::max(std::abs(lo), std::abs(hi));
    atol = std::max(atol, roundoff * double(count) * largest /
                              (kernel == "reduce_mean" ? double(count) : 1));
  }
  expectSame(inst, {&x}, rtol, atol);
}

void testReductions(bool chunked) {
  for (const char *kernel : {"reduce_sum", "reduce_mean", "reduce_max"})
    for (DType dtype : {DType::F32, DType::F64, DType::I32, DType::I64}) {
      bool isInt = dtype == DType::I32 || dtype == DType::I64;
      if (isInt && std::string(kernel) == "reduce_mean")
        continue;
      testReduce(kernel, dtype, {7, 300}, {1}, false);        // warp rows
      testReduce(kernel, dtype, {3, 5000}, {-1}, true);       // block rows
      testReduce(kernel, dtype, {64, 33, 17}, {1}, false);    // middle
      testReduce(kernel, dtype, {6, 5, 4, 3}, {0, 2}, true);  // general
      testReduce(kernel, dtype, {5, 4, 3}, {0, 1, 2}, false); // all
      testReduce(kernel, dtype, {4, 1, 5}, {1}, false);       // a copy
      testReduce(kernel, dtype, {3, 0}, {1}, false);          // empty
      testReduce(kernel, dtype, {2000, 3}, {0}, false);       // long middle
      if (!chunked)
        continue;
      // Shapes that leave the device idle unless the reduced range is cut
      // into chunks: a bias gradient, a few middle groups, a few long rows,
      // a whole-tensor sum whose length has no small factor.
      testReduce(kernel, dtype, {4096, 768}, {0}, false);
      testReduce(kernel, dtype, {3, 3001, 40}, {1}, true);
      testReduce(kernel, dtype, {2, 200000}, {1}, false);
      testReduce(kernel, dtype, {1000003}, {0}, false);
    }
  // bf16 into an f32 sum (a bias gradient under mixed precision), in every
  // pattern.
  for (auto [shape, axes] :
       std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>{
           {{7, 300}, {1}},
           {{3, 5000}, {-1}},
           {{64, 33, 17}, {1}},
           {{6, 5, 4, 3}, {0, 2}},
           {{4, 1, 5}, {1}},
           {{8192, 768}, {0}},
           {{8, 1024, 2304}, {0, 1}}})
    testReduce("reduce_sum", DType::BF16, shape, axes, false, DType::F32);
}

// With the multiprocessor count unknown nothing is chunked: the single-pass
// kernels.
TEST(CUDAKernels, Reductions) {
  int multiprocessors = device().multiprocessors;
  device().multiprocessors = 0;
  testReductions(false);
  device().multiprocessors = multiprocessors;
}

/// cumsum sums in the dtype one element after the other on both backends:
/// the same bits, random floats included.
TEST(CUDAKernels, Cumsum) {
  for (DType dtype : {DType::F32, DType::F64, DType::I32, DType::I64})
    for (auto [shape, axis] :
         std::vector<std::pair<std::vector<int64_t>, int64_t>>{
             {{1000}, 0}, {{8, 129}, 1}, {{8, 129}, 0}, {{3, 70, 5}, 1}})
      for (int flags = 0; flags < 4; ++flags) {
        SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + shapeString(shape) +
                     " axis " + std::to_string(axis) + " flags " +
                     std::to_string(flags));
        Tensor x = random(dtype, shape, -100, 100);
        expectSame(makeInstruction("cumsum", {&x}, {ref(dtype, shape)},
                                   {{"axis", axis},
                                    {"exclusive", int64_t(flags & 1)},
                                    {"reverse", int64_t(flags >> 1)}}),
                   {&x}, 0, 0);
      }
}

TEST(CUDAKernels, ChunkedReductions) {
  ASSERT_GT(device().multiprocessors, 0);
  testReductions(true);
}

// Every max of data drawn around 0 is positive, so a max that starts at 0
// instead of the lowest value would pass the tests above: all-negative
// data, through each kernel (row, middle, general, chunked).
TEST(CUDAKernels, ReduceMaxAllNegative) {
  int multiprocessors = device().multiprocessors;
  for (bool chunked : {false, true}) {
    SCOPED_TRACE(chunked ? "chunked" : "single pass");
    device().multiprocessors = chunked ? multiprocessors : 0;
    for (DType dtype : {DType::F32, DType::F64, DType::I32, DType::I64})
      for (auto [shape, axes] :
           std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>{
               {{7, 300}, {1}},
               {{3, 5000}, {1}},
               {{64, 33, 17}, {1}},
               {{6, 5, 4, 3}, {0, 2}},
               {{4096, 768}, {0}},
               {{2, 200000}, {1}}})
        testReduce("reduce_max", dtype, shape, axes, false, DType::F16, -9, -1);
  }
  device().multiprocessors = multiprocessors;
}

TEST(CUDAKernels, ReduceMaxPropagatesNaN) {
  Tensor x = random(DType::F32, {4, 100});
  x.set(150, std::numeric_limits<double>::quiet_NaN());
  Instruction inst = makeInstruction("reduce_max", {&x}, {ref(DType::F32, {4})},
                                     {{"axes", std::vector<int64_t>{1}}});
  expectSame(inst, {&x});
}

//===----------------------------------------------------------------------===//
// softmax, log_softmax, layer_norm, cross_entropy
//===----------------------------------------------------------------------===//

TEST(CUDAKernels, Softmax) {
  for (const char *kernel : {"softmax", "log_softmax"})
    for (DType dtype : {DType::F32, DType::F64})
      for (auto [shape, axis] :
           std::vector<std::pair<std::vector<int64_t>, int64_t>>{
               {{5, 37}, -1},     // a warp per row
               {{3, 3000}, 1},    // a block per row
               {{4, 6, 5}, 1},    // columns
               {{2, 3, 4, 5}, 0}, // columns, outer 1
               {{9}, 0}}) {
        SCOPED_TRACE(std::string(kernel) + " " + shapeString(shape));
        Tensor x = random(dtype, shape, -10, 10);
        if (x.size() > 3)
          x.set(2, -std::numeric_limits<double>::infinity());
        Instruction inst = makeInstruction(kernel, {&x}, {ref(dtype, shape)},
                                           {{"axis", axis}});
        expectSame(inst, {&x});
      }
}

TEST(CUDAKernels, LayerNorm) {
  for (DType dtype : {DType::F32, DType::F64})
    for (auto [shape, axis] :
         std::vector<std::pair<std::vector<int64_t>, int64_t>>{
             {{6, 40}, -1}, {{3, 2000}, 1}, {{2, 3, 4, 5}, 2}, {{7}, 0}}) {
      SCOPED_TRACE(shapeString(shape));
      const int64_t first = axis < 0 ? int64_t(shape.size()) + axis : axis;
      std::vector<int64_t> normalized(shape.begin() + first, shape.end());
      Tensor x = random(dtype, shape, -3, 5);
      Tensor scale = random(dtype, normalized),
             bias = random(dtype, normalized);
      Instruction inst = makeInstruction("layer_norm", {&x, &scale, &bias},
                                         {ref(dtype, shape)},
                                         {{"axis", axis}, {"epsilon", 1e-3}});
      expectSame(inst, {&x, &scale, &bias});
    }
}

TEST(CUDAKernels, LayerNormBackward) {
  for (DType dtype : {DType::F32, DType::F64})
    for (auto [shape, axis] :
         std::vector<std::pair<std::vector<int64_t>, int64_t>>{
             {{6, 40}, -1},       // a warp per row
             {{3, 2000}, 1},      // a block per row
             {{2, 3, 4, 5}, 2},   // normalized over two dims
             {{7}, 0},            // one row
             {{8192, 768}, 1},    // GPT-2's rows: many row chunks
             {{1000, 1500}, -1}}) // partial column blocks and chunks
    {
      SCOPED_TRACE(shapeString(shape) + " " + dtypeName(dtype));
      int64_t first = axis < 0 ? axis + int64_t(shape.size()) : axis;
      std::vector<int64_t> normalized(shape.begin() + first, shape.end());
      Tensor x = random(dtype, shape, -3, 5);
      Tensor scale = random(dtype, normalized, 0.5, 1.5);
      Tensor dy = random(dtype, shape, -1, 1);
      Instruction inst = makeInstruction(
          "layer_norm_backward", {&x, &scale, &dy},
          {ref(dtype, shape), ref(dtype, normalized), ref(dtype, normalized)},
          {{"axis", axis}, {"epsilon", 1e-3}});
      // dscale and dbias sum thousands of rows in another order.
      double rtol = dtype == DType::F32 ? 1e-4 : 1e-10;
      expectSame(inst, {&x, &scale, &dy}, rtol, rtol);
    }
}

TEST(CUDAKernels, LayerNormNarrowResultAndGradient) {
  for (auto shape : std::vector<std::vector<int64_t>>{{6, 40}, {8192, 768}}) {
    SCOPED_TRACE(shapeString(shape));
    std::vector<int64_t> normalized{shape.back()};
    Tensor x = random(DType::F32, shape, -3, 5);
    Tensor scale = random(DType::F32, normalized, 0.5, 1.5);
    Tensor bias = random(DType::F32, normalized, -1, 1);
    // The f32 results may differ in the last bits, so a bf16 rounding may
    // land one ulp apart.
    expectSame(makeInstruction("layer_norm", {&x, &scale, &bias},
                               {ref(DType::BF16, shape)},
                               {{"axis", int64_t(1)}}),
               {&x, &scale, &bias}, 1.0 / 128, 1e-6);
    Tensor dy = random(DType::BF16, shape, -1, 1);
    expectSame(
        makeInstruction("layer_norm_backward", {&x, &scale, &dy},
                        {ref(DType::F32, shape), ref(DType::F32, normalized),
                         ref(DType::F32, normalized)},
                        {{"axis", int64_t(1)}}),
        {&x, &scale, &dy}, 1e-4, 1e-4);
  }
}

TEST(CUDAKernels, LayerNormBackwardAddsItsAddend) {
  // The fused form: an addend added to dx before it is stored, and a bf16
  // copy of the sum; against the CPU kernel.
  for (auto shape :
       std::vector<std::vector<int64_t>>{{6, 40}, {3, 2000}, {8192, 768}}) {
    SCOPED_TRACE(shapeString(shape));
    std::vector<int64_t> normalized{shape.back()};
    Tensor x = random(DType::F32, shape, -3, 5);
    Tensor scale = random(DType::F32, normalized, 0.5, 1.5);
    Tensor dy = random(DType::BF16, shape, -1, 1);
    Tensor addend = random(DType::F32, shape, -2, 2);
    std::vector<TensorRef> outputs{ref(DType::F32, shape),
                                   ref(DType::F32, normalized),
                                   ref(DType::F32, normalized)};
    expectSame(makeInstruction("layer_norm_backward",
                               {&x, &scale, &dy, &addend}, outputs,
                               {{"axis", int64_t(1)}}),
               {&x, &scale, &dy, &addend}, 1e-4, 1e-4);
    // The f32 sums may differ in their last bits, so a bf16 rounding may
    // land one ulp apart.
    outputs.push_back(ref(DType::BF16, shape));
    expectSame(makeInstruction("layer_norm_backward",
                               {&x, &scale, &dy, &addend}, outputs,
                               {{"axis", int64_t(1)}}),
               {&x, &scale, &dy, &addend}, 1.0 / 128, 1e-4);
  }
}

/// Runs `instruction` on the device and expects its error `code`: `value`
/// at `position` (a cross-entropy label's sample), outside its `bound`.
void expectDeviceError(DeviceError::Code code, const Instruction &instruction,
                       const std::vector<const Tensor *> &inputs, int64_t value,
                       int64_t position, int64_t bound) {
  std::vector<Tensor> gpu;
  DeviceError error{};
  runGPU(instruction, inputs, gpu, error);
  EXPECT_EQ(error.code, code);
  EXPECT_EQ(error.instruction, kInstruction);
  EXPECT_EQ(error.value, value);
  EXPECT_EQ(error.position, position);
  EXPECT_EQ(error.bound, bound);
}

void expectIndexOutOfRange(const Instruction &instruction,
                           const std::vector<const Tensor *> &inputs,
                           int64_t value, int64_t position, int64_t bound) {
  expectDeviceError(DeviceError::IndexOutOfRange, instruction, inputs, value,
                    position, bound);
}

void expectLabelOutOfRange(const Instruction &instruction,
                           const std::vector<const Tensor *> &inputs,
                           int64_t value, int64_t position, int64_t bound) {
  expectDeviceError(DeviceError::LabelOutOfRange, instruction, inputs, value,
                    position, bound);
}

TEST(CUDAKernels, CrossEntropy) {
  for (DType dtype : {DType::F32, DType::F64})
    for (DType labelType : {DType::I32, DType::I64})
      for (int64_t classes : {10, 3000})
        for (const char *reduction : {"mean", "sum", "none"}) {
          SCOPED_TRACE(std::string(reduction) + " " + dtypeName(dtype) +
                       " classes " + std::to_string(classes));
          Tensor logits = random(dtype, {3, 5, classes}, -4, 4);
          Tensor labels = random(labelType, {3, 5}, 0, double(classes));
          labels.set(3, -100);
          labels.set(11, -100);
          Attributes attrs{{"reduction", std::string(reduction)},
                           {"ignore_index", int64_t(-100)}};
          std::vector<int64_t> out;
          if (std::string(reduction) == "none")
            out = {3, 5};
          Instruction inst = makeInstruction(
              "cross_entropy", {&logits, &labels}, {ref(dtype, out)}, attrs);
          expectSame(inst, {&logits, &labels});
        }
}

// ignore_index a class that some labels have: those rows count neither in
// the sum nor in the mean's divisor (the tests above ignore -100, which no
// label in range has).
TEST(CUDAKernels, CrossEntropyIgnoresAClass) {
  for (const char *reduction : {"mean", "sum", "none"}) {
    SCOPED_TRACE(reduction);
    Tensor logits = random(DType::F32, {3, 5, 7}, -4, 4);
    Tensor labels = random(DType::I64, {3, 5}, 0, 7);
    for (int64_t i : {0, 4, 5, 9, 14})
      labels.set(i, 1);
    labels.set(2, 3);
    Attributes attrs{{"reduction", std::string(reduction)},
                     {"ignore_index", int64_t(1)}};
    std::vector<int64_t> out;
    if (std::string(reduction) == "none")
      out = {3, 5};
    Instruction inst = makeInstruction("cross_entropy", {&logits, &labels},
                                       {ref(DType::F32, out)}, attrs);
    expectSame(inst, {&logits, &labels});
  }
  Tensor logits = random(DType::F32, {3, 5, 7}, -4, 4);
  Tensor labels = random(DType::I64, {3, 5}, 0, 7);
  for (int64_t i : {0, 4, 5, 9, 14})
    labels.set(i, 1);
  Tensor scale = filled(DType::F32, {}, {0.25});
  Instruction backward = makeInstruction(
      "cross_entropy_backward", {&logits, &labels, &scale},
      {ref(DType::F32, {3, 5, 7})}, {{"ignore_index", int64_t(1)}});
  expectSame(backward, {&logits, &labels, &scale});
}

TEST(CUDAKernels, CrossEntropyEverythingIgnored) {
  Tensor logits = random(DType::F32, {4, 6});
  Tensor labels = filled(DType::I64, {4}, {2, 2, 2, 2});
  Instruction inst =
      makeInstruction("cross_entropy", {&logits, &labels},
                      {ref(DType::F32, {})}, {{"ignore_index", int64_t(2)}});
  expectSame(inst, {&logits, &labels}); // NaN on both
}

TEST(CUDAKernels, CrossEntropyLabelOutOfRange) {
  Tensor logits = random(DType::F32, {4, 6});
  Tensor labels = filled(DType::I32, {4}, {1, 0, 6, 5});
  expectLabelOutOfRange(makeInstruction("cross_entropy", {&logits, &labels},
                                        {ref(DType::F32, {})}),
                        {&logits, &labels}, 6, 2, 6);
}

TEST(CUDAKernels, CrossEntropyBF16Logits) {
  for (int64_t classes : {10, 50257}) {
    SCOPED_TRACE("classes " + std::to_string(classes));
    Tensor logits = random(DType::BF16, {4, classes}, -8, 8);
    Tensor labels = filled(DType::I64, {4}, {0, 3, -100, 9});
    for (const char *reduction : {"mean", "none"}) {
      std::vector<int64_t> out;
      if (std::string(reduction) == "none")
        out = {4};
      expectSame(makeInstruction("cross_entropy", {&logits, &labels},
                                 {ref(DType::F32, out)},
                                 {{"reduction", std::string(reduction)},
                                  {"ignore_index", int64_t(-100)}}),
                 {&logits, &labels});
    }
  }
}

TEST(CUDAKernels, CrossEntropyBackward) {
  // (logits, dlogits) pairs the kernels take: the loss dtype or the next
  // narrower one.
  const std::pair<DType, DType> types[] = {
      {DType::F32, DType::F32},   {DType::F32, DType::BF16},
      {DType::F64, DType::F64},   {DType::F64, DType::F32},
      {DType::BF16, DType::BF16}, {DType::BF16, DType::F32}};
  for (auto [dtype, result] : types)
    for (DType labelType : {DType::I32, DType::I64})
      for (int64_t classes : {10, 3000})
        for (bool perSample : {false, true}) {
          SCOPED_TRACE(std::string(dtypeName(dtype)) + " -> " +
                       dtypeName(result) + " classes " +
                       std::to_string(classes) +
                       (perSample ? " per-sample scale" : ""));
          Tensor logits = random(dtype, {3, 5, classes}, -4, 4);
          Tensor labels = random(labelType, {3, 5}, 0, double(classes));
          labels.set(3, -100);
          DType lossType = dtype == DType::F64 ? DType::F64 : DType::F32;
          Tensor scale = perSample ? random(lossType, {3, 5}, -2, 2)
                                   : filled(lossType, {}, {1.0 / 14});
          Instruction inst = makeInstruction("cross_entropy_backward",
                                             {&logits, &labels, &scale},
                                             {ref(result, {3, 5, classes})},
                                             {{"ignore_index", int64_t(-100)}});
          // Both compute in the loss dtype (exp may differ in the last
          // bits); a bf16 result may then round one ulp apart.
          double rtol = result == DType::BF16    ? 1.0 / 128
                        : lossType == DType::F32 ? 1e-5
                                                 : 1e-12;
          expectSame(inst, {&logits, &labels, &scale}, rtol,
                     lossType == DType::F32 ? 1e-8 : 1e-15);
        }
  // GPT-2's vocabulary: a block per row, bf16 in and out.
  Tensor logits = random(DType::BF16, {6, 50257}, -8, 8);
  Tensor labels = filled(DType::I64, {6}, {0, 50256, 7, 12345, 50000, 1});
  Tensor scale = filled(DType::F32, {}, {1.0 / 6});
  expectSame(makeInstruction("cross_entropy_backward",
                             {&logits, &labels, &scale},
                             {ref(DType::BF16, {6, 50257})}),
             {&logits, &labels, &scale}, 1.0 / 128, 1e-12);
}

/// Runs cross_entropy with a gradient output on both backends and compares
/// the loss with its dtype's tolerances and the gradient with
/// `gradRtol`/`gradAtol`.
void expectSameLossAndGradient(const Instruction &instruction,
                               const std::vector<const Tensor *> &inputs,
                               double gradRtol, double gradAtol) {
  std::vector<Tensor> cpu, gpu;
  ASSERT_EQ(runCPU(instruction, inputs, cpu), "");
  DeviceError error{};
  runGPU(instruction, inputs, gpu, error);
  EXPECT_EQ(error.code, DeviceError::None);
  ASSERT_EQ(gpu.size(), 2u);
  double rtol, atol;
  tolerances(cpu[0].dtype, rtol, atol);
  expectClose(gpu[0], cpu[0], rtol, atol, "loss");
  expectClose(gpu[1], cpu[1], gradRtol, gradAtol, "gradient");
}

TEST(CUDAKernels, CrossEntropyWithGradient) {
  // cross_entropy with the gradient's scale as a third input: the loss and
  // the gradient from one kernel. Rows of a warp (10 classes), of a block
  // cached in shared memory (3000, GPT-2's 50257 bf16 padded to 50264; 3001
  // bf16 rows start at odd addresses, so the copy takes the scalar path),
  // and of a block too long to cache (50257 f32 is 201 KB): padding holds
  // junk, one sample is ignored.
  struct Case {
    DType logits, gradient;
    int64_t classes, width;
  };
  const Case cases[] = {{DType::F32, DType::F32, 10, 10},
                        {DType::F64, DType::F32, 10, 12},
                        {DType::F32, DType::F32, 3000, 3000},
                        {DType::BF16, DType::BF16, 3001, 3001},
                        {DType::F64, DType::F64, 3000, 3003},
                        {DType::BF16, DType::BF16, 50257, 50264},
                        {DType::F32, DType::BF16, 50257, 50257}};
  for (const Case &c : cases)
    for (const char *reduction : {"mean", "none"}) {
      SCOPED_TRACE(std::string(dtypeName(c.logits)) + " -> " +
                   dtypeName(c.gradient) + " classes " +
                   std::to_string(c.classes) + " of " +
                   std::to_string(c.width) + " " + reduction);
      const int64_t rows = 5;
      Tensor logits = random(c.logits, {rows, c.width}, -8, 8);
      const double junk[] = {1e30, -INFINITY, NAN};
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t k = c.classes; k < c.width; ++k)
          logits.set(i * c.width + k, junk[(i + k) % 3]);
      Tensor labels =
          filled(DType::I64, {rows}, {0, double(c.classes - 1), -100, 7, 3});
      DType lossType = c.logits == DType::F64 ? DType::F64 : DType::F32;
      const bool none = std::string(reduction) == "none";
      Tensor scale = none ? random(lossType, {rows}, -2, 2)
                          : filled(lossType, {}, {1.0 / 4});
      std::vector<int64_t> lossShape;
      if (none)
        lossShape = {rows};
      Attributes attrs{{"classes", c.classes},
                       {"ignore_index", int64_t(-100)},
                       {"reduction", std::string(reduction)}};
      Instruction inst = makeInstruction(
          "cross_entropy", {&logits, &labels, &scale},
          {ref(lossType, lossShape), ref(c.gradient, {rows, c.width})}, attrs);
      const bool bf16 = c.gradient == DType::BF16;
      expectSameLossAndGradient(inst, {&logits, &labels, &scale},
                                bf16                     ? 1.0 / 128
                                : lossType == DType::F32 ? 1e-5
                                                         : 1e-12,
                                lossType == DType::F32 ? 1e-8 : 1e-15);
    }
  // An out-of-range label is reported as the loss alone reports it.
  Tensor logits = random(DType::BF16, {3, 2000});
  Tensor labels = filled(DType::I64, {3}, {1, 2000, 5});
  Tensor scale = filled(DType::F32, {}, {1});
  expectLabelOutOfRange(
      makeInstruction("cross_entropy", {&logits, &labels, &scale},
                      {ref(DType::F32, {}), ref(DType::BF16, {3, 2000})}),
      {&logits, &labels, &scale}, 2000, 1, 2000);
}

TEST(CUDAKernels, CrossEntropyBackwardLabelOutOfRange) {
  Tensor logits = random(DType::F32, {4, 6});
  Tensor labels = filled(DType::I32, {4}, {1, 0, 6, 5});
  Tensor scale = filled(DType::F32, {}, {1});
  expectLabelOutOfRange(makeInstruction("cross_entropy_backward",
                                        {&logits, &labels, &scale},
                                        {ref(DType::F32, {4, 6})}),
                        {&logits, &labels, &scale}, 6, 2, 6);
}

TEST(CUDAKernels, CrossEntropySpecialValuesInOnePass) {
  // The CUDA kernels find a row's max and sum in one read, rescaling each
  // lane's sum as its max grows; the CPU's two passes are the reference.
  // Rows: increasing (a rescale at every entry), decreasing, one NaN, one
  // +inf, some -inf, all -inf; for a warp per row and a block per row.
  for (int64_t classes : {40, 3000}) {
    SCOPED_TRACE("classes " + std::to_string(classes));
    const int64_t rows = 6;
    Tensor logits(DType::F32, {rows, classes});
    for (int64_t c = 0; c < classes; ++c) {
      double x = double(c) / 16;
      logits.set(0 * classes + c, x);
      logits.set(1 * classes + c, -x);
      logits.set(2 * classes + c, c == 7 ? NAN : x / 4);
      logits.set(3 * classes + c, c == 9 ? INFINITY : -x / 4);
      logits.set(4 * classes + c, c % 3 == 0 ? -INFINITY : std::sin(x));
      logits.set(5 * classes + c, -INFINITY);
    }
    Tensor labels =
        filled(DType::I64, {rows}, {double(classes - 1), 0, 1, 2, 4, 3});
    expectSame(makeInstruction("cross_entropy", {&logits, &labels},
                               {ref(DType::F32, {rows})},
                               {{"reduction", std::string("none")}}),
               {&logits, &labels});
    Tensor scale = filled(DType::F32, {}, {0.5});
    expectSame(makeInstruction("cross_entropy_backward",
                               {&logits, &labels, &scale},
                               {ref(DType::F32, {rows, classes})}),
               {&logits, &labels, &scale});
  }
}

TEST(CUDAKernels, CrossEntropyPaddedClasses) {
  // Rows of `width` logits of which the first `classes` count (what
  // loom-pad-classes makes): the padding holds values that would change
  // any softmax they took part in; both backends leave them out and give
  // the padding a zero gradient. The CPU test compares with unpadded rows.
  const std::pair<int64_t, int64_t> shapes[] = {{13, 16}, {50257, 50264}};
  for (auto [classes, width] : shapes)
    for (DType dtype : {DType::F32, DType::BF16}) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " classes " +
                   std::to_string(classes));
      Tensor logits = random(dtype, {5, width}, -8, 8);
      const double junk[] = {1e30, -INFINITY, NAN};
      for (int64_t i = 0; i < 5; ++i)
        for (int64_t c = classes; c < width; ++c)
          logits.set(i * width + c, junk[(i + c) % 3]);
      Tensor labels =
          filled(DType::I64, {5}, {0, double(classes - 1), -100, 7, 3});
      Attributes attrs{{"classes", classes}, {"ignore_index", int64_t(-100)}};
      for (const char *reduction : {"mean", "none"}) {
        Attributes forward = attrs;
        forward["reduction"] = std::string(reduction);
        std::vector<int64_t> out;
        if (std::string(reduction) == "none")
          out = {5};
        expectSame(makeInstruction("cross_entropy", {&logits, &labels},
                                   {ref(DType::F32, out)}, forward),
                   {&logits, &labels});
      }
      Tensor scale = filled(DType::F32, {}, {0.25});
      expectSame(makeInstruction("cross_entropy_backward",
                                 {&logits, &labels, &scale},
                                 {ref(DType::BF16, {5, width})}, attrs),
                 {&logits, &labels, &scale}, 1.0 / 128, 1e-12);
    }
  // A label in the padding is out of range: the bound is `classes`.
  Tensor logits = random(DType::F32, {2, 16});
  Tensor labels = filled(DType::I64, {2}, {1, 13});
  expectLabelOutOfRange(makeInstruction("cross_entropy", {&logits, &labels},
                                        {ref(DType::F32, {})},
                                        {{"classes", int64_t(13)}}),
                        {&logits, &labels}, 13, 1, 13);
}

//===----------------------------------------------------------------------===//
// gather, scatter_add
//===----------------------------------------------------------------------===//

TEST(CUDAKernels, Gather) {
  for (DType dtype :
       {DType::F32, DType::F64, DType::I1, DType::BF16, DType::I64})
    for (DType indexType : {DType::I32, DType::I64}) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + dtypeName(indexType));
      Tensor x = randomBytes(dtype, {10, 6});
      Tensor indices =
          filled(indexType, {3, 4}, {0, 9, -1, -10, 3, 3, 5, 1, 2, 8, -3, 4});
      expectSame(
          makeInstruction("gather", {&x, &indices}, {ref(dtype, {3, 4, 6})}),
          {&x, &indices});
      Tensor y = randomBytes(dtype, {4, 10, 3});
      expectSame(makeInstruction("gather", {&y, &indices},
                                 {ref(dtype, {4, 3, 4, 3})},
                                 {{"axis", int64_t(1)}}),
                 {&y, &indices});
      // The embedding shape: wide rows copied as 16-byte vectors.
      Tensor table = randomBytes(dtype, {50, 64});
      expectSame(makeInstruction("gather", {&table, &indices},
                                 {ref(dtype, {3, 4, 64})}),
                 {&table, &indices});
    }
}

TEST(CUDAKernels, GatherIndexOutOfRange) {
  Tensor x = random(DType::F32, {10, 6});
  Tensor indices = filled(DType::I64, {5}, {1, 2, 10, -11, 3});
  Instruction inst =
      makeInstruction("gather", {&x, &indices}, {ref(DType::F32, {5, 6})});
  std::vector<Tensor> gpu;
  DeviceError error{};
  runGPU(inst, {&x, &indices}, gpu, error);
  EXPECT_EQ(error.code, DeviceError::IndexOutOfRange);
  EXPECT_EQ(error.instruction, kInstruction);
  // Either bad index may win the race; each must be reported consistently.
  if (error.position == 2)
    EXPECT_EQ(error.value, 10);
  else {
    EXPECT_EQ(error.position, 3);
    EXPECT_EQ(error.value, -11);
  }
  EXPECT_EQ(error.bound, 10);
  // The other rows are gathered; the bad ones are zeros.
  for (int64_t c = 0; c < 6; ++c) {
    EXPECT_EQ(gpu[0].get(0 * 6 + c), x.get(1 * 6 + c));
    EXPECT_EQ(gpu[0].get(2 * 6 + c), 0.0);
    EXPECT_EQ(gpu[0].get(4 * 6 + c), x.get(3 * 6 + c));
  }
}

TEST(CUDAKernels, ScatterAdd) {
  // The CUDA kernel sums each row's updates in index order, as the CPU
  // does: the same bytes, run after run.
  for (DType dtype : {DType::F32, DType::F64})
    for (DType indexType : {DType::I32, DType::I64}) {
      Tensor updates = random(dtype, {2, 6, 5});
      Tensor indices =
          filled(indexType, {2, 6}, {0, 3, 3, -1, 2, 0, 6, 6, 6, -7, 1, 0});
      Instruction inst = makeInstruction("scatter_add", {&updates, &indices},
                                         {ref(dtype, {7, 5})});
      expectSame(inst, {&updates, &indices}, 0, 0);
    }
  // Many updates of few rows, as an embedding's gradient has for frequent
  // tokens (one segment of thousands), and an embedding-like one: counts
  // that span several sort tiles, one not a power of two.
  struct Case {
    int64_t count, rows, width;
  };
  for (Case c : {Case{8192, 3, 4}, Case{3000, 500, 9}, Case{1025, 1, 3}})
    for (DType dtype : {DType::F32, DType::F64}) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " " +
                   std::to_string(c.count) + " into " + std::to_string(c.rows));
      Tensor updates = random(dtype, {c.count, c.width});
      Tensor indices = random(DType::I64, {c.count}, -c.rows, c.rows);
      Instruction inst = makeInstruction("scatter_add", {&updates, &indices},
                                         {ref(dtype, {c.rows, c.width})});
      expectSame(inst, {&updates, &indices}, 0, 0);
      std::vector<Tensor> first, second;
      DeviceError error{};
      runGPU(inst, {&updates, &indices}, first, error);
      runGPU(inst, {&updates, &indices}, second, error);
      EXPECT_EQ(first[0].bytes, second[0].bytes);
    }
  Tensor updates = random(DType::F32, {3, 4});
  Tensor indices = filled(DType::I64, {3}, {0, 4, 1});
  expectIndexOutOfRange(makeInstruction("scatter_add", {&updates, &indices},
                                        {ref(DType::F32, {4, 4})}),
                        {&updates, &indices}, 4, 1, 4);
}

//===----------------------------------------------------------------------===//
// transpose, slice, concat, split, copy
//===----------------------------------------------------------------------===//

TEST(CUDAKernels, Transpose) {
  struct Case {
    std::vector<int64_t> shape, permutation;
  };
  const Case cases[] = {
      {{2, 3, 4}, {2, 0, 1}},       {{2, 3, 4}, {1, 0, 2}}, // rows copied
      {{64, 33}, {1, 0}},           {{3, 70, 40}, {0, 2, 1}},
      {{2, 3, 4, 5}, {3, 1, 0, 2}}, {{2, 1, 4}, {1, 0, 2}}, // a copy
      {{5, 6, 7, 8}, {0, 1, 3, 2}},
  };
  for (DType dtype : {DType::F32, DType::F64, DType::I1, DType::BF16})
    for (const Case &c : cases) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + shapeString(c.shape) +
                   " " + shapeString(c.permutation));
      Tensor x = randomBytes(dtype, c.shape);
      std::vector<int64_t> out;
      for (int64_t p : c.permutation)
        out.push_back(c.shape[size_t(p)]);
      expectSame(makeInstruction("transpose", {&x}, {ref(dtype, out)},
                                 {{"permutation", c.permutation}}),
                 {&x});
    }
}

TEST(CUDAKernels, Slice) {
  struct Case {
    std::vector<int64_t> shape, starts, strides, out;
  };
  const Case cases[] = {
      {{10, 12}, {1, 2}, {2, 3}, {4, 3}},
      {{10, 12}, {9, 11}, {-1, -2}, {5, 6}},
      {{8, 64}, {1, 16}, {1, 1}, {4, 32}}, // contiguous rows, widened
      {{3, 4, 5}, {0, 1, 0}, {1, 1, 1}, {3, 2, 5}},
      {{5}, {4}, {-1}, {5}},
      {{6, 4}, {0, 0}, {1, 1}, {0, 4}}, // empty
  };
  for (DType dtype : {DType::F32, DType::I1, DType::F64, DType::BF16})
    for (const Case &c : cases) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + shapeString(c.shape) +
                   " starts " + shapeString(c.starts));
      Tensor x = randomBytes(dtype, c.shape);
      expectSame(
          makeInstruction("slice", {&x}, {ref(dtype, c.out)},
                          {{"starts", c.starts}, {"strides", c.strides}}),
          {&x});
    }
}

TEST(CUDAKernels, ConcatSplitCopy) {
  for (DType dtype : {DType::F32, DType::I1, DType::F64, DType::BF16})
    for (int64_t axis : {0, 1, -1}) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " axis " +
                   std::to_string(axis));
      std::vector<int64_t> a = {4, 3, 8}, b = {4, 3, 8}, whole = {4, 3, 8};
      size_t d = size_t(axis < 0 ? axis + 3 : axis);
      a[d] = 1;
      b[d] = 5;
      whole[d] = 1 + 5 + 4;
      std::vector<int64_t> c = whole;
      c[d] = 4;
      Tensor x = randomBytes(dtype, a), y = randomBytes(dtype, b),
             z = randomBytes(dtype, c);
      expectSame(makeInstruction("concat", {&x, &y, &z}, {ref(dtype, whole)},
                                 {{"axis", axis}}),
                 {&x, &y, &z});
      Tensor w = randomBytes(dtype, whole);
      expectSame(makeInstruction("split", {&w},
                                 {ref(dtype, a), ref(dtype, b), ref(dtype, c)},
                                 {{"axis", axis}}),
                 {&w});
    }
  Tensor x = randomBytes(DType::I64, {3, 4});
  expectSame(makeInstruction("copy", {&x}, {ref(DType::I64, {12})}), {&x});
}

//===----------------------------------------------------------------------===//
// dropout
//===----------------------------------------------------------------------===//

TEST(CUDAKernels, DropoutMatchesTheCPUBitForBit) {
  for (DType dtype : {DType::F32, DType::F64})
    for (auto [ratio, seed] : std::vector<std::pair<double, int64_t>>{
             {0.3, 42}, {0.5, -5}, {0.0, 7}, {0.9, 123456789}}) {
      SCOPED_TRACE(std::to_string(ratio));
      Tensor x = random(dtype, {33, 71});
      Instruction inst = makeInstruction(
          "dropout", {&x}, {ref(dtype, {33, 71}), ref(DType::I1, {33, 71})},
          {{"ratio", ratio}, {"seed", seed}});
      expectSame(inst, {&x}, 0, 0);
      // A block of a larger tensor at a training step, a later microbatch.
      Tensor step(DType::F64, {}), offsets(DType::I64, {2});
      step.set(0, 12);
      offsets.set(0, 33);
      offsets.set(1, 71 * 2);
      Instruction block =
          makeInstruction("dropout", {&x, &step, &offsets},
                          {ref(dtype, {33, 71}), ref(DType::I1, {33, 71})},
                          {{"ratio", ratio},
                           {"seed", seed},
                           {"index_base", int64_t(1000)},
                           {"global_shape", std::vector<int64_t>{66, 71 * 4}}});
      expectSame(block, {&x, &step, &offsets}, 0, 0);
    }
}

//===----------------------------------------------------------------------===//
// attention, attention_backward
//===----------------------------------------------------------------------===//

/// |a - e| <= rtol |e| + atolFraction * (the largest finite |e|): gradients
/// sum terms of both signs, so small elements carry absolute errors.
void expectCloseScaled(const Tensor &actual, const Tensor &expected,
                       double rtol, double atolFraction,
                       const std::string &what) {
  double largest = 1e-30;
  for (int64_t i = 0; i < expected.size(); ++i)
    if (std::isfinite(expected.get(i)))
      largest = std::max(largest, std::abs(expected.get(i)));
  expectClose(actual, expected, rtol, atolFraction * largest, what);
}

enum class AttentionMask {
  None,
  /// Key j is masked for query i when j > i + (Sk - Sq), [1, 1, Sq, Sk].
  Causal,
  /// Random, [lead0, 1, Sq, Sk]; query 0 fully masked.
  Random,
  /// Keys [64, 128), [192, 256), ... masked for every query, [1, 1, Sq, Sk]:
  /// the flash kernels' odd 64-key tiles are skipped between computed ones.
  OddKeyTiles,
  /// Queries [0, 64) see no key, the others are causal, [1, 1, Sq, Sk]: a
  /// whole query tile fully masked, which a finite mask_value still weighs
  /// and an infinite one lets the kernels skip (the forward's blocks are 64
  /// queries from head dim 128 on, the backward's dq blocks always).
  MaskedQueryTile,
};

struct AttentionTest {
  DType dtype;
  std::vector<int64_t> lead;
  int64_t sq, sk, d, dv;
  AttentionMask mask;
  double maskValue;
  bool misalign = false;
  /// Operands [lead[:-1], S, H = lead.back(), D] (seq_major=1); a random
  /// mask then differs from head to head.
  bool seqMajor = false;
  /// q, k and v packed into one [lead[:-1], S, 3, H, D] operand, and the
  /// gradients into one result (packed_qkv=1; seq-major, Sq = Sk, D = Dv).
  bool packed = false;

  /// An operand with `rows` rows of `cols` (lse: none) in the
  /// test's layout.
  std::vector<int64_t> shape(int64_t rows, std::optional<int64_t> cols) const {
    std::vector<int64_t> dims = lead;
    if (seqMajor)
      dims.insert(dims.end() - 1, rows);
    else
      dims.push_back(rows);
    if (cols)
      dims.push_back(*cols);
    return dims;
  }
};

std::vector<int64_t> withDims(std::vector<int64_t> dims,
                              std::initializer_list<int64_t> tail) {
  dims.insert(dims.end(), tail.begin(), tail.end());
  return dims;
}

/// attention on both backends, then attention_backward on both from the
/// CPU's forward results (out and lse; the kernels compute
/// delta = rowsum(dout * out), the GPU's in the launch workspace).
void testAttention(const AttentionTest &c) {
  SCOPED_TRACE(
      std::string(dtypeName(c.dtype)) + " lead " + shapeString(c.lead) +
      " Sq " + std::to_string(c.sq) + " Sk " + std::to_string(c.sk) + " D " +
      std::to_string(c.d) + " Dv " + std::to_string(c.dv) + " mask " +
      std::to_string(int(c.mask)) + " mask_value " +
      std::to_string(c.maskValue) + (c.misalign ? " misaligned" : "") +
      (c.seqMajor ? " seq_major" : "") + (c.packed ? " packed_qkv" : ""));
  const DType stat = c.dtype == DType::F64 ? DType::F64 : DType::F32;
  Tensor q = random(c.dtype, c.shape(c.sq, c.d));
  Tensor k = random(c.dtype, c.shape(c.sk, c.d));
  Tensor v = random(c.dtype, c.shape(c.sk, c.dv));
  Tensor mask;
  if (c.mask != AttentionMask::None) {
    // Head-major in either layout: [lead..., Sq, Sk].
    std::vector<int64_t> shape(c.lead.size(), 1);
    if (c.mask == AttentionMask::Random && c.seqMajor)
      shape = c.lead;
    else if (c.mask == AttentionMask::Random && !shape.empty())
      shape[0] = c.lead[0];
    mask = random(DType::I1, withDims(shape, {c.sq, c.sk}), 0, 2);
    for (int64_t i = 0; i < mask.size(); ++i) {
      int64_t row = (i / c.sk) % c.sq, col = i % c.sk;
      if (c.mask == AttentionMask::Causal)
        mask.set(i, col > row + (c.sk - c.sq));
      else if (c.mask == AttentionMask::OddKeyTiles)
        mask.set(i, col / 64 % 2);
      else if (c.mask == AttentionMask::MaskedQueryTile)
        mask.set(i, row < 64 || col > row + (c.sk - c.sq));
      else if (row == 0)
        mask.set(i, 1);
    }
  }
  Attributes attrs{{"scale", 1 / std::sqrt(double(c.d))}};
  if (!std::isinf(c.maskValue))
    attrs["mask_value"] = c.maskValue;
  if (c.seqMajor)
    attrs["seq_major"] = int64_t(1);
  if (c.packed)
    attrs["packed_qkv"] = int64_t(1);
  const Tensor qkv = c.packed ? packQkv(q, k, v) : Tensor();
  const bool bf16 = c.dtype == DType::BF16;
  const double rtol = bf16 ? 2e-2 : c.dtype == DType::F32 ? 1e-4 : 1e-10;
  const double atol = bf16 ? 3e-2 : c.dtype == DType::F32 ? 1e-4 : 1e-10;
  const double lseTol = c.dtype == DType::F64 ? 1e-10 : 1e-4;

  std::vector<const Tensor *> inputs{&q, &k, &v};
  if (c.packed)
    inputs = {&qkv};
  if (c.mask != AttentionMask::None)
    inputs.push_back(&mask);
  Instruction forward =
      makeInstruction("attention", inputs,
                      {ref(c.dtype, c.shape(c.sq, c.dv)),
                       ref(stat, c.shape(c.sq, std::nullopt))},
                      attrs);
  std::vector<Tensor> cpu, gpu;
  ASSERT_EQ(runCPU(forward, inputs, cpu), "");
  DeviceError error{};
  runGPU(forward, inputs, gpu, error, false, false, c.misalign);
  EXPECT_EQ(error.code, DeviceError::None);
  ASSERT_EQ(gpu.size(), 2u);
  expectCloseScaled(gpu[0], cpu[0], rtol, atol, "out");
  expectClose(gpu[1], cpu[1], lseTol, lseTol, "lse");

  Tensor dout = random(c.dtype, c.shape(c.sq, c.dv));
  std::vector<const Tensor *> bwdInputs{&q, &k, &v, &dout, &cpu[1], &cpu[0]};
  std::vector<TensorRef> grads{q.ref(), k.ref(), v.ref()};
  if (c.packed) {
    bwdInputs = {&qkv, &dout, &cpu[1], &cpu[0]};
    grads = {qkv.ref()};
  }
  if (c.mask != AttentionMask::None)
    bwdInputs.push_back(&mask);
  Instruction backward =
      makeInstruction("attention_backward", bwdInputs, grads, attrs);
  std::vector<Tensor> cpuGrads, gpuGrads;
  ASSERT_EQ(runCPU(backward, bwdInputs, cpuGrads), "");
  runGPU(backward, bwdInputs, gpuGrads, error, false, false, c.misalign);
  EXPECT_EQ(error.code, DeviceError::None);
  ASSERT_EQ(gpuGrads.size(), grads.size());
  const char *names[] = {"dq", "dk", "dv"};
  for (size_t i = 0; i < grads.size(); ++i)
    expectCloseScaled(gpuGrads[i], cpuGrads[i], rtol, atol,
                      c.packed ? "dqkv" : names[i]);
}

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

TEST(CUDAKernels, AttentionFlashBF16) {
  // bf16 with head dims that are multiples of 16 up to 128: the
  // tensor-core kernels, full and partial tiles, skipped tiles.
  using M = AttentionMask;
  // A table, one case per row: clang-format would give each field a line.
  // clang-format off
  for (const AttentionTest &c : std::vector<AttentionTest>{
           // dtype      lead    sq   sk   d    dv   mask               maskValue
           {DType::BF16, {2, 3}, 128, 128, 64,  64,  M::None,            kNegInf},
           {DType::BF16, {2, 3}, 128, 128, 64,  64,  M::Causal,          kNegInf},
           {DType::BF16, {2, 3}, 128, 128, 64,  64,  M::Causal,          -1e4},
           {DType::BF16, {2, 2}, 70,  133, 64,  64,  M::None,            kNegInf},
           {DType::BF16, {2, 2}, 70,  133, 64,  64,  M::Causal,          kNegInf},
           {DType::BF16, {2, 2}, 133, 70,  64,  64,  M::Causal,          -1e4},
           {DType::BF16, {3, 2}, 70,  133, 32,  64,  M::Random,          kNegInf},
           {DType::BF16, {3, 2}, 33,  70,  16,  48,  M::Random,          -1e4},
           {DType::BF16, {2},    150, 150, 128, 128, M::Causal,          kNegInf},
           {DType::BF16, {},     5,   3,   16,  16,  M::None,            kNegInf},
           {DType::BF16, {2, 2}, 128, 128, 64,  64,  M::MaskedQueryTile, -1e4},
           {DType::BF16, {2, 2}, 128, 128, 64,  64,  M::MaskedQueryTile, kNegInf},
           {DType::BF16, {2},    128, 128, 128, 128, M::MaskedQueryTile, kNegInf},
       })
    testAttention(c);
  // clang-format on
}

TEST(CUDAKernels, AttentionFlashBF16LongWalks) {
  // Walks of many tiles through the kernels' double buffers: the next
  // tile's operands (and the one after's mask) in flight while a tile is
  // computed on, skipped tiles at the end (forward, dq), at the start (dk,
  // dv) and between computed ones, partial last tiles, masks read 16 bytes
  // (Sk 320, 400) and 1 byte (Sk 330) at a time, at head dims 64 and 128.
  for (const AttentionTest &c : std::vector<AttentionTest>{
           {DType::BF16,
            {1, 2},
            320,
            320,
            64,
            64,
            AttentionMask::Causal,
            kNegInf},
           {DType::BF16,
            {1, 2},
            200,
            330,
            64,
            32,
            AttentionMask::OddKeyTiles,
            kNegInf},
           {DType::BF16,
            {2},
            330,
            330,
            128,
            128,
            AttentionMask::Causal,
            kNegInf},
           {DType::BF16,
            {2},
            150,
            400,
            128,
            64,
            AttentionMask::OddKeyTiles,
            kNegInf},
           {DType::BF16,
            {1, 2},
            200,
            330,
            64,
            64,
            AttentionMask::None,
            kNegInf},
           // A finite mask_value: masked tiles are computed, none skipped.
           {DType::BF16, {1, 2}, 200, 330, 64, 64, AttentionMask::Causal, -1e4},
       })
    testAttention(c);
}

TEST(CUDAKernels, AttentionFlashBF16Unaligned) {
  // Operands 2 bytes past 16-byte boundaries: element-wise tile loads.
  testAttention({DType::BF16,
                 {2, 2},
                 70,
                 133,
                 64,
                 64,
                 AttentionMask::Causal,
                 kNegInf,
                 true});
}

TEST(CUDAKernels, AttentionSeqMajor) {
  // [B, S, H, D] operands, as the projections write them: the flash
  // kernels load rows H * D apart, the generic ones index them so. The CPU
  // kernels (compared there with the head-major layout) are the reference.
  for (AttentionTest c : std::vector<AttentionTest>{
           {DType::BF16,
            {2, 3},
            128,
            128,
            64,
            64,
            AttentionMask::Causal,
            kNegInf},
           {DType::BF16, {2, 4}, 70, 133, 64, 32, AttentionMask::Random, -1e4},
           {DType::BF16, {3}, 33, 33, 16, 16, AttentionMask::None, kNegInf},
           {DType::BF16,
            {2, 3},
            70,
            70,
            40,
            40,
            AttentionMask::Causal,
            kNegInf},
           {DType::F32, {2, 4}, 40, 70, 16, 24, AttentionMask::Random, kNegInf},
           {DType::F64, {2, 2}, 37, 53, 24, 8, AttentionMask::Causal, -1e4},
       }) {
    c.seqMajor = true;
    testAttention(c);
  }
  AttentionTest misaligned{DType::BF16,           {2, 3},  70,   70,  64, 64,
                           AttentionMask::Causal, kNegInf, true, true};
  testAttention(misaligned);
}

TEST(CUDAKernels, AttentionPackedQkv) {
  // q, k and v read from one [B, S, 3, H, D] tensor (rows 3 H D apart),
  // and dq, dk, dv written into one: the flash kernels (bf16, head dims
  // multiples of 16, 16-byte and unaligned) and the generic ones.
  for (AttentionTest c : std::vector<AttentionTest>{
           {DType::BF16,
            {2, 3},
            128,
            128,
            64,
            64,
            AttentionMask::Causal,
            kNegInf},
           {DType::BF16, {2, 2}, 70, 70, 32, 32, AttentionMask::Random, -1e4},
           {DType::BF16, {3}, 33, 33, 16, 16, AttentionMask::None, kNegInf},
           {DType::BF16,
            {2, 3},
            70,
            70,
            40,
            40,
            AttentionMask::Causal,
            kNegInf},
           {DType::F32, {2, 4}, 40, 40, 16, 16, AttentionMask::Random, kNegInf},
           {DType::F64, {2, 2}, 37, 37, 24, 24, AttentionMask::Causal, -1e4},
       }) {
    c.seqMajor = true;
    c.packed = true;
    testAttention(c);
  }
  AttentionTest misaligned{DType::BF16,           {2, 3},  70,   70,   64,  64,
                           AttentionMask::Causal, kNegInf, true, true, true};
  testAttention(misaligned);
}

TEST(CUDAKernels, AttentionGeneric) {
  // bf16 with other head dims, f32 and f64: the row kernels.
  for (const AttentionTest &c : std::vector<AttentionTest>{
           {DType::BF16, {2, 3}, 70, 70, 40, 40, AttentionMask::None, kNegInf},
           {DType::BF16,
            {2, 3},
            70,
            133,
            40,
            24,
            AttentionMask::Causal,
            kNegInf},
           {DType::BF16, {2, 3}, 64, 64, 40, 40, AttentionMask::Causal, -1e4},
           {DType::F32,
            {2, 3},
            128,
            128,
            64,
            64,
            AttentionMask::Causal,
            kNegInf},
           {DType::F32, {2, 2}, 33, 150, 64, 32, AttentionMask::None, kNegInf},
           {DType::F32, {3, 2}, 40, 70, 16, 16, AttentionMask::Random, -1e4},
           {DType::F32, {3, 2}, 40, 70, 16, 16, AttentionMask::Random, kNegInf},
           {DType::F64, {2}, 37, 53, 24, 8, AttentionMask::Causal, kNegInf},
       })
    testAttention(c);
}

} // namespace

int main(int argc, char **argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("SKIPPED: no CUDA device\n");
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  Device &d = device();
  cudaDeviceProp properties;
  if (cudaSetDevice(0) != cudaSuccess ||
      cudaGetDeviceProperties(&properties, 0) != cudaSuccess ||
      cudaStreamCreate(&d.stream) != cudaSuccess ||
      cublasLtCreate(&d.lt) != CUBLAS_STATUS_SUCCESS ||
      cudaMalloc(&d.workspace, d.workspaceBytes) != cudaSuccess ||
      cudaMalloc(&d.error, sizeof(DeviceError)) != cudaSuccess) {
    std::fprintf(stderr, "setting up the CUDA device failed\n");
    return 1;
  }
  d.computeCapability = properties.major * 10 + properties.minor;
  d.multiprocessors = properties.multiProcessorCount;
  int result = RUN_ALL_TESTS();
  cublasLtDestroy(d.lt);
  cudaFree(d.workspace);
  cudaFree(d.error);
  cudaStreamDestroy(d.stream);
  return result;
}
