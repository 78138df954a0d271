//===- CPUKernelsTest.cpp - The CPU backend's kernels ---------------------===//
//
// Every kernel against a naive reference loop written here (random data,
// broadcasting, transposes, shared batches, odd sizes, scalars), and every
// kernel's check rejecting malformed instructions with a specific message.
//
//===----------------------------------------------------------------------===//

#include "TestTensors.h"
#include "loom/Runtime/Kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <tuple>

using namespace loomrt;
using namespace loomrt::test;

namespace {

//===----------------------------------------------------------------------===//
// Test tensors and running kernels
//===----------------------------------------------------------------------===//

std::mt19937 &rng() {
  static std::mt19937 generator(1234);
  return generator;
}

/// Random values in [lo, hi) (integers for integer dtypes, 0/1 for i1).
Tensor random(DType dtype, std::vector<int64_t> shape, double lo = -2,
              double hi = 2) {
  return randomTensor(rng(), dtype, std::move(shape), lo, hi);
}

Tensor filled(DType dtype, std::vector<int64_t> shape,
              const std::vector<double> &values) {
  Tensor t(dtype, std::move(shape));
  for (int64_t i = 0; i < t.size(); ++i)
    t.set(i, values[size_t(i)]);
  return t;
}

Instruction makeKernel(const std::string &kernel,
                       const std::vector<const Tensor *> &inputs,
                       const std::vector<Tensor> &outputs,
                       Attributes attrs = {}) {
  Instruction instruction;
  instruction.kernel = kernel;
  for (const Tensor *t : inputs)
    instruction.inputs.push_back(t->ref());
  for (const Tensor &t : outputs)
    instruction.outputs.push_back(t.ref());
  instruction.attrs = std::move(attrs);
  return instruction;
}

/// Checks `instruction` (expecting success) and runs it on `inputs`, writing
/// `outputs`; returns the runtime error, empty when none.
std::string runKernel(const Instruction &instruction,
                      const std::vector<const Tensor *> &inputs,
                      std::vector<Tensor> &outputs) {
  const KernelInfo *kernel = lookupCPUKernel(instruction.kernel);
  EXPECT_NE(kernel, nullptr) << instruction.kernel;
  if (!kernel)
    return "no kernel";
  Status status = kernel->check(instruction);
  EXPECT_TRUE(status.isOk()) << instruction.kernel << ": " << status.message();
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

/// Builds, checks and runs a one-output kernel.
Tensor run1(const std::string &name, const std::vector<const Tensor *> &inputs,
            DType dtype, std::vector<int64_t> shape, Attributes attrs = {}) {
  std::vector<Tensor> outputs{Tensor(dtype, std::move(shape))};
  Instruction instruction = makeKernel(name, inputs, outputs, std::move(attrs));
  std::string error = runKernel(instruction, inputs, outputs);
  EXPECT_EQ(error, "");
  return outputs[0];
}

/// The check's message for `instruction` (empty when it passes).
std::string checkMessage(const Instruction &instruction) {
  const KernelInfo *kernel = lookupCPUKernel(instruction.kernel);
  if (!kernel)
    return "no kernel " + instruction.kernel;
  Status status = kernel->check(instruction);
  return status.isOk() ? "" : status.message();
}

#define EXPECT_REJECTED(instruction, fragment)                                 \
  do {                                                                         \
    std::string message = checkMessage(instruction);                           \
    EXPECT_NE(message, "") << "accepted, expected: " << (fragment);            \
    EXPECT_NE(message.find(fragment), std::string::npos)                       \
        << "message: " << message;                                             \
  } while (0)

/// Compares element by element with |a - b| <= atol + rtol * |b|; NaNs must
/// match.
void expectClose(const Tensor &actual, const std::vector<double> &expected,
                 double rtol = 1e-5, double atol = 1e-6) {
  ASSERT_EQ(actual.size(), int64_t(expected.size()));
  int failures = 0;
  for (int64_t i = 0; i < actual.size() && failures < 10; ++i) {
    double a = actual.get(i), e = expected[size_t(i)];
    bool ok = std::isnan(e)   ? std::isnan(a)
              : std::isinf(e) ? a == e
                              : std::abs(a - e) <= atol + rtol * std::abs(e);
    if (!ok) {
      ++failures;
      ADD_FAILURE() << "element " << i << ": got " << a << ", expected " << e;
    }
  }
}

/// The largest finite magnitude in `values` (at least 1e-30).
double largest(const std::vector<double> &values) {
  double max = 1e-30;
  for (double x : values)
    if (std::isfinite(x))
      max = std::max(max, std::abs(x));
  return max;
}

/// Compares with a relative tolerance and an absolute one relative to the
/// largest expected magnitude (gradients sum terms of both signs).
void expectCloseScaled(const Tensor &actual,
                       const std::vector<double> &expected, double rtol,
                       double atolFraction) {
  expectClose(actual, expected, rtol, atolFraction * largest(expected));
}

std::vector<double> values(const Tensor &t) {
  std::vector<double> result(size_t(t.size()));
  for (int64_t i = 0; i < t.size(); ++i)
    result[size_t(i)] = t.get(i);
  return result;
}

/// Multi-index of linear index `i` in `shape`.
std::vector<int64_t> unravel(int64_t i, const std::vector<int64_t> &shape) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = i % shape[d];
    i /= shape[d];
  }
  return index;
}

int64_t ravel(const std::vector<int64_t> &index,
              const std::vector<int64_t> &shape) {
  int64_t i = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    i = i * shape[d] + index[d];
  return i;
}

/// The element of `t` that broadcasts to output index `index`.
double broadcastGet(const Tensor &t, const std::vector<int64_t> &index) {
  size_t offset = index.size() - t.shape.size();
  std::vector<int64_t> own(t.shape.size());
  for (size_t d = 0; d < t.shape.size(); ++d)
    own[d] = t.shape[d] == 1 ? 0 : index[offset + d];
  return t.get(ravel(own, t.shape));
}

std::vector<int64_t> withoutLast2(const std::vector<int64_t> &s) {
  return std::vector<int64_t>(s.begin(), s.end() - 2);
}

//===----------------------------------------------------------------------===//
// Registry
//===----------------------------------------------------------------------===//

TEST(CPUKernelsRegistry, NamesAreSortedAndResolve) {
  std::vector<std::string> names = cpuKernelNames();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_EQ(names.size(), 22u);
  for (const std::string &name : names) {
    const KernelInfo *kernel = lookupCPUKernel(name);
    ASSERT_NE(kernel, nullptr) << name;
    EXPECT_NE(kernel->check, nullptr);
    EXPECT_NE(kernel->run, nullptr);
  }
  EXPECT_EQ(lookupCPUKernel("conv"), nullptr);
  EXPECT_EQ(lookupCPUKernel(""), nullptr);
  EXPECT_EQ(lookupCPUKernel("zzz"), nullptr);
}

//===----------------------------------------------------------------------===//
// matmul
//===----------------------------------------------------------------------===//

/// Naive batched matmul following the kernel's contract.
std::vector<double> referenceMatmul(const Tensor &a, const Tensor &b,
                                    const std::vector<int64_t> &cShape,
                                    bool transA, bool transB) {
  size_t ra = a.shape.size(), rc = cShape.size();
  int64_t m = cShape[rc - 2], n = cShape[rc - 1];
  int64_t k = transA ? a.shape[ra - 2] : a.shape[ra - 1];
  int64_t batchA = numElements(withoutLast2(a.shape));
  int64_t batchB = numElements(withoutLast2(b.shape));
  int64_t batches = numElements(withoutLast2(cShape));
  std::vector<double> c(size_t(batches * m * n));
  for (int64_t batch = 0; batch < batches; ++batch) {
    int64_t ab = batch % batchA, bb = batch % batchB;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p) {
          double av = a.get(ab * m * k + (transA ? p * m + i : i * k + p));
          double bv = b.get(bb * k * n + (transB ? j * k + p : p * n + j));
          sum += av * bv;
        }
        c[size_t((batch * m + i) * n + j)] = sum;
      }
  }
  return c;
}

void testMatmul(DType dtype, std::vector<int64_t> aShape,
                std::vector<int64_t> bShape, std::vector<int64_t> cShape,
                bool transA, bool transB) {
  SCOPED_TRACE(shapeString(aShape) + " x " + shapeString(bShape) + " -> " +
               shapeString(cShape) + " transA=" + std::to_string(transA) +
               " transB=" + std::to_string(transB));
  Tensor a = random(dtype, aShape), b = random(dtype, bShape);
  Attributes attrs;
  if (transA)
    attrs["transpose_lhs"] = int64_t(1);
  if (transB)
    attrs["transpose_rhs"] = int64_t(0 + 1);
  Tensor c = run1("matmul", {&a, &b}, dtype, cShape, attrs);
  expectClose(c, referenceMatmul(a, b, cShape, transA, transB),
              dtype == DType::F32 ? 1e-4 : 1e-12,
              dtype == DType::F32 ? 1e-4 : 1e-12);
}

TEST(CPUKernelsMatmul, PlainAndTransposed) {
  for (DType dtype : {DType::F32, DType::F64})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        std::vector<int64_t> a =
            ta ? std::vector<int64_t>{7, 5} : std::vector<int64_t>{5, 7};
        std::vector<int64_t> b =
            tb ? std::vector<int64_t>{3, 7} : std::vector<int64_t>{7, 3};
        testMatmul(dtype, a, b, {5, 3}, ta, tb);
      }
}

TEST(CPUKernelsMatmul, LinearLayerFoldsBatches) {
  testMatmul(DType::F32, {2, 3, 4, 5}, {5, 6}, {2, 3, 4, 6}, false, false);
  testMatmul(DType::F32, {2, 3, 4, 5}, {6, 5}, {2, 3, 4, 6}, false, true);
  testMatmul(DType::F64, {3, 17, 33}, {33, 9}, {3, 17, 9}, false, false);
}

TEST(CPUKernelsMatmul, BatchedAndShared) {
  testMatmul(DType::F32, {4, 8, 16}, {4, 16, 8}, {4, 8, 8}, false, false);
  // A shared by all batches.
  testMatmul(DType::F32, {6, 5}, {3, 5, 7}, {3, 6, 7}, false, false);
  // B with fewer batch dims than A: a suffix of C's.
  testMatmul(DType::F32, {2, 3, 4, 5}, {3, 5, 6}, {2, 3, 4, 6}, false, false);
  testMatmul(DType::F64, {2, 3, 5, 4}, {3, 6, 5}, {2, 3, 4, 6}, true, true);
  // Transposed A with a shared B cannot fold.
  testMatmul(DType::F32, {3, 5, 4}, {5, 6}, {3, 4, 6}, true, false);
  // Both shared: every batch is the same product.
  testMatmul(DType::F32, {4, 5}, {5, 3}, {2, 4, 3}, false, false);
}

TEST(CPUKernelsMatmul, ManySmallBatchesRunInParallel) {
  // The attention shape, scaled down: batches >= threads, small GEMMs.
  testMatmul(DType::F32, {2, 12, 33, 16}, {2, 12, 16, 33}, {2, 12, 33, 33},
             false, false);
  testMatmul(DType::F32, {2, 12, 33, 16}, {2, 12, 33, 16}, {2, 12, 33, 33},
             false, true);
}

TEST(CPUKernelsMatmul, OddAndDegenerateSizes) {
  testMatmul(DType::F32, {1, 1}, {1, 1}, {1, 1}, false, false);
  testMatmul(DType::F32, {67, 129}, {129, 31}, {67, 31}, false, false);
  // K = 0: the result is zeros.
  Tensor a(DType::F32, {3, 0}), b(DType::F32, {0, 2});
  Tensor c = run1("matmul", {&a, &b}, DType::F32, {3, 2});
  expectClose(c, std::vector<double>(6, 0.0));
}

/// The epilogue's activations, in double.
double activation(const std::string &name, double x) {
  if (name == "relu")
    return x < 0 ? 0 : x;
  if (name == "gelu_tanh")
    return 0.5 * x *
           (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
  return x;
}

/// A matmul with a bias and/or activation against the naive matmul
/// followed by the epilogue in double. Returns the result and the
/// preactivation.
std::pair<Tensor, Tensor>
testMatmulEpilogue(DType dtype, std::vector<int64_t> aShape,
                   std::vector<int64_t> bShape, std::vector<int64_t> cShape,
                   bool transB, bool withBias, const std::string &act,
                   bool keepPre) {
  SCOPED_TRACE(shapeString(aShape) + " x " + shapeString(bShape) + " " +
               dtypeName(dtype) + " bias=" + std::to_string(withBias) +
               " activation=" + act + " pre=" + std::to_string(keepPre));
  Tensor a = random(dtype, aShape), b = random(dtype, bShape);
  Tensor bias = random(dtype, {cShape.back()});
  std::vector<const Tensor *> inputs{&a, &b};
  if (withBias)
    inputs.push_back(&bias);
  std::vector<Tensor> outputs{Tensor(dtype, cShape)};
  if (keepPre)
    outputs.emplace_back(dtype, cShape);
  Attributes attrs{{"transpose_rhs", int64_t(transB)}};
  if (!act.empty())
    attrs["activation"] = act;
  Instruction instruction = makeKernel("matmul", inputs, outputs, attrs);
  EXPECT_EQ(runKernel(instruction, inputs, outputs), "");
  std::vector<double> pre = referenceMatmul(a, b, cShape, false, transB);
  std::vector<double> expected(pre.size());
  int64_t n = cShape.back();
  for (size_t i = 0; i < pre.size(); ++i) {
    if (withBias)
      pre[i] += bias.get(int64_t(i) % n);
    expected[i] = activation(act, pre[i]);
  }
  double tol = dtype == DType::F32 ? 1e-4 : dtype == DType::F64 ? 1e-12 : 1e-2;
  expectClose(outputs[0], expected, tol, tol);
  if (keepPre)
    expectClose(outputs[1], pre, tol, tol);
  return {outputs[0], keepPre ? outputs[1] : Tensor()};
}

TEST(CPUKernelsMatmul, Epilogue) {
  for (DType dtype : {DType::F32, DType::F64, DType::BF16}) {
    // A linear layer (batches folded into M) with every epilogue.
    for (const char *act : {"", "relu", "gelu_tanh"}) {
      testMatmulEpilogue(dtype, {3, 70, 24}, {24, 40}, {3, 70, 40}, false, true,
                         act, false);
      if (*act)
        testMatmulEpilogue(dtype, {3, 70, 24}, {40, 24}, {3, 70, 40}, true,
                           true, act, true);
    }
    // An activation without a bias; batched operands (the epilogue runs
    // over every batch).
    testMatmulEpilogue(dtype, {5, 7}, {7, 3}, {5, 3}, false, false, "relu",
                       true);
    testMatmulEpilogue(dtype, {4, 9, 6}, {4, 6, 5}, {4, 9, 5}, false, true,
                       "gelu_tanh", true);
  }
}

/// The derivative of the tanh GELU by central differences of activation():
/// a reference independent of the kernels' closed form.
double geluTanhSlopeReference(double x) {
  const double h = 1e-6;
  return (activation("gelu_tanh", x + h) - activation("gelu_tanh", x - h)) /
         (2 * h);
}

/// An input-gradient GEMM through a tanh GELU (`activation_grad`): the
/// naive product times the GELU's derivative at the third input, in double.
void testMatmulGeluGrad(DType dtype, std::vector<int64_t> aShape,
                        std::vector<int64_t> bShape,
                        std::vector<int64_t> cShape, bool transB) {
  SCOPED_TRACE(shapeString(aShape) + " x " + shapeString(bShape) + " " +
               dtypeName(dtype) + " transB=" + std::to_string(transB));
  Tensor a = random(dtype, aShape), b = random(dtype, bShape);
  // GELU inputs across its bend and tails.
  Tensor x = random(dtype, cShape, -5, 5);
  std::vector<const Tensor *> in{&a, &b, &x};
  std::vector<Tensor> out{Tensor(dtype, cShape)};
  Attributes attrs{{"transpose_rhs", int64_t(transB)},
                   {"activation_grad", std::string("gelu_tanh")}};
  ASSERT_EQ(runKernel(makeKernel("matmul", in, out, attrs), in, out), "");
  std::vector<double> expected = referenceMatmul(a, b, cShape, false, transB);
  for (size_t i = 0; i < expected.size(); ++i)
    expected[i] *= geluTanhSlopeReference(x.get(int64_t(i)));
  double tol = dtype == DType::F32 ? 1e-4 : dtype == DType::F64 ? 1e-8 : 1e-2;
  expectClose(out[0], expected, tol, tol);
}

TEST(CPUKernelsMatmul, GeluGradMultipliesByTheDerivative) {
  for (DType dtype : {DType::F32, DType::F64, DType::BF16}) {
    // A linear layer's input gradient (batches folded into M, the weight
    // read as stored), and batched operands.
    testMatmulGeluGrad(dtype, {3, 70, 24}, {24, 40}, {3, 70, 40}, false);
    testMatmulGeluGrad(dtype, {3, 70, 24}, {40, 24}, {3, 70, 40}, true);
    testMatmulGeluGrad(dtype, {4, 9, 6}, {4, 6, 5}, {4, 9, 5}, false);
  }
}

/// The weight-gradient GEMM with the bias gradient: the product as the plain
/// kernel computes it (bit for bit) and the summed operand's sum over K,
/// in f64, rounded once to the dtype.
void testMatmulBiasGrad(DType dtype, const std::string &operand,
                        std::vector<int64_t> aShape,
                        std::vector<int64_t> bShape, bool transA, bool transB) {
  SCOPED_TRACE(shapeString(aShape) + " x " + shapeString(bShape) + " " +
               dtypeName(dtype) + " bias_grad=" + operand + " transA=" +
               std::to_string(transA) + " transB=" + std::to_string(transB));
  Tensor a = random(dtype, aShape), b = random(dtype, bShape);
  const int64_t m = transA ? aShape[1] : aShape[0];
  const int64_t k = transA ? aShape[0] : aShape[1];
  const int64_t n = transB ? bShape[0] : bShape[1];
  const bool lhs = operand == "lhs";
  Attributes attrs{{"transpose_lhs", int64_t(transA)},
                   {"transpose_rhs", int64_t(transB)}};
  Tensor plain = run1("matmul", {&a, &b}, dtype, {m, n}, attrs);
  attrs["bias_grad"] = operand;
  std::vector<const Tensor *> in{&a, &b};
  std::vector<Tensor> out{Tensor(dtype, {m, n}), Tensor(dtype, {lhs ? m : n})};
  ASSERT_EQ(runKernel(makeKernel("matmul", in, out, attrs), in, out), "");
  expectClose(
      out[0],
      [&] {
        std::vector<double> values;
        for (int64_t i = 0; i < plain.size(); ++i)
          values.push_back(plain.get(i));
        return values;
      }(),
      0, 0);
  std::vector<double> sums;
  for (int64_t j = 0; j < (lhs ? m : n); ++j) {
    double sum = 0;
    for (int64_t p = 0; p < k; ++p)
      sum += lhs ? a.get(transA ? p * m + j : j * k + p)
                 : b.get(transB ? j * k + p : p * n + j);
    sums.push_back(dtype == DType::BF16  ? widenBF16(referenceBF16(float(sum)))
                   : dtype == DType::F32 ? double(float(sum))
                                         : sum);
  }
  // bf16: the f32 rounding of the f64 sum may tie where the kernel's single
  // rounding does not: one bf16 step.
  double tol = dtype == DType::BF16 ? 1.0 / 128 : 0;
  expectClose(out[1], sums, tol, 1e-30);
}

TEST(CPUKernelsMatmul, BiasGradSumsTheOperandOverK) {
  for (DType dtype : {DType::F32, DType::F64, DType::BF16}) {
    // The weight gradients a linear layer's backward makes: g^T x (summing
    // lhs, stored [K, M]) and x^T g (summing rhs, stored [K, N]).
    testMatmulBiasGrad(dtype, "lhs", {300, 24}, {300, 40}, true, false);
    testMatmulBiasGrad(dtype, "rhs", {300, 40}, {300, 24}, true, false);
    // Other layouts of the summed operand.
    testMatmulBiasGrad(dtype, "lhs", {24, 300}, {300, 40}, false, false);
    testMatmulBiasGrad(dtype, "rhs", {24, 300}, {40, 300}, false, true);
  }
}

TEST(CPUKernelsMatmul, CheckRejects) {
  Tensor a(DType::F32, {8, 16}), b(DType::F32, {32, 4}), c(DType::F32, {8, 4});
  EXPECT_REJECTED(makeKernel("matmul", {&a, &b}, {c}),
                  "lhs [8,16] and rhs [32,4] disagree on K (16 vs 32)");
  Tensor b2(DType::F32, {16, 4}), wrong(DType::F32, {8, 5});
  EXPECT_EQ(checkMessage(makeKernel("matmul", {&a, &b2}, {c})), "");
  EXPECT_REJECTED(makeKernel("matmul", {&a, &b2}, {wrong}),
                  "result [8,5] should end in [8,4]");
  EXPECT_REJECTED(makeKernel("matmul", {&a}, {c}),
                  "expects 2 to 4 inputs (lhs, rhs, bias, addend) and 1 or 2 "
                  "outputs (result, preactivation), got 1 and 1");
  EXPECT_REJECTED(makeKernel("matmul", {&a, &b2, &b2, &b2, &b2}, {c}),
                  "got 5 and 1");
  EXPECT_REJECTED(makeKernel("matmul", {&a, &b2, &b2, &b2}, {c}),
                  "4 inputs need accumulate=1");
  EXPECT_REJECTED(makeKernel("matmul", {&a, &b2}, {c, c}),
                  "a preactivation output needs an activation");
  Tensor bias(DType::F32, {4}), bias5(DType::F32, {5}), bias64(DType::F64, {4});
  EXPECT_EQ(
      checkMessage(makeKernel("matmul", {&a, &b2, &bias}, {c, c},
                              {{"activation", std::string("gelu_tanh")}})),
      "");
  EXPECT_REJECTED(makeKernel("matmul", {&a, &b2, &bias5}, {c}),
                  "bias [5] must be a vector of the result's 4 columns");
  EXPECT_REJECTED(makeKernel("matmul", {&a, &b2, &bias64}, {c}), "same dtype");
  EXPECT_REJECTED(makeKernel("matmul", {&a, &b2}, {c},
                             {{"activation", std::string("gelu")}}),
                  "unknown activation 'gelu' (known: none, relu, gelu_tanh)");
  EXPECT_REJECTED(makeKernel("matmul", {&a, &b2}, {c, wrong},
                             {{"activation", std::string("relu")}}),
                  "preactivation");
  Attributes geluGrad{{"activation_grad", std::string("gelu_tanh")}};
  EXPECT_EQ(checkMessage(makeKernel("matmul", {&a, &b2, &c}, {c}, geluGrad)),
            "");
  EXPECT_REJECTED(makeKernel("matmul", {&a, &b2, &wrong}, {c}, geluGrad),
                  "activation input");
  EXPECT_REJECTED(makeKernel("matmul", {&a, &b2}, {c}, geluGrad),
                  "activation_grad takes 3 inputs (lhs, rhs and the "
                  "activation's input) and 1 output");
  EXPECT_REJECTED(makeKernel("matmul", {&a, &b2, &c}, {c},
                             {{"activation_grad", std::string("relu")}}),
                  "unknown activation_grad 'relu' (known: gelu_tanh)");
  EXPECT_REJECTED(makeKernel("matmul", {&a, &b2, &c}, {c},
                             {{"activation_grad", std::string("gelu_tanh")},
                              {"activation", std::string("relu")}}),
                  "activation_grad takes no activation");
  Tensor sum8(DType::F32, {8}), sum4(DType::F32, {4});
  EXPECT_EQ(checkMessage(makeKernel("matmul", {&a, &b2}, {c, sum8},
                                    {{"bias_grad", std::string("lhs")}})),
            "");
  EXPECT_REJECTED(makeKernel("matmul", {&a, &b2}, {c, sum8},
                             {{"bias_grad", std::string("rhs")}}),
                  "bias gradient [8] must be a vector of the 4 columns");
  EXPECT_REJECTED(makeKernel("matmul", {&a, &b2}, {c, sum4},
                             {{"bias_grad", std::string("out")}}),
                  "unknown bias_grad operand 'out' (known: lhs, rhs)");
  EXPECT_REJECTED(makeKernel("matmul", {&a, &b2, &bias}, {c, sum4},
                             {{"bias_grad", std::string("rhs")}}),
                  "bias_grad takes 2 inputs (lhs, rhs), 2 outputs");
  EXPECT_REJECTED(makeKernel("matmul", {&a, &b2}, {c, sum4},
                             {{"bias_grad", std::string("rhs")},
                              {"activation", std::string("relu")}}),
                  "no activation");
  Tensor a3d(DType::F32, {2, 8, 16}), c3d(DType::F32, {2, 8, 4});
  EXPECT_REJECTED(makeKernel("matmul", {&a3d, &b2}, {c3d, sum4},
                             {{"bias_grad", std::string("rhs")}}),
                  "bias_grad needs one GEMM");
  EXPECT_REJECTED(makeKernel("matmul", {&a, &b2}, {c, bias64},
                             {{"bias_grad", std::string("rhs")}}),
                  "same dtype");
  Tensor ai(DType::I32, {8, 16}), bi(DType::I32, {16, 4}),
      ci(DType::I32, {8, 4});
  EXPECT_REJECTED(makeKernel("matmul", {&ai, &bi}, {ci}),
                  "lhs has dtype i32; only f32, f64 and bf16");
  Tensor b64(DType::F64, {16, 4});
  EXPECT_REJECTED(makeKernel("matmul", {&a, &b64}, {c}), "same dtype");
  EXPECT_REJECTED(
      makeKernel("matmul", {&a, &b2}, {c}, {{"transpose_lhs", int64_t(2)}}),
      "must be 0 or 1");
  EXPECT_REJECTED(
      makeKernel("matmul", {&a, &b2}, {c}, {{"transpose_rhs", 1.0}}),
      "must be an integer");
  EXPECT_REJECTED(makeKernel("matmul", {&a, &b2}, {c}, {{"alpha", 1.0}}),
                  "unknown attribute 'alpha'");
  Tensor v(DType::F32, {16});
  EXPECT_REJECTED(makeKernel("matmul", {&a, &v}, {c}), "rank >= 2");
  Tensor ab(DType::F32, {3, 8, 16}), cb(DType::F32, {2, 8, 4});
  EXPECT_REJECTED(makeKernel("matmul", {&ab, &b2}, {cb}),
                  "lhs [3,8,16] has batch dims that are not a suffix");
  Tensor c2(DType::F32, {8, 4}), a3(DType::F32, {2, 8, 16});
  EXPECT_REJECTED(makeKernel("matmul", {&a3, &b2}, {c2}), "not a suffix");
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

Instruction makeProgram(const std::vector<const Tensor *> &inputs,
                        const std::vector<Tensor> &outputs,
                        std::vector<ProgramOp> program,
                        std::vector<int> yields) {
  Instruction instruction = makeKernel("elementwise", inputs, outputs);
  instruction.program = std::move(program);
  instruction.yields = std::move(yields);
  return instruction;
}

/// Runs a one-op program `%n = name %0 .. %n-1` over `inputs`, output dtype
/// `dtype` and shape `shape`.
Tensor runOp(const std::string &name, const std::vector<const Tensor *> &inputs,
             DType dtype, std::vector<int64_t> shape, Attributes attrs = {}) {
  std::vector<int> operands(inputs.size());
  std::iota(operands.begin(), operands.end(), 0);
  std::vector<Tensor> outputs{Tensor(dtype, std::move(shape))};
  Instruction instruction = makeProgram(
      inputs, outputs, {op(name, dtype, operands, std::move(attrs))},
      {int(inputs.size())});
  EXPECT_EQ(runKernel(instruction, inputs, outputs), "");
  return outputs[0];
}

/// Reference for a broadcasting binary op.
template <typename F>
std::vector<double> referenceBinary(const Tensor &a, const Tensor &b,
                                    const std::vector<int64_t> &shape, F f) {
  std::vector<double> result(size_t(numElements(shape)));
  for (int64_t i = 0; i < int64_t(result.size()); ++i) {
    std::vector<int64_t> index = unravel(i, shape);
    result[size_t(i)] = f(broadcastGet(a, index), broadcastGet(b, index));
  }
  return result;
}

TEST(CPUKernelsElementwise, BroadcastingAdd) {
  struct Case {
    std::vector<int64_t> a, b, out;
  };
  std::vector<Case> cases = {
      {{4, 5}, {4, 5}, {4, 5}},       // same shape
      {{37, 11}, {11}, {37, 11}},     // bias
      {{7, 1300}, {1300}, {7, 1300}}, // long rows: bias read in place
      {{3, 1}, {1, 5}, {3, 5}},       // outer product
      {{2, 3, 4}, {}, {2, 3, 4}},     // scalar
      {{}, {2, 1, 4}, {2, 1, 4}},     // scalar first
      {{2, 1, 3, 1}, {4, 1, 5}, {2, 4, 3, 5}},
      {{5, 1, 700}, {1, 3, 700}, {5, 3, 700}},
      {{1}, {1}, {1}},
      {{}, {}, {}},
      {{3, 1000}, {3, 1}, {3, 1000}},    // column broadcast, long rows
      {{9, 7, 5}, {9, 1, 5}, {9, 7, 5}}, // middle broadcast
  };
  for (DType dtype : {DType::F32, DType::F64, DType::I32, DType::I64})
    for (const Case &c : cases) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + shapeString(c.a) +
                   " + " + shapeString(c.b));
      Tensor a = random(dtype, c.a, -50, 50), b = random(dtype, c.b, -50, 50);
      Tensor y = runOp("add", {&a, &b}, dtype, c.out);
      expectClose(y, referenceBinary(a, b, c.out,
                                     [](double x, double z) { return x + z; }));
    }
}

TEST(CPUKernelsElementwise, BinaryOps) {
  std::vector<int64_t> shape{3, 257};
  Tensor a = random(DType::F32, shape, 0.5, 3), b = random(DType::F32, shape);
  auto check = [&](const char *name, double (*f)(double, double)) {
    SCOPED_TRACE(name);
    expectClose(runOp(name, {&a, &b}, DType::F32, shape),
                referenceBinary(a, b, shape, f), 1e-5, 1e-6);
  };
  check("sub", [](double x, double y) { return x - y; });
  check("mul", [](double x, double y) { return x * y; });
  check("div", [](double x, double y) { return x / y; });
  check("pow", [](double x, double y) { return std::pow(x, y); });
  check("max", [](double x, double y) { return std::max(x, y); });
  check("min", [](double x, double y) { return std::min(x, y); });
}

TEST(CPUKernelsElementwise, IntegerDivisionTruncatesAndDivByZeroIsZero) {
  for (DType dtype : {DType::I32, DType::I64}) {
    Tensor a = filled(dtype, {6}, {7, -7, 7, -7, 5, 0});
    Tensor b = filled(dtype, {6}, {2, 2, -2, -2, 0, 3});
    expectClose(runOp("div", {&a, &b}, dtype, {6}), {3, -3, -3, 3, 0, 0});
    Tensor e = filled(dtype, {6}, {3, 0, -1, 2, 1, 2});
    Tensor base = filled(dtype, {6}, {2, 5, 2, -3, 1, -1});
    expectClose(runOp("pow", {&base, &e}, dtype, {6}), {8, 1, 0, 9, 1, 1});
  }
  Tensor minInt = filled(DType::I32, {1}, {-2147483648.0});
  Tensor minusOne = filled(DType::I32, {1}, {-1});
  expectClose(runOp("div", {&minInt, &minusOne}, DType::I32, {1}),
              {-2147483648.0});
}

TEST(CPUKernelsElementwise, UnaryOps) {
  std::vector<int64_t> shape{1031};
  for (DType dtype : {DType::F32, DType::F64}) {
    Tensor x = random(dtype, shape, -4, 4);
    Tensor positive = random(dtype, shape, 0.01, 9);
    double tol = dtype == DType::F32 ? 2e-6 : 1e-12;
    auto check = [&](const char *name, const Tensor &in, double (*f)(double),
                     Attributes attrs = {}) {
      SCOPED_TRACE(std::string(name) + " " + dtypeName(dtype));
      std::vector<double> expected(size_t(in.size()));
      for (int64_t i = 0; i < in.size(); ++i)
        expected[size_t(i)] = f(in.get(i));
      expectClose(runOp(name, {&in}, dtype, shape, attrs), expected, tol, tol);
    };
    check("neg", x, [](double v) { return -v; });
    check("sqrt", positive, [](double v) { return std::sqrt(v); });
    check("rsqrt", positive, [](double v) { return 1 / std::sqrt(v); });
    check("exp", x, [](double v) { return std::exp(v); });
    check("log", positive, [](double v) { return std::log(v); });
    check("erf", x, [](double v) { return std::erf(v); });
    check("tanh", x, [](double v) { return std::tanh(v); });
    check("sigmoid", x, [](double v) { return 1 / (1 + std::exp(-v)); });
    check("relu", x, [](double v) { return v > 0 ? v : 0; });
    check("reciprocal", positive, [](double v) { return 1 / v; });
    check("abs", x, [](double v) { return std::fabs(v); });
    check("sin", x, [](double v) { return std::sin(v); });
    check("cos", x, [](double v) { return std::cos(v); });
    check("gelu", x, [](double v) {
      return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    });
    check("gelu", x,
          [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); },
          {{"approximate", std::string("none")}});
    check("gelu", x,
          [](double v) {
            return 0.5 * v *
                   (1 + std::tanh(std::sqrt(2 / M_PI) *
                                  (v + 0.044715 * v * v * v)));
          },
          {{"approximate", std::string("tanh")}});
  }
  // Extreme inputs stay finite where they should.
  Tensor big = filled(DType::F32, {4}, {-200, 200, -1e30, 1e30});
  expectClose(runOp("sigmoid", {&big}, DType::F32, {4}), {0, 1, 0, 1});
  expectClose(runOp("gelu", {&big}, DType::F32, {4}), {0, 200, 0, 1e30});
}

TEST(CPUKernelsElementwise, FloatTranscendentalsAreAccurateEverywhere) {
  // f32 uses vectorized approximations: sweep them, tails included, against
  // double-precision references with a relative tolerance.
  std::vector<double> xs;
  for (double x = -30; x <= 30; x += 0.00731)
    xs.push_back(float(x));
  double inf = std::numeric_limits<double>::infinity();
  double nan = std::numeric_limits<double>::quiet_NaN();
  for (double x : {0.0, 1e-7, -1e-7, 1e-30, 87.0, 88.7, 89.0, -87.0, -100.0,
                   -103.0, -110.0, 1e30, -1e30, inf, -inf, nan})
    xs.push_back(float(x));
  Tensor x = filled(DType::F32, {int64_t(xs.size())}, xs);
  struct Case {
    const char *op;
    double (*f)(double);
    Attributes attrs;
  };
  std::vector<Case> cases = {
      {"exp", [](double v) { return std::exp(v); }, {}},
      {"erf", [](double v) { return std::erf(v); }, {}},
      {"tanh", [](double v) { return std::tanh(v); }, {}},
      {"sigmoid", [](double v) { return 1 / (1 + std::exp(-v)); }, {}},
      {"gelu",
       [](double v) {
         return std::isinf(v) ? (v > 0 ? v : 0)
                              : 0.5 * v * std::erfc(-v / std::sqrt(2.0));
       },
       {}},
      {"gelu",
       [](double v) {
         double u = std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v);
         return std::isinf(v) ? (v > 0 ? v : 0) : v / (1 + std::exp(-2 * u));
       },
       {{"approximate", std::string("tanh")}}},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(std::string(c.op) + (c.attrs.empty() ? "" : " tanh"));
    Tensor y = runOp(c.op, {&x}, DType::F32, x.shape, c.attrs);
    std::vector<double> expected;
    for (double v : xs) {
      // Rounded to f32 (exp(89) overflows); results below the smallest
      // normal float may flush, hence the absolute tolerance.
      expected.push_back(double(float(c.f(v))));
    }
    // gelu's far negative tail (|result| < 1e-7) is only ~1e-5 relative.
    expectClose(y, expected, 2e-6, std::string(c.op) == "gelu" ? 1e-12 : 1e-37);
  }
}

TEST(CPUKernelsElementwise, IntegerUnaryAndMaxMinWithNaN) {
  Tensor x = filled(DType::I64, {4}, {-3, 0, 5, -1});
  expectClose(runOp("neg", {&x}, DType::I64, {4}), {3, 0, -5, 1});
  expectClose(runOp("relu", {&x}, DType::I64, {4}), {0, 0, 5, 0});
  expectClose(runOp("abs", {&x}, DType::I64, {4}), {3, 0, 5, 1});
  // The most negative value wraps to itself, as in two's complement.
  Tensor lowest = filled(DType::I32, {2}, {-2147483648.0, -7});
  expectClose(runOp("abs", {&lowest}, DType::I32, {2}), {-2147483648.0, 7});
  double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor a = filled(DType::F32, {3}, {nan, 1, 2});
  Tensor b = filled(DType::F32, {3}, {1, nan, 3});
  Tensor dividend = filled(DType::F64, {4}, {5.5, -5.5, 5.5, -5.5});
  Tensor divisor = filled(DType::F64, {4}, {2, 2, -2, -2});
  expectClose(runOp("fmod", {&dividend, &divisor}, DType::F64, {4}),
              {1.5, -1.5, 1.5, -1.5});
  expectClose(runOp("max", {&a, &b}, DType::F32, {3}), {nan, nan, 3});
  expectClose(runOp("min", {&a, &b}, DType::F32, {3}), {nan, nan, 2});
  Tensor p = filled(DType::I1, {4}, {0, 1, 0, 1});
  Tensor q = filled(DType::I1, {4}, {0, 0, 1, 1});
  expectClose(runOp("max", {&p, &q}, DType::I1, {4}), {0, 1, 1, 1});
  expectClose(runOp("min", {&p, &q}, DType::I1, {4}), {0, 0, 0, 1});
}

TEST(CPUKernelsElementwise, CastRules) {
  double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor f = filled(DType::F32, {6}, {2.7, -2.7, 0, 0.25, -0.0, nan});
  expectClose(runOp("cast", {&f}, DType::I32, {6}), {2, -2, 0, 0, 0, 0});
  expectClose(runOp("cast", {&f}, DType::I64, {6}), {2, -2, 0, 0, 0, 0});
  expectClose(runOp("cast", {&f}, DType::I1, {6}), {1, 1, 0, 1, 0, 1});
  expectClose(runOp("cast", {&f}, DType::F64, {6}),
              {float(2.7), float(-2.7), 0, 0.25, 0, nan});
  Tensor b = filled(DType::I1, {3}, {1, 0, 1});
  expectClose(runOp("cast", {&b}, DType::F32, {3}), {1, 0, 1});
  expectClose(runOp("cast", {&b}, DType::I64, {3}), {1, 0, 1});
  Tensor i = filled(DType::I64, {3}, {-5, 0, 1LL << 40});
  expectClose(runOp("cast", {&i}, DType::I1, {3}), {1, 0, 1});
  expectClose(runOp("cast", {&i}, DType::F64, {3}), {-5, 0, double(1LL << 40)});
  // Out of range saturates.
  Tensor huge = filled(DType::F64, {2}, {1e20, -1e20});
  expectClose(runOp("cast", {&huge}, DType::I32, {2}),
              {2147483647.0, -2147483648.0});
}

TEST(CPUKernelsElementwise, CompareSelectConst) {
  double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor a = filled(DType::F32, {4}, {1, 2, nan, 3});
  Tensor b = filled(DType::F32, {4}, {1, 3, 1, 2});
  auto compare = [&](const char *direction) {
    return runOp("compare", {&a, &b}, DType::I1, {4},
                 {{"direction", std::string(direction)}});
  };
  expectClose(compare("eq"), {1, 0, 0, 0});
  expectClose(compare("ne"), {0, 1, 1, 1});
  expectClose(compare("lt"), {0, 1, 0, 0});
  expectClose(compare("le"), {1, 1, 0, 0});
  expectClose(compare("gt"), {0, 0, 0, 1});
  expectClose(compare("ge"), {1, 0, 0, 1});

  // where(x > 0, x, 0.1 * x) with a broadcast condition operand and consts.
  Tensor x = random(DType::F64, {5, 300}, -1, 1);
  std::vector<Tensor> outputs{Tensor(DType::F64, {5, 300}),
                              Tensor(DType::I1, {5, 300})};
  Instruction leaky = makeProgram(
      {&x}, outputs,
      {op("const", DType::F64, {}, {{"value", 0.0}}),
       op("compare", DType::I1, {0, 1}, {{"direction", std::string("gt")}}),
       op("const", DType::F64, {}, {{"value", 0.1}}),
       op("mul", DType::F64, {3, 0}), op("select", DType::F64, {2, 0, 4})},
      {5, 2});
  ASSERT_EQ(runKernel(leaky, {&x}, outputs), "");
  std::vector<double> expected, mask;
  for (int64_t i = 0; i < x.size(); ++i) {
    double v = x.get(i);
    expected.push_back(v > 0 ? v : 0.1 * v);
    mask.push_back(v > 0);
  }
  expectClose(outputs[0], expected, 1e-15, 0);
  expectClose(outputs[1], mask);

  // An integer const, and a program without inputs.
  std::vector<Tensor> splat{Tensor(DType::I32, {3, 2})};
  ASSERT_EQ(runKernel(makeProgram({}, splat,
                                  {op("const", DType::I32, {},
                                      {{"value", int64_t(-7)}})},
                                  {0}),
                      {}, splat),
            "");
  expectClose(splat[0], std::vector<double>(6, -7));
}

TEST(CPUKernelsElementwise, FusedProgramWithBroadcastAndYieldedInput) {
  // y0 = gelu(x + bias) * scale, y1 = x (an input yielded as is).
  Tensor x = random(DType::F32, {6, 130}), bias = random(DType::F32, {130});
  Tensor scale = random(DType::F32, {6, 1});
  std::vector<Tensor> outputs{Tensor(DType::F32, {6, 130}),
                              Tensor(DType::F32, {6, 130})};
  Instruction instruction =
      makeProgram({&x, &bias, &scale}, outputs,
                  {op("add", DType::F32, {0, 1}), op("gelu", DType::F32, {3}),
                   op("mul", DType::F32, {4, 2})},
                  {5, 0});
  ASSERT_EQ(runKernel(instruction, {&x, &bias, &scale}, outputs), "");
  std::vector<double> expected;
  for (int64_t i = 0; i < x.size(); ++i) {
    double v = x.get(i) + bias.get(i % 130);
    expected.push_back(0.5 * v * (1 + std::erf(v / std::sqrt(2.0))) *
                       scale.get(i / 130));
  }
  expectClose(outputs[0], expected, 1e-5, 1e-6);
  expectClose(outputs[1], values(x), 0, 0);
}

/// Runs `x * 2 + x` in place on `x` (the output is the input's buffer).
void runInPlaceTimesThree(Tensor &x) {
  Tensor two = filled(x.dtype, {}, {2});
  Instruction instruction =
      makeKernel("elementwise", {&x, &two}, {Tensor(x.dtype, x.shape)});
  instruction.program = {op("mul", x.dtype, {0, 1}),
                         op("add", x.dtype, {2, 0})};
  instruction.yields = {3};
  const KernelInfo *kernel = lookupCPUKernel("elementwise");
  ASSERT_TRUE(kernel->check(instruction).isOk());
  const void *in[] = {x.bytes.data(), two.bytes.data()};
  void *out[] = {x.bytes.data()};
  kernel->run(KernelArgs{instruction, in, out});
}

TEST(CPUKernelsElementwise, OutputMayAliasInput) {
  Tensor x = random(DType::F32, {3000});
  Tensor original = x;
  runInPlaceTimesThree(x);
  std::vector<double> expected;
  for (int64_t i = 0; i < x.size(); ++i)
    expected.push_back(3 * original.get(i));
  expectClose(x, expected);
}

TEST(CPUKernelsElementwise, CheckRejects) {
  Tensor a(DType::F32, {4, 5}), b(DType::F32, {5}), y(DType::F32, {4, 5});
  auto program = [&](std::vector<ProgramOp> ops, std::vector<int> yields,
                     std::vector<Tensor> outputs = {}) {
    if (outputs.empty())
      outputs = {y};
    return makeProgram({&a, &b}, outputs, std::move(ops), std::move(yields));
  };
  EXPECT_EQ(checkMessage(program({op("add", DType::F32, {0, 1})}, {2})), "");
  EXPECT_REJECTED(program({op("frobnicate", DType::F32, {0, 1})}, {2}),
                  "unknown op 'frobnicate'");
  EXPECT_REJECTED(program({op("add", DType::F32, {0, 3})}, {2}),
                  "operand %3 is not defined before it");
  EXPECT_REJECTED(program({op("add", DType::F32, {0, -1})}, {2}),
                  "operand %-1 is not defined");
  EXPECT_REJECTED(program({op("add", DType::F32, {0})}, {2}),
                  "expected 2 operand(s), got 1");
  EXPECT_REJECTED(program({op("add", DType::F64, {0, 1})}, {2}),
                  "operand %0 has dtype f32, expected f64");
  EXPECT_REJECTED(program({op("add", DType::F16, {0, 1})}, {2}),
                  "f16, which the CPU backend does not support");
  EXPECT_REJECTED(program({op("add", DType::F32, {0, 1})}, {}),
                  "yields 0 value(s) for 1 output(s)");
  EXPECT_REJECTED(program({op("add", DType::F32, {0, 1})}, {7}),
                  "yield of undefined value %7");
  EXPECT_REJECTED(program({op("compare", DType::I1, {0, 1},
                              {{"direction", std::string("eq")}})},
                          {2}),
                  "output 0 has dtype f32 but the program yields %2 of dtype "
                  "i1");
  EXPECT_REJECTED(program({op("compare", DType::I1, {0, 1},
                              {{"direction", std::string("less")}})},
                          {2}),
                  "direction must be eq, ne, lt, le, gt or ge");
  EXPECT_REJECTED(program({op("compare", DType::I1, {0, 1})}, {2}),
                  "missing attribute 'direction'");
  EXPECT_REJECTED(program({op("compare", DType::F32, {0, 1},
                              {{"direction", std::string("eq")}})},
                          {2}),
                  "the result has dtype f32, expected i1");
  EXPECT_REJECTED(program({op("select", DType::F32, {0, 1, 1})}, {2}),
                  "the condition has dtype f32, expected i1");
  EXPECT_REJECTED(program({op("gelu", DType::F32, {0},
                              {{"approximate", std::string("fast")}})},
                          {2}),
                  "approximate must be none or tanh");
  EXPECT_REJECTED(program({op("exp", DType::F32, {0}, {{"base", 2.0}})}, {2}),
                  "unknown attribute 'base'");
  EXPECT_REJECTED(program({op("const", DType::F32, {})}, {2}),
                  "missing attribute 'value'");
  EXPECT_REJECTED(
      program({op("const", DType::F32, {}, {{"value", std::string("pi")}})},
              {2}),
      "attribute 'value' must be a number");
  EXPECT_REJECTED(program({op("add", DType::F32, {0, 1})}, {2},
                          {Tensor(DType::F32, {4, 6})}),
                  "input 0 [4,5] does not broadcast to the output shape [4,6]");
  EXPECT_REJECTED(program({op("add", DType::F32, {0, 1})}, {2, 2},
                          {y, Tensor(DType::F32, {5})}),
                  "output 0 [4,5] and output 1 [5] must have the same shape");
  EXPECT_REJECTED(makeProgram({&a}, {}, {}, {}), "at least one output");

  Tensor i(DType::I32, {5}), yi(DType::I32, {5});
  EXPECT_REJECTED(makeProgram({&i}, {yi}, {op("sqrt", DType::I32, {0})}, {1}),
                  "the result has dtype i32, expected bf16, f32 or f64");
  Tensor p(DType::I1, {5}), yp(DType::I1, {5});
  EXPECT_REJECTED(
      makeProgram({&p, &p}, {yp}, {op("add", DType::I1, {0, 1})}, {2}),
      "expected bf16, f32, f64, i32 or i64");
  Tensor h(DType::F16, {5});
  EXPECT_REJECTED(makeProgram({&h}, {yp}, {}, {0}), "input 0 has dtype f16");
  EXPECT_REJECTED(makeProgram({&a}, {Tensor(DType::F16, {4, 5})},
                              {op("cast", DType::F16, {0})}, {1}),
                  "has dtype f16, which the CPU backend does not support");
  Instruction withAttr = program({op("add", DType::F32, {0, 1})}, {2});
  withAttr.attrs["fast"] = int64_t(1);
  EXPECT_REJECTED(withAttr, "unknown attribute 'fast'");
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

enum class RefReduce { Sum, Mean, Max };

std::vector<double> referenceReduce(const Tensor &x,
                                    const std::vector<int64_t> &axes,
                                    RefReduce kind) {
  std::vector<bool> reduced(x.shape.size(), false);
  for (int64_t a : axes)
    reduced[size_t(a < 0 ? a + int64_t(x.shape.size()) : a)] = true;
  std::vector<int64_t> outShape;
  for (size_t d = 0; d < x.shape.size(); ++d)
    outShape.push_back(reduced[d] ? 1 : x.shape[d]);
  int64_t outCount = numElements(outShape);
  std::vector<double> acc(size_t(outCount),
                          kind == RefReduce::Max ? -INFINITY : 0.0);
  std::vector<int64_t> count(size_t(outCount), 0);
  for (int64_t i = 0; i < x.size(); ++i) {
    std::vector<int64_t> index = unravel(i, x.shape);
    for (size_t d = 0; d < index.size(); ++d)
      if (reduced[d])
        index[d] = 0;
    size_t o = size_t(ravel(index, outShape));
    double v = x.get(i);
    acc[o] = kind == RefReduce::Max ? std::max(acc[o], v) : acc[o] + v;
    ++count[o];
  }
  if (kind == RefReduce::Mean)
    for (size_t o = 0; o < acc.size(); ++o)
      acc[o] /= double(count[o]);
  return acc;
}

std::vector<int64_t> reducedShape(const std::vector<int64_t> &shape,
                                  const std::vector<int64_t> &axes, bool keep) {
  std::vector<int64_t> out;
  for (size_t d = 0; d < shape.size(); ++d) {
    bool r = false;
    for (int64_t a : axes)
      r |= (a < 0 ? a + int64_t(shape.size()) : a) == int64_t(d);
    if (!r)
      out.push_back(shape[d]);
    else if (keep)
      out.push_back(1);
  }
  return out;
}

TEST(CPUKernelsReduce, AxesPatterns) {
  struct Case {
    std::vector<int64_t> shape, axes;
  };
  std::vector<Case> cases = {
      {{6, 7}, {1}},          {{6, 7}, {0}},          {{4, 5, 6}, {1}},
      {{4, 5, 6}, {0, 2}},    {{4, 5, 6}, {2, 1}},    {{4, 5, 6}, {0, 1, 2}},
      {{3, 1, 4, 5}, {1, 3}}, {{2, 3, 4, 5}, {0, 2}}, {{5, 300}, {-1}},
      {{4, 5, 6}, {}},        {{1, 7}, {0}},          {{200000}, {0}},
      {{3, 600, 2}, {1}},
  };
  struct Kernel {
    const char *name;
    RefReduce kind;
    std::vector<DType> dtypes;
  };
  std::vector<Kernel> kernels = {
      {"reduce_sum",
       RefReduce::Sum,
       {DType::F32, DType::F64, DType::I32, DType::I64}},
      {"reduce_mean", RefReduce::Mean, {DType::F32, DType::F64}},
      {"reduce_max",
       RefReduce::Max,
       {DType::F32, DType::F64, DType::I32, DType::I64}},
  };
  for (const Kernel &kernel : kernels)
    for (DType dtype : kernel.dtypes)
      for (const Case &c : cases)
        for (bool keep : {false, true}) {
          SCOPED_TRACE(std::string(kernel.name) + " " + dtypeName(dtype) + " " +
                       shapeString(c.shape) + " axes " + shapeString(c.axes) +
                       (keep ? " keep" : ""));
          Tensor x = random(dtype, c.shape, -100, 100);
          Tensor y =
              run1(kernel.name, {&x}, dtype,
                   reducedShape(c.shape, c.axes, keep), {{"axes", c.axes}});
          expectClose(y, referenceReduce(x, c.axes, kernel.kind), 1e-6, 1e-4);
        }
}

/// cumsum against a plain scan in double (f32 sums of a few small integers
/// are exact, so float results must match exactly too).
TEST(CPUKernelsReduce, Cumsum) {
  struct Case {
    std::vector<int64_t> shape;
    int64_t axis;
  };
  for (const Case &c :
       {Case{{5}, 0}, Case{{3, 4}, 1}, Case{{3, 4}, 0}, Case{{2, 3, 4}, 1},
        Case{{2, 3, 4}, -1}, Case{{2, 0, 3}, 1}})
    for (DType dtype : {DType::F32, DType::F64, DType::I32, DType::I64})
      for (int flags = 0; flags < 4; ++flags) {
        bool exclusive = flags & 1, reverse = flags & 2;
        SCOPED_TRACE(std::string(dtypeName(dtype)) + " " +
                     shapeString(c.shape) + " axis " + std::to_string(c.axis) +
                     (exclusive ? " exclusive" : "") +
                     (reverse ? " reverse" : ""));
        Tensor x = random(dtype, c.shape, -9, 9);
        for (int64_t i = 0; i < x.size(); ++i)
          x.set(i, std::round(x.get(i)));
        int64_t rank = int64_t(c.shape.size());
        int64_t axis = c.axis < 0 ? c.axis + rank : c.axis;
        int64_t n = c.shape[size_t(axis)], inner = 1;
        for (int64_t d = axis + 1; d < rank; ++d)
          inner *= c.shape[size_t(d)];
        std::vector<double> expected(size_t(x.size()));
        for (int64_t at = 0; at < x.size(); ++at) {
          int64_t j = (at / inner) % n, base = at - j * inner;
          double sum = 0;
          for (int64_t k = 0; k < n; ++k) {
            bool counted = reverse ? (exclusive ? k > j : k >= j)
                                   : (exclusive ? k < j : k <= j);
            if (counted)
              sum += x.get(base + k * inner);
          }
          expected[size_t(at)] = sum;
        }
        Tensor y = run1("cumsum", {&x}, dtype, c.shape,
                        {{"axis", c.axis},
                         {"exclusive", int64_t(exclusive)},
                         {"reverse", int64_t(reverse)}});
        expectClose(y, expected, 0, 0);
      }
  // Integers wrap.
  Tensor big = filled(DType::I32, {2}, {2147483647.0, 1});
  expectClose(run1("cumsum", {&big}, DType::I32, {2}, {{"axis", int64_t(0)}}),
              {2147483647.0, -2147483648.0});
}

TEST(CPUKernelsReduce, SumOfBF16IsTheF32Sum) {
  // The input widens exactly, so the f32 sum is the sum of the widened
  // input, bit for bit, whatever the pattern.
  for (auto [shape, axes] :
       std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>{
           {{6, 7}, {1}},
           {{64, 33, 17}, {1}},
           {{2, 3, 4, 5}, {0, 2}},
           {{4, 1, 5}, {1}},
           {{512, 96}, {0}}}) {
    SCOPED_TRACE(shapeString(shape) + " axes " + shapeString(axes));
    Tensor narrow = random(DType::F32, shape, -50, 50).as(DType::BF16);
    Tensor wide = narrow.as(DType::F32);
    std::vector<int64_t> out = reducedShape(shape, axes, false);
    EXPECT_EQ(
        run1("reduce_sum", {&narrow}, DType::F32, out, {{"axes", axes}}).bytes,
        run1("reduce_sum", {&wide}, DType::F32, out, {{"axes", axes}}).bytes);
  }
}

TEST(CPUKernelsReduce, EmptyReductionsAndNaN) {
  Tensor x(DType::F32, {3, 0});
  double nan = std::numeric_limits<double>::quiet_NaN();
  expectClose(run1("reduce_sum", {&x}, DType::F32, {3},
                   {{"axes", std::vector<int64_t>{1}}}),
              {0, 0, 0});
  expectClose(run1("reduce_mean", {&x}, DType::F32, {3},
                   {{"axes", std::vector<int64_t>{1}}}),
              {nan, nan, nan});
  Tensor withNaN = filled(DType::F32, {2, 3}, {1, nan, 2, 3, 4, 5});
  expectClose(run1("reduce_max", {&withNaN}, DType::F32, {2},
                   {{"axes", std::vector<int64_t>{1}}}),
              {nan, 5});
}

TEST(CPUKernelsReduce, CheckRejects) {
  Tensor x(DType::F32, {4, 5}), y(DType::F32, {4});
  std::vector<int64_t> axis1{1};
  EXPECT_EQ(
      checkMessage(makeKernel("reduce_sum", {&x}, {y}, {{"axes", axis1}})), "");
  EXPECT_REJECTED(makeKernel("reduce_sum", {&x}, {y}),
                  "missing attribute 'axes'");
  EXPECT_REJECTED(
      makeKernel("reduce_sum", {&x}, {y}, {{"axes", std::vector<int64_t>{2}}}),
      "axis 2 is out of range for rank 2");
  EXPECT_REJECTED(makeKernel("reduce_sum", {&x}, {Tensor(DType::F32, {5})},
                             {{"axes", axis1}}),
                  "result [5] should be [4] or [4,1]");
  EXPECT_REJECTED(makeKernel("reduce_sum", {&x}, {Tensor(DType::F64, {4})},
                             {{"axes", axis1}}),
                  "same dtype");
  Tensor xi(DType::I32, {4, 5}), yi(DType::I32, {4});
  EXPECT_EQ(
      checkMessage(makeKernel("reduce_max", {&xi}, {yi}, {{"axes", axis1}})),
      "");
  EXPECT_REJECTED(makeKernel("reduce_mean", {&xi}, {yi}, {{"axes", axis1}}),
                  "only f32 and f64");
  Tensor xb(DType::I1, {4, 5}), yb(DType::I1, {4});
  EXPECT_REJECTED(makeKernel("reduce_sum", {&xb}, {yb}, {{"axes", axis1}}),
                  "input has dtype i1");
  EXPECT_REJECTED(makeKernel("reduce_sum", {&x, &x}, {y}, {{"axes", axis1}}),
                  "expected 1 input(s)");
  EXPECT_REJECTED(makeKernel("reduce_sum", {&x}, {y}, {{"axes", int64_t(1)}}),
                  "must be an integer list");
}

//===----------------------------------------------------------------------===//
// softmax, log_softmax, layer_norm, cross_entropy
//===----------------------------------------------------------------------===//

std::vector<double> referenceSoftmax(const Tensor &x, int64_t axis, bool log) {
  int64_t outer = numElements(
      std::vector<int64_t>(x.shape.begin(), x.shape.begin() + axis));
  int64_t n = x.shape[size_t(axis)];
  int64_t inner = x.size() / std::max<int64_t>(1, outer * n);
  std::vector<double> y(size_t(x.size()));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      double max = -INFINITY, sum = 0;
      for (int64_t i = 0; i < n; ++i)
        max = std::max(max, x.get((o * n + i) * inner + j));
      for (int64_t i = 0; i < n; ++i)
        sum += std::exp(x.get((o * n + i) * inner + j) - max);
      for (int64_t i = 0; i < n; ++i) {
        double v = x.get((o * n + i) * inner + j) - max;
        y[size_t((o * n + i) * inner + j)] =
            log ? v - std::log(sum) : std::exp(v) / sum;
      }
    }
  return y;
}

TEST(CPUKernelsNormalization, SoftmaxAndLogSoftmax) {
  struct Case {
    std::vector<int64_t> shape;
    int64_t axis;
  };
  for (const Case &c : std::vector<Case>{{{4, 33}, -1},
                                         {{2, 3, 128}, 2},
                                         {{5, 7, 3}, 1},
                                         {{6, 4}, 0},
                                         {{17}, 0}})
    for (DType dtype : {DType::F32, DType::F64})
      for (bool log : {false, true}) {
        SCOPED_TRACE(shapeString(c.shape) + " axis " + std::to_string(c.axis) +
                     (log ? " log" : ""));
        Tensor x = random(dtype, c.shape, -10, 10);
        Tensor y = run1(log ? "log_softmax" : "softmax", {&x}, dtype, c.shape,
                        {{"axis", c.axis}});
        int64_t axis = c.axis < 0 ? c.axis + int64_t(c.shape.size()) : c.axis;
        expectClose(y, referenceSoftmax(x, axis, log), 1e-5, 1e-7);
      }
  // Large values do not overflow.
  Tensor big = filled(DType::F32, {3}, {1000, 1000, -1000});
  expectClose(run1("softmax", {&big}, DType::F32, {3}), {0.5, 0.5, 0});
}

/// The mean and 1 / sqrt(variance + eps) of row `r` (n elements) of x, naively
/// in double.
std::pair<double, double> referenceRowStatistics(const Tensor &x, int64_t r,
                                                 int64_t n, double eps) {
  double mean = 0, var = 0;
  for (int64_t i = 0; i < n; ++i)
    mean += x.get(r * n + i) / double(n);
  for (int64_t i = 0; i < n; ++i)
    var += std::pow(x.get(r * n + i) - mean, 2) / double(n);
  return {mean, 1 / std::sqrt(var + eps)};
}

TEST(CPUKernelsNormalization, LayerNorm) {
  struct Case {
    std::vector<int64_t> shape;
    int64_t axis;
  };
  for (const Case &c : std::vector<Case>{
           {{8, 768}, -1}, {{2, 3, 4, 5}, 2}, {{3, 7}, 0}, {{5, 1}, 1}})
    for (DType dtype : {DType::F32, DType::F64}) {
      SCOPED_TRACE(shapeString(c.shape) + " axis " + std::to_string(c.axis));
      int64_t axis = c.axis < 0 ? c.axis + int64_t(c.shape.size()) : c.axis;
      std::vector<int64_t> normalized(c.shape.begin() + axis, c.shape.end());
      Tensor x = random(dtype, c.shape, -3, 5);
      Tensor scale = random(dtype, normalized),
             bias = random(dtype, normalized);
      double eps = 1e-5;
      Tensor y = run1("layer_norm", {&x, &scale, &bias}, dtype, c.shape,
                      {{"axis", c.axis}, {"epsilon", eps}});
      int64_t n = numElements(normalized), rows = x.size() / n;
      std::vector<double> expected(size_t(x.size()));
      for (int64_t r = 0; r < rows; ++r) {
        auto [mean, rstd] = referenceRowStatistics(x, r, n, eps);
        for (int64_t i = 0; i < n; ++i)
          expected[size_t(r * n + i)] =
              (x.get(r * n + i) - mean) * rstd * scale.get(i) + bias.get(i);
      }
      expectClose(y, expected, 1e-5, 1e-5);
    }
}

/// layer_norm_backward against the explicit Jacobian of the normalization,
/// d xhat_j / d x_i = rstd (delta_ij - 1/n - xhat_i xhat_j / n), a sum the
/// kernel never forms.
TEST(CPUKernelsNormalization, LayerNormBackward) {
  struct Case {
    std::vector<int64_t> shape;
    int64_t axis;
  };
  for (const Case &c : std::vector<Case>{{{8, 768}, -1},
                                         {{2, 3, 4, 5}, 2},
                                         {{3, 7}, 0},
                                         {{5, 1}, 1},
                                         {{130, 70}, 1}})
    for (DType dtype : {DType::F32, DType::F64}) {
      SCOPED_TRACE(shapeString(c.shape) + " axis " + std::to_string(c.axis) +
                   " " + dtypeName(dtype));
      int64_t axis = c.axis < 0 ? c.axis + int64_t(c.shape.size()) : c.axis;
      std::vector<int64_t> normalized(c.shape.begin() + axis, c.shape.end());
      Tensor x = random(dtype, c.shape, -3, 5);
      Tensor scale = random(dtype, normalized, 0.5, 1.5);
      Tensor dy = random(dtype, c.shape, -1, 1);
      double eps = 1e-5;
      std::vector<Tensor> grads{Tensor(dtype, c.shape),
                                Tensor(dtype, normalized),
                                Tensor(dtype, normalized)};
      std::vector<const Tensor *> inputs{&x, &scale, &dy};
      Instruction inst = makeKernel("layer_norm_backward", inputs, grads,
                                    {{"axis", c.axis}, {"epsilon", eps}});
      ASSERT_EQ(runKernel(inst, inputs, grads), "");

      int64_t n = numElements(normalized), rows = x.size() / n;
      std::vector<double> dx(static_cast<size_t>(x.size())),
          dscale(static_cast<size_t>(n)), dbias(static_cast<size_t>(n));
      for (int64_t r = 0; r < rows; ++r) {
        // Not a structured binding: the lambda below captures these.
        double mean, rstd;
        std::tie(mean, rstd) = referenceRowStatistics(x, r, n, eps);
        auto xhat = [&](int64_t i) { return (x.get(r * n + i) - mean) * rstd; };
        for (int64_t j = 0; j < n; ++j) {
          dscale[size_t(j)] += dy.get(r * n + j) * xhat(j);
          dbias[size_t(j)] += dy.get(r * n + j);
        }
        for (int64_t i = 0; i < n; ++i) {
          double sum = 0;
          for (int64_t j = 0; j < n; ++j) {
            double jacobian = rstd * ((i == j) - 1.0 / double(n) -
                                      xhat(i) * xhat(j) / double(n));
            sum += dy.get(r * n + j) * scale.get(j) * jacobian;
          }
          dx[size_t(r * n + i)] = sum;
        }
      }
      double rtol = dtype == DType::F32 ? 1e-5 : 1e-10;
      {
        SCOPED_TRACE("dx");
        expectCloseScaled(grads[0], dx, rtol, rtol);
      }
      {
        SCOPED_TRACE("dscale");
        expectCloseScaled(grads[1], dscale, rtol, rtol);
      }
      {
        SCOPED_TRACE("dbias");
        expectCloseScaled(grads[2], dbias, rtol, rtol);
      }
    }
}

/// log(sum(exp(row))) of row `i` of [..., classes] logits, in f64.
double referenceLogSumExp(const Tensor &logits, int64_t i) {
  const int64_t classes = logits.shape.back();
  double max = -INFINITY, sum = 0;
  for (int64_t c = 0; c < classes; ++c)
    max = std::max(max, logits.get(i * classes + c));
  for (int64_t c = 0; c < classes; ++c)
    sum += std::exp(logits.get(i * classes + c) - max);
  return max + std::log(sum);
}

TEST(CPUKernelsNormalization, CrossEntropy) {
  const int64_t classes = 11;
  Tensor logits = random(DType::F32, {3, 4, classes}, -5, 5);
  for (DType labelType : {DType::I32, DType::I64}) {
    Tensor labels(labelType, {3, 4});
    for (int64_t i = 0; i < 12; ++i)
      labels.set(i, double((i * 7) % classes));
    labels.set(5, -100); // ignored below
    std::vector<double> perSample;
    double sum = 0;
    int counted = 0;
    for (int64_t i = 0; i < 12; ++i) {
      int64_t label = int64_t(labels.get(i));
      if (label == -100) {
        perSample.push_back(0);
        continue;
      }
      double loss =
          referenceLogSumExp(logits, i) - logits.get(i * classes + label);
      perSample.push_back(loss);
      sum += loss;
      ++counted;
    }
    Attributes ignore{{"ignore_index", int64_t(-100)}};
    auto with = [&](const char *reduction) {
      Attributes attrs = ignore;
      attrs["reduction"] = std::string(reduction);
      return attrs;
    };
    expectClose(run1("cross_entropy", {&logits, &labels}, DType::F32, {3, 4},
                     with("none")),
                perSample, 1e-5, 1e-6);
    expectClose(
        run1("cross_entropy", {&logits, &labels}, DType::F32, {}, with("sum")),
        {sum}, 1e-5);
    expectClose(
        run1("cross_entropy", {&logits, &labels}, DType::F32, {}, ignore),
        {sum / counted}, 1e-5);
  }
  // Every sample ignored: the mean is NaN.
  Tensor ignored = filled(DType::I64, {2}, {-1, -1});
  Tensor two = random(DType::F64, {2, 3});
  expectClose(run1("cross_entropy", {&two, &ignored}, DType::F64, {},
                   {{"ignore_index", int64_t(-1)}}),
              {std::numeric_limits<double>::quiet_NaN()});
}

TEST(CPUKernelsNormalization, CrossEntropyLabelOutOfRangeIsRuntimeError) {
  Tensor logits = random(DType::F32, {4, 64});
  Tensor labels = filled(DType::I32, {4}, {1, 2, 3, 70});
  std::vector<Tensor> outputs{Tensor(DType::F32, {})};
  Instruction instruction =
      makeKernel("cross_entropy", {&logits, &labels}, outputs);
  EXPECT_EQ(runKernel(instruction, {&logits, &labels}, outputs),
            "label 70 of sample 3 is outside [0, 64)");
}

TEST(CPUKernelsNormalization, LayerNormNarrowResultAndGradient) {
  // Mixed precision folds a cast into each: the bf16 result is the f32
  // result rounded once, and a bf16 dout is read as its exact f32 values.
  Tensor x = random(DType::F32, {6, 300}, -3, 5);
  Tensor scale = random(DType::F32, {300}, 0.5, 1.5);
  Tensor bias = random(DType::F32, {300}, -1, 1);
  Attributes attrs{{"axis", int64_t(1)}};
  Tensor wide =
      run1("layer_norm", {&x, &scale, &bias}, DType::F32, {6, 300}, attrs);
  Tensor narrow =
      run1("layer_norm", {&x, &scale, &bias}, DType::BF16, {6, 300}, attrs);
  EXPECT_EQ(narrow.bytes, wide.as(DType::BF16).bytes);

  Tensor dyNarrow = random(DType::F32, {6, 300}, -1, 1).as(DType::BF16);
  Tensor dyWide = dyNarrow.as(DType::F32);
  auto backward = [&](const Tensor &dy) {
    std::vector<Tensor> outputs{Tensor(DType::F32, {6, 300}),
                                Tensor(DType::F32, {300}),
                                Tensor(DType::F32, {300})};
    Instruction inst =
        makeKernel("layer_norm_backward", {&x, &scale, &dy}, outputs, attrs);
    EXPECT_EQ(runKernel(inst, {&x, &scale, &dy}, outputs), "");
    return outputs;
  };
  std::vector<Tensor> fromNarrow = backward(dyNarrow);
  std::vector<Tensor> fromWide = backward(dyWide);
  for (size_t o = 0; o < 3; ++o)
    EXPECT_EQ(fromNarrow[o].bytes, fromWide[o].bytes) << "output " << o;
}

TEST(CPUKernelsNormalization, LayerNormBackwardAddsItsAddend) {
  // loom.fused_layer_norm_grad: dx is the addend plus the plain kernel's dx
  // (the same f32 addition a separate add does), and the bf16 copy is that
  // sum rounded once; dscale and dbias are the plain kernel's.
  for (DType dtype : {DType::F32, DType::F64}) {
    SCOPED_TRACE(dtypeName(dtype));
    Tensor x = random(dtype, {6, 300}, -3, 5);
    Tensor scale = random(dtype, {300}, 0.5, 1.5);
    Tensor dy = random(dtype, {6, 300}, -1, 1);
    Tensor addend = random(dtype, {6, 300}, -2, 2);
    Attributes attrs{{"axis", int64_t(1)}};
    std::vector<Tensor> plain{Tensor(dtype, {6, 300}), Tensor(dtype, {300}),
                              Tensor(dtype, {300})};
    ASSERT_EQ(runKernel(makeKernel("layer_norm_backward", {&x, &scale, &dy},
                                   plain, attrs),
                        {&x, &scale, &dy}, plain),
              "");
    std::vector<Tensor> fused = plain;
    if (dtype == DType::F32)
      fused.push_back(Tensor(DType::BF16, {6, 300}));
    ASSERT_EQ(runKernel(makeKernel("layer_norm_backward",
                                   {&x, &scale, &dy, &addend}, fused, attrs),
                        {&x, &scale, &dy, &addend}, fused),
              "");
    Tensor sum(dtype, {6, 300});
    for (int64_t i = 0; i < sum.size(); ++i)
      sum.set(i, dtype == DType::F32
                     ? double(float(addend.get(i)) + float(plain[0].get(i)))
                     : addend.get(i) + plain[0].get(i));
    EXPECT_EQ(fused[0].bytes, sum.bytes);
    EXPECT_EQ(fused[1].bytes, plain[1].bytes);
    EXPECT_EQ(fused[2].bytes, plain[2].bytes);
    if (dtype == DType::F32) {
      EXPECT_EQ(fused[3].bytes, sum.as(DType::BF16).bytes);
    }
  }
}

TEST(CPUKernelsNormalization, CrossEntropyReadsBF16Logits) {
  // bf16 logits widen exactly, so the f32 loss is the f32 kernel's on the
  // widened logits, bit for bit.
  Tensor logits = random(DType::F32, {6, 300}, -8, 8).as(DType::BF16);
  Tensor labels = filled(DType::I64, {6}, {0, 299, 17, 4, 150, 42});
  Tensor wide = logits.as(DType::F32);
  for (const char *reduction : {"mean", "none"}) {
    Attributes attrs{{"reduction", std::string(reduction)}};
    std::vector<int64_t> shape = std::string(reduction) == "none"
                                     ? std::vector<int64_t>{6}
                                     : std::vector<int64_t>{};
    Tensor narrow =
        run1("cross_entropy", {&logits, &labels}, DType::F32, shape, attrs);
    Tensor reference =
        run1("cross_entropy", {&wide, &labels}, DType::F32, shape, attrs);
    EXPECT_EQ(narrow.bytes, reference.bytes) << reduction;
  }
}

/// (softmax(row) - onehot(label)) * scale in f64, 0 for ignored samples.
std::vector<double> referenceCrossEntropyGrad(const Tensor &logits,
                                              const Tensor &labels,
                                              const Tensor &scale,
                                              int64_t ignoreIndex) {
  const int64_t classes = logits.shape.back();
  std::vector<double> grad(size_t(logits.size()), 0.0);
  for (int64_t i = 0; i < labels.size(); ++i) {
    int64_t label = int64_t(labels.get(i));
    if (label == ignoreIndex)
      continue;
    double lse = referenceLogSumExp(logits, i);
    double factor = scale.get(scale.size() == 1 ? 0 : i);
    for (int64_t c = 0; c < classes; ++c) {
      double p = std::exp(logits.get(i * classes + c) - lse);
      grad[size_t(i * classes + c)] = (p - (c == label ? 1 : 0)) * factor;
    }
  }
  return grad;
}

TEST(CPUKernelsNormalization, CrossEntropyBackward) {
  struct Case {
    DType logits, result;
    std::vector<int64_t> shape;
    bool scalePerSample;
  };
  const Case cases[] = {
      {DType::F32, DType::F32, {3, 4, 11}, false},
      {DType::F32, DType::F32, {5, 2000}, true},
      {DType::F64, DType::F64, {3, 4, 11}, true},
      {DType::F64, DType::F32, {7, 33}, false},
      {DType::F32, DType::BF16, {7, 33}, true},
      {DType::BF16, DType::BF16, {4, 3000}, false},
      {DType::BF16, DType::F32, {4, 300}, true},
      {DType::F32, DType::F32, {5, 1}, false}, // one class: all zero
      {DType::F32, DType::F32, {0, 6}, false}, // no samples
  };
  const int64_t ignore = -100;
  for (const Case &c : cases) {
    std::vector<int64_t> samples(c.shape.begin(), c.shape.end() - 1);
    const int64_t classes = c.shape.back();
    Tensor logits = random(c.logits, c.shape, -6, 6);
    for (DType labelType : {DType::I32, DType::I64}) {
      Tensor labels(labelType, samples);
      for (int64_t i = 0; i < labels.size(); ++i)
        labels.set(i, double((i * 5 + 3) % classes));
      if (labels.size() > 2)
        labels.set(1, double(ignore));
      DType lossType = c.logits == DType::F64 ? DType::F64 : DType::F32;
      Tensor scale = c.scalePerSample ? random(lossType, samples, 0.1, 2)
                                      : filled(lossType, {}, {0.25});
      Tensor grad = run1("cross_entropy_backward", {&logits, &labels, &scale},
                         c.result, c.shape, {{"ignore_index", ignore}});
      SCOPED_TRACE(std::string(dtypeName(c.logits)) + " -> " +
                   dtypeName(c.result) + " " + shapeString(c.shape));
      // Rounded once from the computed value: bf16 to half an ulp (2^-8),
      // f32 near its own precision (the exponentials' error), f64 tightly.
      double rtol = c.result == DType::BF16 ? 1.0 / 256
                    : lossType == DType::F32
                        ? 2e-6
                        : (c.result == DType::F32 ? 1e-7 : 1e-13);
      double atol = c.result == DType::BF16 ? 1e-7 : 1e-10;
      expectClose(grad,
                  referenceCrossEntropyGrad(logits, labels, scale, ignore),
                  rtol, atol);
      if (labels.size() > 2) {
        for (int64_t k = classes; k < 2 * classes; ++k)
          EXPECT_EQ(grad.get(k), 0.0)
              << "ignored sample, class " << k - classes;
      }
    }
  }
}

TEST(CPUKernelsNormalization, CrossEntropyBackwardRoundsOnce) {
  // The narrow result is the wide result rounded once: what the cast it
  // replaces did.
  Tensor logits = random(DType::F32, {8, 500}, -6, 6);
  Tensor labels = filled(DType::I64, {8}, {0, 1, 2, 3, 499, 5, 6, 7});
  Tensor scale = filled(DType::F32, {}, {1.0 / 8});
  Tensor wide = run1("cross_entropy_backward", {&logits, &labels, &scale},
                     DType::F32, {8, 500});
  Tensor narrow = run1("cross_entropy_backward", {&logits, &labels, &scale},
                       DType::BF16, {8, 500});
  EXPECT_EQ(narrow.bytes, wide.as(DType::BF16).bytes);
  // bf16 logits are read as their exact f32 values.
  Tensor bf16 = logits.as(DType::BF16);
  Tensor widened = bf16.as(DType::F32);
  EXPECT_EQ(run1("cross_entropy_backward", {&bf16, &labels, &scale}, DType::F32,
                 {8, 500})
                .bytes,
            run1("cross_entropy_backward", {&widened, &labels, &scale},
                 DType::F32, {8, 500})
                .bytes);
}

TEST(CPUKernelsNormalization, CrossEntropyBackwardMatchesFiniteDifferences) {
  // d/dx of sum_i scale_i * loss_i through the forward kernel (f64, central
  // differences), independent of the softmax formula.
  Tensor logits = random(DType::F64, {3, 7}, -3, 3);
  Tensor labels = filled(DType::I64, {3}, {6, 0, 3});
  Tensor scale = filled(DType::F64, {3}, {0.5, -1.25, 2.0});
  Tensor grad = run1("cross_entropy_backward", {&logits, &labels, &scale},
                     DType::F64, {3, 7});
  auto objective = [&](const Tensor &x) {
    Tensor losses = run1("cross_entropy", {&x, &labels}, DType::F64, {3},
                         {{"reduction", std::string("none")}});
    double total = 0;
    for (int64_t i = 0; i < 3; ++i)
      total += scale.get(i) * losses.get(i);
    return total;
  };
  std::vector<double> numeric;
  const double h = 1e-6;
  for (int64_t k = 0; k < logits.size(); ++k) {
    Tensor up = logits, down = logits;
    up.set(k, logits.get(k) + h);
    down.set(k, logits.get(k) - h);
    numeric.push_back((objective(up) - objective(down)) / (2 * h));
  }
  expectClose(grad, numeric, 1e-6, 1e-8);
}

/// `logits` [rows, classes] as rows of `width` whose padding holds values
/// that would change any softmax they took part in (huge, -inf and NaN).
Tensor padClasses(const Tensor &logits, int64_t width) {
  const int64_t rows = logits.shape[0], classes = logits.shape[1];
  Tensor padded(logits.dtype, {rows, width});
  const double junk[] = {1e30, -std::numeric_limits<double>::infinity(),
                         std::numeric_limits<double>::quiet_NaN()};
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t c = 0; c < width; ++c)
      padded.set(i * width + c,
                 c < classes ? logits.get(i * classes + c) : junk[(i + c) % 3]);
  return padded;
}

TEST(CPUKernelsNormalization, CrossEntropyPaddedClassesAreLeftOut) {
  // With `classes`, rows of padded logits give exactly the loss and the
  // gradient of the unpadded rows, whatever the padding holds; the
  // gradient of the padding is 0, also for ignored samples.
  const int64_t rows = 5, classes = 13, width = 16;
  for (DType dtype : {DType::F32, DType::BF16, DType::F64}) {
    SCOPED_TRACE(dtypeName(dtype));
    DType loss = dtype == DType::F64 ? DType::F64 : DType::F32;
    Tensor logits = random(DType::F32, {rows, classes}, -5, 5).as(dtype);
    Tensor padded = padClasses(logits, width);
    Tensor labels = filled(DType::I64, {rows}, {0, 12, -100, 7, 3});
    Attributes classesAttr{{"classes", classes}, {"ignore_index", -100}};
    for (const char *reduction : {"mean", "sum", "none"}) {
      SCOPED_TRACE(reduction);
      std::vector<int64_t> shape;
      if (std::string(reduction) == "none")
        shape = {rows};
      Attributes plain{{"reduction", std::string(reduction)},
                       {"ignore_index", -100}};
      Attributes withClasses = plain;
      withClasses["classes"] = classes;
      EXPECT_EQ(
          run1("cross_entropy", {&padded, &labels}, loss, shape, withClasses)
              .bytes,
          run1("cross_entropy", {&logits, &labels}, loss, shape, plain).bytes);
    }
    Tensor scale = filled(loss, {rows}, {0.5, -1, 2, 0.25, 1});
    DType narrow = dtype == DType::F64 ? DType::F32 : DType::BF16;
    for (DType result : {loss, narrow}) {
      Tensor expected =
          run1("cross_entropy_backward", {&logits, &labels, &scale}, result,
               {rows, classes}, {{"ignore_index", -100}});
      Tensor grad = run1("cross_entropy_backward", {&padded, &labels, &scale},
                         result, {rows, width}, classesAttr);
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t c = 0; c < width; ++c) {
          double want = c < classes ? expected.get(i * classes + c) : 0.0;
          EXPECT_EQ(grad.get(i * width + c), want)
              << dtypeName(result) << " sample " << i << ", entry " << c;
        }
    }
  }
}

TEST(CPUKernelsNormalization, CrossEntropyLabelInPaddingIsRuntimeError) {
  Tensor logits = random(DType::F32, {3, 16});
  Tensor labels = filled(DType::I64, {3}, {1, 2, 13});
  Tensor scale = filled(DType::F32, {}, {1});
  Attributes attrs{{"classes", int64_t(13)}};
  std::vector<Tensor> losses{Tensor(DType::F32, {})};
  EXPECT_EQ(
      runKernel(makeKernel("cross_entropy", {&logits, &labels}, losses, attrs),
                {&logits, &labels}, losses),
      "label 13 of sample 2 is outside [0, 13)");
  std::vector<Tensor> grads{Tensor(DType::F32, {3, 16})};
  EXPECT_EQ(runKernel(makeKernel("cross_entropy_backward",
                                 {&logits, &labels, &scale}, grads, attrs),
                      {&logits, &labels, &scale}, grads),
            "label 13 of sample 2 is outside [0, 13)");
}

TEST(CPUKernelsNormalization,
     CrossEntropyBackwardLabelOutOfRangeIsRuntimeError) {
  Tensor logits = random(DType::F32, {4, 64});
  Tensor labels = filled(DType::I32, {4}, {1, -2, 3, 4});
  Tensor scale = filled(DType::F32, {}, {1});
  std::vector<Tensor> outputs{Tensor(DType::F32, {4, 64})};
  Instruction instruction =
      makeKernel("cross_entropy_backward", {&logits, &labels, &scale}, outputs);
  EXPECT_EQ(runKernel(instruction, {&logits, &labels, &scale}, outputs),
            "label -2 of sample 1 is outside [0, 64)");
  EXPECT_TRUE(std::isnan(outputs[0].get(64)));
}

TEST(CPUKernelsNormalization, CrossEntropyWithGradientIsBothKernels) {
  // cross_entropy with the gradient's scale as a third input stores the
  // loss cross_entropy computes and the gradient cross_entropy_backward
  // computes, bit for bit: padded classes, an ignored sample, every
  // reduction, scalar and per-sample scales, wide and narrow gradients.
  const int64_t rows = 6, classes = 37, width = 40;
  for (DType dtype : {DType::F32, DType::BF16, DType::F64}) {
    SCOPED_TRACE(dtypeName(dtype));
    DType lossType = dtype == DType::F64 ? DType::F64 : DType::F32;
    DType narrow = dtype == DType::F64 ? DType::F32 : DType::BF16;
    Tensor logits = random(DType::F32, {rows, width}, -6, 6).as(dtype);
    Tensor labels = filled(DType::I64, {rows}, {0, 36, -100, 7, 3, 20});
    Tensor scalar = filled(lossType, {}, {1.0 / 5});
    Tensor perSample = filled(lossType, {rows}, {0.5, -1, 2, 0.25, 1, 3});
    for (const char *reduction : {"mean", "sum", "none"}) {
      for (const Tensor *scale : {&scalar, &perSample}) {
        for (DType result : {lossType, narrow}) {
          SCOPED_TRACE(std::string(reduction) + " " + dtypeName(result) +
                       (scale == &scalar ? " scalar" : " per sample"));
          Attributes labelAttrs{{"classes", classes}, {"ignore_index", -100}};
          Attributes attrs = labelAttrs;
          attrs["reduction"] = std::string(reduction);
          std::vector<int64_t> lossShape;
          if (std::string(reduction) == "none")
            lossShape = {rows};
          Tensor loss = run1("cross_entropy", {&logits, &labels}, lossType,
                             lossShape, attrs);
          Tensor grad =
              run1("cross_entropy_backward", {&logits, &labels, scale}, result,
                   {rows, width}, labelAttrs);
          std::vector<Tensor> both{Tensor(lossType, lossShape),
                                   Tensor(result, {rows, width})};
          std::vector<const Tensor *> in{&logits, &labels, scale};
          ASSERT_EQ(
              runKernel(makeKernel("cross_entropy", in, both, attrs), in, both),
              "");
          EXPECT_EQ(both[0].bytes, loss.bytes);
          EXPECT_EQ(both[1].bytes, grad.bytes);
        }
      }
    }
  }
}

TEST(CPUKernelsNormalization, CrossEntropyWithGradientLabelOutOfRange) {
  Tensor logits = random(DType::F32, {3, 8});
  Tensor labels = filled(DType::I32, {3}, {1, 9, 3});
  Tensor scale = filled(DType::F32, {}, {1});
  std::vector<Tensor> outputs{Tensor(DType::F32, {}),
                              Tensor(DType::F32, {3, 8})};
  std::vector<const Tensor *> in{&logits, &labels, &scale};
  EXPECT_EQ(runKernel(makeKernel("cross_entropy", in, outputs), in, outputs),
            "label 9 of sample 1 is outside [0, 8)");
  EXPECT_TRUE(std::isnan(outputs[0].get(0)));
  EXPECT_TRUE(std::isnan(outputs[1].get(8)));
  EXPECT_FALSE(std::isnan(outputs[1].get(0)));
}

TEST(CPUKernelsNormalization, CrossEntropyWithGradientCheckRejects) {
  Tensor logits(DType::BF16, {4, 8});
  Tensor labels(DType::I64, {4});
  Tensor scale(DType::F32, {}), scaleBF16(DType::BF16, {});
  Tensor loss(DType::F32, {}), grad(DType::BF16, {4, 8});
  EXPECT_REJECTED(
      makeKernel("cross_entropy", {&logits, &labels, &scale}, {loss}),
      "or 3 inputs (and the gradient's scale) and 2 outputs (and "
      "the gradient), got 3 and 1");
  EXPECT_REJECTED(
      makeKernel("cross_entropy", {&logits, &labels, &scaleBF16}, {loss, grad}),
      "scale has dtype bf16; bf16 logits need f32");
  EXPECT_REJECTED(makeKernel("cross_entropy", {&logits, &labels, &scale},
                             {loss, Tensor(DType::F64, {4, 8})}),
                  "dlogits have dtype f64; bf16 logits give f32 or bf16");
  EXPECT_REJECTED(makeKernel("cross_entropy", {&logits, &labels, &scale},
                             {loss, Tensor(DType::BF16, {4, 7})}),
                  "must have the same shape");
  EXPECT_REJECTED(makeKernel("cross_entropy", {&logits, &labels, &scale},
                             {Tensor(DType::BF16, {}), grad}),
                  "loss has dtype bf16");
}

TEST(CPUKernelsNormalization, CheckRejects) {
  Tensor x(DType::F32, {4, 5}), y(DType::F32, {4, 5});
  EXPECT_REJECTED(makeKernel("softmax", {&x}, {y}, {{"axis", int64_t(2)}}),
                  "axis 2 is out of range for rank 2");
  EXPECT_REJECTED(makeKernel("softmax", {&x}, {Tensor(DType::F32, {5, 4})}),
                  "input [4,5] and result [5,4] must have the same shape");
  Tensor xi(DType::I32, {4, 5});
  EXPECT_REJECTED(makeKernel("log_softmax", {&xi}, {xi}), "only f32 and f64");
  EXPECT_REJECTED(makeKernel("softmax", {&x}, {y}, {{"dim", int64_t(1)}}),
                  "unknown attribute 'dim'");

  Tensor scale(DType::F32, {5}), bias(DType::F32, {5});
  EXPECT_EQ(checkMessage(makeKernel("layer_norm", {&x, &scale, &bias}, {y},
                                    {{"axis", int64_t(-1)}})),
            "");
  Tensor wrongScale(DType::F32, {4, 5});
  EXPECT_REJECTED(makeKernel("layer_norm", {&x, &wrongScale, &bias}, {y}),
                  "scale [4,5] should be [5]");
  EXPECT_REJECTED(makeKernel("layer_norm", {&x, &scale, &bias}, {y},
                             {{"axis", int64_t(0)}}),
                  "scale [5] should be [4,5]");
  EXPECT_REJECTED(makeKernel("layer_norm", {&x, &scale}, {y}),
                  "expected 3 input(s)");
  EXPECT_REJECTED(
      makeKernel("layer_norm", {&x, &scale, &bias}, {y}, {{"epsilon", -1.0}}),
      "epsilon must be >= 0");
  Tensor scale64(DType::F64, {5});
  EXPECT_REJECTED(makeKernel("layer_norm", {&x, &scale64, &bias}, {y}),
                  "same dtype");

  EXPECT_EQ(checkMessage(makeKernel("layer_norm", {&x, &scale, &bias},
                                    {Tensor(DType::BF16, {4, 5})})),
            "");
  EXPECT_REJECTED(makeKernel("layer_norm", {&x, &scale, &bias},
                             {Tensor(DType::F64, {4, 5})}),
                  "result has dtype f64; input f32 needs f32 or bf16");
  Tensor dscale(DType::F32, {5}), dbias(DType::F32, {5});
  Tensor dyNarrow(DType::BF16, {4, 5});
  EXPECT_EQ(
      checkMessage(makeKernel("layer_norm_backward", {&x, &scale, &dyNarrow},
                              {y, dscale, dbias})),
      "");
  EXPECT_EQ(checkMessage(makeKernel("layer_norm_backward", {&x, &scale, &x},
                                    {y, dscale, dbias})),
            "");
  EXPECT_REJECTED(makeKernel("layer_norm_backward", {&x, &scale, &x},
                             {y, dscale, Tensor(DType::F32, {4})}),
                  "dbias [4] should be [5]");
  EXPECT_REJECTED(
      makeKernel("layer_norm_backward", {&x, &scale, &x}, {y, dscale}),
      "3 or 4 outputs (dinput, dscale, dbias, dinput_bf16), got 3 and 2");
  Tensor yNarrow(DType::BF16, {4, 5}), addend64(DType::F64, {4, 5});
  Tensor transposed(DType::F32, {5, 4});
  EXPECT_EQ(checkMessage(makeKernel("layer_norm_backward", {&x, &scale, &x, &x},
                                    {y, dscale, dbias, yNarrow})),
            "");
  EXPECT_REJECTED(makeKernel("layer_norm_backward", {&x, &scale, &x, &addend64},
                             {y, dscale, dbias}),
                  "input (f32) and addend (f64) must have the same dtype");
  EXPECT_REJECTED(makeKernel("layer_norm_backward",
                             {&x, &scale, &x, &transposed}, {y, dscale, dbias}),
                  "input [4,5] and addend [5,4] must have the same shape");
  EXPECT_REJECTED(
      makeKernel("layer_norm_backward", {&x, &scale, &x},
                 {y, dscale, dbias, y}),
      "dinput_bf16 has dtype f32; it must be bf16, of an f32 input");
  EXPECT_REJECTED(makeKernel("layer_norm_backward", {&x, &scale, &transposed},
                             {y, dscale, dbias}),
                  "input [4,5] and dout [5,4] must have the same shape");
  EXPECT_REJECTED(
      makeKernel("layer_norm_backward", {&x, &scale64, &x}, {y, dscale, dbias}),
      "same dtype");
  EXPECT_REJECTED(makeKernel("layer_norm_backward", {&x, &scale, &x},
                             {y, dscale, dbias}, {{"epsilon", -1.0}}),
                  "epsilon must be >= 0");

  Tensor labels(DType::I64, {4}), loss(DType::F32, {});
  EXPECT_EQ(checkMessage(makeKernel("cross_entropy", {&x, &labels}, {loss})),
            "");
  Tensor badLabels(DType::I64, {5});
  EXPECT_REJECTED(makeKernel("cross_entropy", {&x, &badLabels}, {loss}),
                  "labels [5] should be [4]");
  Tensor floatLabels(DType::F32, {4});
  EXPECT_REJECTED(makeKernel("cross_entropy", {&x, &floatLabels}, {loss}),
                  "labels have dtype f32; expected i32 or i64");
  EXPECT_REJECTED(makeKernel("cross_entropy", {&x, &labels}, {loss},
                             {{"reduction", std::string("avg")}}),
                  "reduction must be mean, sum or none");
  EXPECT_REJECTED(makeKernel("cross_entropy", {&x, &labels}, {loss},
                             {{"reduction", std::string("none")}}),
                  "loss [] should be [4] with reduction=none");
  EXPECT_REJECTED(
      makeKernel("cross_entropy", {&x, &labels}, {Tensor(DType::F32, {4})}),
      "should be a scalar");
  EXPECT_REJECTED(makeKernel("cross_entropy", {&x, &labels}, {loss},
                             {{"ignore_index", 1.5}}),
                  "must be an integer");
  Tensor xb(DType::BF16, {4, 5});
  EXPECT_EQ(checkMessage(makeKernel("cross_entropy", {&xb, &labels}, {loss})),
            "");
  EXPECT_REJECTED(
      makeKernel("cross_entropy", {&xb, &labels}, {Tensor(DType::BF16, {})}),
      "loss has dtype bf16; bf16 logits need f32");

  EXPECT_EQ(checkMessage(makeKernel("cross_entropy_backward",
                                    {&x, &labels, &loss}, {y})),
            "");
  Tensor perSample(DType::F32, {4});
  EXPECT_EQ(checkMessage(makeKernel("cross_entropy_backward",
                                    {&xb, &labels, &perSample}, {xb})),
            "");
  EXPECT_REJECTED(makeKernel("cross_entropy_backward",
                             {&x, &labels, &perSample}, {y},
                             {{"reduction", std::string("mean")}}),
                  "unknown attribute 'reduction'");
  EXPECT_REJECTED(makeKernel("cross_entropy_backward", {&x, &labels}, {y}),
                  "expected 3 input(s)");
  Tensor loss64(DType::F64, {});
  EXPECT_REJECTED(
      makeKernel("cross_entropy_backward", {&x, &labels, &loss64}, {y}),
      "scale has dtype f64; f32 logits need f32");
  EXPECT_REJECTED(
      makeKernel("cross_entropy_backward", {&x, &labels, &dscale}, {y}),
      "scale [5] should be a scalar or [4] (one per sample)");
  EXPECT_REJECTED(makeKernel("cross_entropy_backward", {&x, &labels, &loss},
                             {Tensor(DType::F32, {5, 4})}),
                  "logits [4,5] and dlogits [5,4] must have the same shape");
  EXPECT_REJECTED(makeKernel("cross_entropy_backward", {&x, &labels, &loss},
                             {Tensor(DType::F64, {4, 5})}),
                  "dlogits have dtype f64; f32 logits give f32 or bf16");
  Tensor x64(DType::F64, {4, 5});
  EXPECT_REJECTED(makeKernel("cross_entropy_backward", {&x64, &labels, &loss64},
                             {Tensor(DType::BF16, {4, 5})}),
                  "dlogits have dtype bf16; f64 logits give f64 or f32");
  EXPECT_EQ(checkMessage(makeKernel("cross_entropy", {&x, &labels}, {loss},
                                    {{"classes", int64_t(5)}})),
            "");
  EXPECT_REJECTED(makeKernel("cross_entropy", {&x, &labels}, {loss},
                             {{"classes", int64_t(6)}}),
                  "classes 6 must be in [1, 5] for logits [4,5]");
  EXPECT_REJECTED(makeKernel("cross_entropy_backward", {&x, &labels, &loss},
                             {y}, {{"classes", int64_t(0)}}),
                  "classes 0 must be in [1, 5] for logits [4,5]");
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

TEST(CPUKernelsDataMovement, Gather) {
  // Embedding lookup: axis 0.
  Tensor table = random(DType::F32, {10, 6});
  Tensor ids = filled(DType::I64, {2, 3}, {0, 9, -1, 4, 4, -10});
  Tensor y = run1("gather", {&table, &ids}, DType::F32, {2, 3, 6});
  std::vector<double> expected;
  for (int64_t i = 0; i < 6; ++i) {
    int64_t row = int64_t(ids.get(i));
    row = row < 0 ? row + 10 : row;
    for (int64_t j = 0; j < 6; ++j)
      expected.push_back(table.get(row * 6 + j));
  }
  expectClose(y, expected, 0, 0);

  // Middle axis, i32 indices, integer data, scalar index.
  Tensor x = random(DType::I32, {3, 5, 4}, -100, 100);
  Tensor idx = filled(DType::I32, {2}, {4, 1});
  Tensor g =
      run1("gather", {&x, &idx}, DType::I32, {3, 2, 4}, {{"axis", int64_t(1)}});
  expected.clear();
  for (int64_t o = 0; o < 3; ++o)
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 4; ++j)
        expected.push_back(x.get((o * 5 + int64_t(idx.get(i))) * 4 + j));
  expectClose(g, expected, 0, 0);
  Tensor scalarIndex = filled(DType::I64, {}, {-1});
  Tensor last = run1("gather", {&x, &scalarIndex}, DType::I32, {3, 5},
                     {{"axis", int64_t(-1)}});
  expected.clear();
  for (int64_t i = 0; i < 15; ++i)
    expected.push_back(x.get(i * 4 + 3));
  expectClose(last, expected, 0, 0);
}

TEST(CPUKernelsDataMovement, GatherOutOfRangeIsRuntimeError) {
  Tensor table = random(DType::F32, {10, 6});
  Tensor ids = filled(DType::I32, {3}, {0, 10, 2});
  std::vector<Tensor> outputs{Tensor(DType::F32, {3, 6})};
  EXPECT_EQ(runKernel(makeKernel("gather", {&table, &ids}, outputs),
                      {&table, &ids}, outputs),
            "index 10 at position 1 is outside [-10, 10)");
  Tensor negative = filled(DType::I32, {1}, {-11});
  std::vector<Tensor> one{Tensor(DType::F32, {1, 6})};
  EXPECT_NE(runKernel(makeKernel("gather", {&table, &negative}, one),
                      {&table, &negative}, one),
            "");
}

TEST(CPUKernelsDataMovement, ScatterAdd) {
  // The embedding gradient: rows collect the slices that name them; repeated
  // and negative indices, untouched rows stay zero; wide rows span several
  // column chunks.
  for (int64_t width : {3, 150}) {
    Tensor updates = random(DType::F32, {2, 3, width});
    Tensor ids = filled(DType::I64, {2, 3}, {4, 0, -1, 4, 9, 2});
    Tensor y = run1("scatter_add", {&updates, &ids}, DType::F32, {10, width});
    std::vector<double> expected(size_t(10 * width), 0.0);
    for (int64_t i = 0; i < 6; ++i) {
      int64_t row = int64_t(ids.get(i));
      row = row < 0 ? row + 10 : row;
      for (int64_t j = 0; j < width; ++j)
        expected[size_t(row * width + j)] += updates.get(i * width + j);
    }
    expectClose(y, expected, 1e-6, 1e-6);
  }
  Tensor updates = random(DType::F64, {3, 2});
  Tensor bad = filled(DType::I32, {3}, {0, 10, 2});
  std::vector<Tensor> outputs{Tensor(DType::F64, {10, 2})};
  EXPECT_EQ(runKernel(makeKernel("scatter_add", {&updates, &bad}, outputs),
                      {&updates, &bad}, outputs),
            "index 10 at position 1 is outside [-10, 10)");
}

TEST(CPUKernelsDataMovement, Transpose) {
  struct Case {
    std::vector<int64_t> shape, permutation;
  };
  std::vector<Case> cases = {
      {{5, 7}, {1, 0}},
      {{67, 45}, {1, 0}},
      {{2, 9, 3, 8}, {0, 2, 1, 3}}, // attention heads: contiguous rows
      {{2, 9, 3, 8}, {0, 2, 3, 1}}, // keys transposed
      {{3, 4, 5}, {2, 0, 1}},
      {{3, 4, 5}, {0, 1, 2}},
      {{3, 1, 5}, {2, 1, 0}},
      {{4}, {0}},
      {{}, {}},
      {{2, 3, 4, 5, 6}, {4, 2, 0, 3, 1}},
  };
  for (DType dtype :
       {DType::F32, DType::F64, DType::I1, DType::I32, DType::BF16})
    for (const Case &c : cases) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + shapeString(c.shape) +
                   " perm " + shapeString(c.permutation));
      Tensor x = random(dtype, c.shape, -100, 100);
      std::vector<int64_t> outShape;
      for (int64_t p : c.permutation)
        outShape.push_back(c.shape[size_t(p)]);
      Tensor y = run1("transpose", {&x}, dtype, outShape,
                      {{"permutation", c.permutation}});
      std::vector<double> expected(size_t(x.size()));
      for (int64_t i = 0; i < y.size(); ++i) {
        std::vector<int64_t> out = unravel(i, outShape), in(c.shape.size());
        for (size_t d = 0; d < out.size(); ++d)
          in[size_t(c.permutation[d])] = out[d];
        expected[size_t(i)] = x.get(ravel(in, c.shape));
      }
      expectClose(y, expected, 0, 0);
    }
}

TEST(CPUKernelsDataMovement, Slice) {
  Tensor x = random(DType::F32, {6, 7, 5});
  struct Case {
    std::vector<int64_t> starts, strides, out;
  };
  for (const Case &c : std::vector<Case>{
           {{0, 0, 0}, {1, 1, 1}, {6, 7, 5}},
           {{1, 2, 0}, {2, 1, 1}, {3, 4, 5}},
           {{5, 6, 4}, {-1, -2, -1}, {6, 4, 5}},
           {{0, 1, 1}, {1, 3, 2}, {2, 2, 2}},
           {{0, 0, 0}, {1, 1, 1}, {0, 7, 5}},
       }) {
    SCOPED_TRACE("starts " + shapeString(c.starts) + " strides " +
                 shapeString(c.strides));
    Tensor y = run1("slice", {&x}, DType::F32, c.out,
                    {{"starts", c.starts}, {"strides", c.strides}});
    std::vector<double> expected;
    for (int64_t i = 0; i < numElements(c.out); ++i) {
      std::vector<int64_t> index = unravel(i, c.out);
      for (size_t d = 0; d < 3; ++d)
        index[d] = c.starts[d] + index[d] * c.strides[d];
      expected.push_back(x.get(ravel(index, x.shape)));
    }
    expectClose(y, expected, 0, 0);
  }
}

TEST(CPUKernelsDataMovement, ConcatSplitCopy) {
  for (int64_t axis : {0, 1, 2, -1}) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    int64_t a = axis < 0 ? axis + 3 : axis;
    std::vector<int64_t> s0{2, 3, 4}, s1{2, 3, 4};
    s1[size_t(a)] = 5;
    std::vector<int64_t> whole = s0;
    whole[size_t(a)] += 5;
    Tensor x0 = random(DType::I64, s0, -9, 9),
           x1 = random(DType::I64, s1, -9, 9);
    Tensor y = run1("concat", {&x0, &x1}, DType::I64, whole, {{"axis", axis}});
    std::vector<double> expected;
    for (int64_t i = 0; i < numElements(whole); ++i) {
      std::vector<int64_t> index = unravel(i, whole);
      if (index[size_t(a)] < s0[size_t(a)]) {
        expected.push_back(x0.get(ravel(index, s0)));
      } else {
        index[size_t(a)] -= s0[size_t(a)];
        expected.push_back(x1.get(ravel(index, s1)));
      }
    }
    expectClose(y, expected, 0, 0);

    std::vector<Tensor> pieces{Tensor(DType::I64, s0), Tensor(DType::I64, s1)};
    Instruction split = makeKernel("split", {&y}, pieces, {{"axis", axis}});
    ASSERT_EQ(runKernel(split, {&y}, pieces), "");
    expectClose(pieces[0], values(x0), 0, 0);
    expectClose(pieces[1], values(x1), 0, 0);
  }
  Tensor x = random(DType::F64, {3, 4});
  expectClose(run1("copy", {&x}, DType::F64, {12}), values(x), 0, 0);
}

/// plan-format.md's splitmix64, written out again from the spec.
uint64_t specSplitmix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

TEST(CPUKernelsDataMovement, Dropout) {
  Tensor x = random(DType::F32, {40, 50});
  Tensor step = filled(DType::F64, {}, {3});
  const double ratio = 0.3;
  const int64_t seed = 42;
  std::vector<Tensor> outputs{Tensor(DType::F32, {40, 50}),
                              Tensor(DType::I1, {40, 50})};
  Instruction instruction = makeKernel("dropout", {&x, &step}, outputs,
                                       {{"ratio", ratio}, {"seed", seed}});
  ASSERT_EQ(runKernel(instruction, {&x, &step}, outputs), "");
  std::vector<double> expectedY, expectedMask;
  int kept = 0;
  const uint64_t stream = specSplitmix64(
      uint64_t(seed) * 0x9E3779B97F4A7C15ull ^ specSplitmix64(3));
  for (int64_t k = 0; k < x.size(); ++k) {
    double u =
        double(specSplitmix64(stream + uint64_t(k)) >> 40) / double(1 << 24);
    bool keep = u >= ratio;
    kept += keep;
    expectedMask.push_back(keep);
    expectedY.push_back(keep ? x.get(k) / (1 - ratio) : 0);
  }
  expectClose(outputs[0], expectedY, 1e-6, 1e-7);
  expectClose(outputs[1], expectedMask, 0, 0);
  EXPECT_NEAR(double(kept) / double(x.size()), 0.7, 0.05);
}

// A block of a split tensor draws exactly its part of the whole tensor's
// mask, and a later microbatch (index_base) the rows after the first's.
TEST(CPUKernelsDataMovement, DropoutBlocksDrawTheWholeMask) {
  const int64_t rows = 6, cols = 10;
  Tensor x = filled(DType::F64, {rows, cols}, std::vector<double>(60, 1.0));
  Tensor step = filled(DType::F64, {}, {7});
  Attributes attrs{{"ratio", 0.5}, {"seed", int64_t(9)}};
  std::vector<Tensor> whole{Tensor(DType::F64, {rows, cols}),
                            Tensor(DType::I1, {rows, cols})};
  ASSERT_EQ(runKernel(makeKernel("dropout", {&x, &step}, whole, attrs),
                      {&x, &step}, whole),
            "");
  // Each of the four [3, 5] blocks, at its offsets.
  Tensor block = filled(DType::F64, {3, 5}, std::vector<double>(15, 1.0));
  for (int64_t r0 : {0, 3})
    for (int64_t c0 : {0, 5}) {
      Tensor offsets = filled(DType::I64, {2}, {double(r0), double(c0)});
      Attributes blockAttrs = attrs;
      blockAttrs["global_shape"] = std::vector<int64_t>{rows, cols};
      std::vector<Tensor> part{Tensor(DType::F64, {3, 5}),
                               Tensor(DType::I1, {3, 5})};
      ASSERT_EQ(runKernel(makeKernel("dropout", {&block, &step, &offsets}, part,
                                     blockAttrs),
                          {&block, &step, &offsets}, part),
                "");
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t j = 0; j < 5; ++j)
          EXPECT_EQ(part[1].get(i * 5 + j),
                    whole[1].get((r0 + i) * cols + c0 + j))
              << "block at " << r0 << ", " << c0;
    }
  // The second half of the rows as microbatch 1.
  Tensor half = filled(DType::F64, {3, cols}, std::vector<double>(30, 1.0));
  Attributes later = attrs;
  later["index_base"] = int64_t(3 * cols);
  std::vector<Tensor> second{Tensor(DType::F64, {3, cols}),
                             Tensor(DType::I1, {3, cols})};
  ASSERT_EQ(runKernel(makeKernel("dropout", {&half, &step}, second, later),
                      {&half, &step}, second),
            "");
  for (int64_t k = 0; k < 3 * cols; ++k)
    EXPECT_EQ(second[1].get(k), whole[1].get(3 * cols + k));
  // Another step draws another mask.
  Tensor next = filled(DType::F64, {}, {8});
  std::vector<Tensor> other{Tensor(DType::F64, {rows, cols}),
                            Tensor(DType::I1, {rows, cols})};
  ASSERT_EQ(runKernel(makeKernel("dropout", {&x, &next}, other, attrs),
                      {&x, &next}, other),
            "");
  int differ = 0;
  for (int64_t k = 0; k < rows * cols; ++k)
    differ += other[1].get(k) != whole[1].get(k);
  EXPECT_GT(differ, 10);
}

TEST(CPUKernelsDataMovement, CheckRejects) {
  Tensor x(DType::F32, {4, 5});
  Tensor ids(DType::I64, {3});
  EXPECT_REJECTED(
      makeKernel("gather", {&x, &ids}, {Tensor(DType::F32, {3, 4})}),
      "result [3,4] should be [3,5]");
  Tensor fids(DType::F32, {3});
  EXPECT_REJECTED(
      makeKernel("gather", {&x, &fids}, {Tensor(DType::F32, {3, 5})}),
      "indices have dtype f32");
  EXPECT_REJECTED(makeKernel("gather", {&x, &ids}, {Tensor(DType::F32, {3, 5})},
                             {{"axis", int64_t(3)}}),
                  "axis 3 is out of range");

  Tensor y(DType::F32, {5, 4});
  EXPECT_REJECTED(makeKernel("transpose", {&x}, {y},
                             {{"permutation", std::vector<int64_t>{0, 0}}}),
                  "is not a permutation");
  EXPECT_REJECTED(makeKernel("transpose", {&x}, {y},
                             {{"permutation", std::vector<int64_t>{1, 2}}}),
                  "is not a permutation");
  EXPECT_REJECTED(makeKernel("transpose", {&x}, {y},
                             {{"permutation", std::vector<int64_t>{1}}}),
                  "is not a permutation");
  EXPECT_REJECTED(makeKernel("transpose", {&x}, {x},
                             {{"permutation", std::vector<int64_t>{1, 0}}}),
                  "result [4,5] should be [5,4]");
  EXPECT_REJECTED(makeKernel("transpose", {&x}, {y}),
                  "missing attribute 'permutation'");

  auto slice = [&](std::vector<int64_t> starts, std::vector<int64_t> strides,
                   std::vector<int64_t> out) {
    return makeKernel("slice", {&x}, {Tensor(DType::F32, out)},
                      {{"starts", starts}, {"strides", strides}});
  };
  EXPECT_EQ(checkMessage(slice({1, 0}, {1, 2}, {3, 3})), "");
  EXPECT_REJECTED(slice({2, 0}, {1, 2}, {3, 3}),
                  "dim 0 reads indices 2 to 4 of input [4,5], outside [0, 4)");
  EXPECT_REJECTED(slice({0, 0}, {-1, 1}, {2, 5}), "outside [0, 4)");
  EXPECT_REJECTED(slice({0, 0}, {0, 1}, {2, 5}), "stride of dim 0 is 0");
  EXPECT_REJECTED(slice({0}, {1}, {2, 5}), "must have the same rank");

  Tensor a(DType::F32, {2, 3}), b(DType::F32, {2, 4});
  EXPECT_EQ(
      checkMessage(makeKernel("concat", {&a, &b}, {Tensor(DType::F32, {2, 7})},
                              {{"axis", int64_t(1)}})),
      "");
  EXPECT_REJECTED(makeKernel("concat", {&a, &b}, {Tensor(DType::F32, {2, 8})},
                             {{"axis", int64_t(1)}}),
                  "sizes along axis 1 sum to 7, not 8");
  EXPECT_REJECTED(makeKernel("concat", {&a, &b}, {Tensor(DType::F32, {4, 3})},
                             {{"axis", int64_t(0)}}),
                  "input 1 [2,4] does not match result [4,3] outside axis 0");
  Tensor ai(DType::I32, {2, 4});
  EXPECT_REJECTED(makeKernel("concat", {&a, &ai}, {Tensor(DType::F32, {2, 7})},
                             {{"axis", int64_t(1)}}),
                  "same dtype");
  EXPECT_REJECTED(makeKernel("concat", {}, {Tensor(DType::F32, {2, 7})},
                             {{"axis", int64_t(1)}}),
                  "at least one input");
  EXPECT_REJECTED(makeKernel("split", {&x}, {a, a}, {{"axis", int64_t(0)}}),
                  "does not match input [4,5]");
  EXPECT_REJECTED(makeKernel("split", {&x}, {x}), "missing attribute 'axis'");

  EXPECT_REJECTED(makeKernel("copy", {&x}, {Tensor(DType::F32, {21})}),
                  "different element counts");
  EXPECT_REJECTED(makeKernel("copy", {&x}, {Tensor(DType::I32, {20})}),
                  "same dtype");

  Tensor mask(DType::I1, {4, 5});
  EXPECT_EQ(checkMessage(makeKernel("dropout", {&x}, {x, mask},
                                    {{"ratio", 0.1}, {"seed", int64_t(1)}})),
            "");
  EXPECT_REJECTED(makeKernel("dropout", {&x}, {x, mask},
                             {{"ratio", 1.5}, {"seed", int64_t(1)}}),
                  "is outside [0, 1)");
  EXPECT_REJECTED(makeKernel("dropout", {&x}, {x, x},
                             {{"ratio", 0.1}, {"seed", int64_t(1)}}),
                  "mask has dtype f32; expected i1");
  EXPECT_REJECTED(makeKernel("dropout", {&x}, {x, mask}, {{"ratio", 0.1}}),
                  "missing attribute 'seed'");
  Tensor offsets(DType::I64, {2}), step(DType::F64, {});
  EXPECT_REJECTED(makeKernel("dropout", {&x, &step, &offsets}, {x, mask},
                             {{"ratio", 0.1}, {"seed", int64_t(1)}}),
                  "takes X, an optional step");
  EXPECT_REJECTED(makeKernel("dropout", {&x, &offsets}, {x, mask},
                             {{"ratio", 0.1},
                              {"seed", int64_t(1)},
                              {"global_shape", std::vector<int64_t>{2, 5}}}),
                  "is smaller than the block");
  EXPECT_REJECTED(makeKernel("dropout", {&x, &x}, {x, mask},
                             {{"ratio", 0.1}, {"seed", int64_t(1)}}),
                  "step must be one f64");
  EXPECT_REJECTED(
      makeKernel("dropout", {&x, &offsets}, {x, mask},
                 {{"ratio", 0.1},
                  {"seed", int64_t(1)},
                  {"global_shape",
                   std::vector<int64_t>{int64_t(1) << 40, int64_t(1) << 40}}}),
      "has more elements than an index holds");
}

//===----------------------------------------------------------------------===//
// bf16: matmul and elementwise compute in f32 and round to nearest even
//===----------------------------------------------------------------------===//

uint16_t bitsAt(const Tensor &t, int64_t i) {
  uint16_t bits;
  std::memcpy(&bits, t.bytes.data() + 2 * i, sizeof(bits));
  return bits;
}

Tensor fromBits(DType dtype, const std::vector<uint32_t> &patterns) {
  Tensor t(dtype, {int64_t(patterns.size())});
  for (size_t i = 0; i < patterns.size(); ++i)
    std::memcpy(t.bytes.data() + i * 4, &patterns[i], 4);
  return t;
}

TEST(CPUKernelsBF16, ReferenceRoundingAgreesWithTheKernelEverywhere) {
  // Every f32 pattern whose high half is one of a spread of exponents, and
  // all 2^16 low halves below each: ties, overflow, subnormals, NaNs.
  std::vector<uint32_t> patterns;
  for (uint32_t high : {0x0000u, 0x0001u, 0x007fu, 0x0080u, 0x3f80u, 0x3f81u,
                        0x4b7fu, 0x7f7eu, 0x7f7fu, 0x7f80u, 0x7fc0u, 0x8000u,
                        0x807fu, 0xbf80u, 0xff7fu, 0xff80u, 0xffc1u})
    for (uint32_t low = 0; low < 0x10000u; low += 7)
      patterns.push_back(high << 16 | low);
  for (uint32_t edge : {0x00008000u, 0x00018000u, 0x3f808000u, 0x3f818000u,
                        0x7f7f7fffu, 0x7f7f8000u, 0x7f800001u, 0xff800001u})
    patterns.push_back(edge);
  Tensor x = fromBits(DType::F32, patterns);
  Tensor y = runOp("cast", {&x}, DType::BF16, x.shape);
  int failures = 0;
  for (size_t i = 0; i < patterns.size() && failures < 10; ++i) {
    float f;
    std::memcpy(&f, &patterns[i], 4);
    uint16_t got = bitsAt(y, int64_t(i)), want = referenceBF16(f);
    bool same = std::isnan(f) ? std::isnan(widenBF16(got)) &&
                                    (got & 0x8000) == (want & 0x8000)
                              : got == want;
    if (!same && ++failures)
      ADD_FAILURE() << std::hex << "f32 0x" << patterns[i] << ": got 0x" << got
                    << ", expected 0x" << want;
  }
}

TEST(CPUKernelsBF16, RoundingEdgeCases) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<uint32_t> patterns = {
      0x3f800000, // 1: exact
      0x3f808000, // 1 + 2^-8: a tie, to the even 1
      0x3f818000, // 1 + 3 * 2^-8: a tie, to the even 1 + 2^-6
      0x3f808001, // just above the tie: up
      0x3f807fff, // just below: down
      0xbf808001, // negative: away from zero the same way
      0x7f7f0000, // the largest bf16: exact
      0x7f7f7fff, // below the overflow threshold: the largest bf16
      0x7f7f8000, // at it (a tie with an odd largest): infinity
      0x7f7fffff, // FLT_MAX: infinity
      0xff7fffff, // -FLT_MAX: -infinity
      0x7f800000, // infinity stays
      0xff800000, // -infinity stays
      0x7f800001, // a NaN whose payload is only in the dropped half
      0xffc00000, // -NaN
      0x80000000, // -0 stays -0
      0x00008000, // a subnormal tie, to the even 0
      0x00018000, // a subnormal tie, to the even 2 * 2^-133
  };
  Tensor x = fromBits(DType::F32, patterns);
  Tensor y = runOp("cast", {&x}, DType::BF16, x.shape);
  std::vector<uint16_t> want = {0x3f80, 0x3f80, 0x3f82, 0x3f81, 0x3f80, 0xbf81,
                                0x7f7f, 0x7f7f, 0x7f80, 0x7f80, 0xff80, 0x7f80,
                                0xff80, 0,      0,      0x8000, 0x0000, 0x0002};
  for (size_t i = 0; i < patterns.size(); ++i) {
    SCOPED_TRACE(i);
    uint16_t got = bitsAt(y, int64_t(i));
    if (i == 13 || i == 14) { // NaNs stay NaN (not infinity), sign kept
      EXPECT_TRUE(std::isnan(widenBF16(got))) << std::hex << got;
      EXPECT_EQ(got & 0x8000, i == 14 ? 0x8000 : 0);
    } else {
      EXPECT_EQ(got, want[i]) << std::hex << got;
    }
  }
  // Back to f32 is exact.
  Tensor back = runOp("cast", {&y}, DType::F32, y.shape);
  EXPECT_EQ(back.get(1), 1.0);
  EXPECT_EQ(back.get(8), inf);
  EXPECT_TRUE(std::isnan(back.get(13)));
}

TEST(CPUKernelsBF16, CastsRoundOnce) {
  // f64 -> bf16 directly: through f32 (to nearest) this would be a tie and
  // round down to 1.
  Tensor d = filled(DType::F64, {2}, {1 + std::ldexp(1.0, -8) + 1e-9, -3.0});
  expectClose(runOp("cast", {&d}, DType::BF16, {2}),
              {1 + std::ldexp(1.0, -7), -3.0}, 0, 0);
  // i32 2^24 + 2^16 + 1: f32 ties it to 2^24 + 2^16, a bf16 tie going to
  // 2^24; once rounded it is above the tie.
  Tensor i = filled(DType::I32, {2}, {16842753, -7});
  expectClose(runOp("cast", {&i}, DType::BF16, {2}), {16908288, -7}, 0, 0);
  // bf16 -> integers truncate, -> i1 tests non-zero, -> f64 is exact.
  Tensor h = filled(DType::BF16, {4}, {2.75, -2.75, 0, 0.5});
  expectClose(runOp("cast", {&h}, DType::I32, {4}), {2, -2, 0, 0}, 0, 0);
  expectClose(runOp("cast", {&h}, DType::I1, {4}), {1, 1, 0, 1}, 0, 0);
  expectClose(runOp("cast", {&h}, DType::F64, {4}), {2.75, -2.75, 0, 0.5}, 0,
              0);
  Tensor b = filled(DType::I1, {2}, {1, 0});
  expectClose(runOp("cast", {&b}, DType::BF16, {2}), {1, 0}, 0, 0);
}

/// bf16 rounding of a value computed in f32.
double roundF32(double v) { return widenBF16(referenceBF16(float(v))); }

TEST(CPUKernelsBF16, ElementwiseComputesInF32AndRoundsEachOp) {
  // y = (a + bias) * s with a dense, a bias read in place along long rows,
  // a scalar and a column gathered with strides; every op rounds.
  Tensor a = random(DType::BF16, {4, 700}), bias = random(DType::BF16, {700});
  Tensor s = filled(DType::BF16, {}, {1.5});
  Tensor col = random(DType::BF16, {4, 1});
  std::vector<Tensor> outputs{Tensor(DType::BF16, {4, 700}),
                              Tensor(DType::F32, {4, 700}),
                              Tensor(DType::I1, {4, 700})};
  Instruction instruction = makeProgram(
      {&a, &bias, &s, &col}, outputs,
      {op("add", DType::BF16, {0, 1}),                 // %4
       op("mul", DType::BF16, {4, 2}),                 // %5
       op("sub", DType::BF16, {5, 3}),                 // %6
       op("exp", DType::BF16, {6}),                    // %7
       op("cast", DType::F32, {7}),                    // %8
       op("const", DType::BF16, {}, {{"value", 0.1}}), // %9
       op("compare", DType::I1, {6, 9}, {{"direction", std::string("gt")}}),
       op("select", DType::BF16, {10, 6, 9})}, // %11
      {11, 8, 10});
  ASSERT_EQ(runKernel(instruction, {&a, &bias, &s, &col}, outputs), "");
  std::vector<double> selected, exps, mask;
  const double tenth = roundF32(0.1);
  for (int64_t i = 0; i < a.size(); ++i) {
    double sum = roundF32(float(a.get(i)) + float(bias.get(i % 700)));
    double scaled = roundF32(float(sum) * 1.5f);
    double diff = roundF32(float(scaled) - float(col.get(i / 700)));
    exps.push_back(roundF32(std::exp(float(diff))));
    mask.push_back(diff > tenth);
    selected.push_back(diff > tenth ? diff : tenth);
  }
  expectClose(outputs[0], selected, 0, 0);
  // exp is the kernels' fast f32 exp (within a few 1e-7): at most one
  // rounding step away.
  expectClose(outputs[1], exps, std::ldexp(1.0, -7), 0);
  expectClose(outputs[2], mask, 0, 0);
}

TEST(CPUKernelsBF16, ElementwiseOutputMayAliasItsInput) {
  Tensor x = random(DType::BF16, {3000});
  Tensor original = x;
  runInPlaceTimesThree(x);
  std::vector<double> expected;
  for (int64_t i = 0; i < x.size(); ++i)
    expected.push_back(roundF32(3 * float(original.get(i))));
  expectClose(x, expected, 0, 0);
}

/// A bf16 matmul equals the f32 matmul of the same (bf16) inputs, rounded:
/// bf16 products are exact in f32, so only the f32 summation order, which
/// may differ between the kernels' blockings, can move a result across a
/// rounding boundary, by one bf16 step at most.
void testMatmulBF16(std::vector<int64_t> aShape, std::vector<int64_t> bShape,
                    std::vector<int64_t> cShape, bool transA, bool transB) {
  SCOPED_TRACE(shapeString(aShape) + " x " + shapeString(bShape) + " transA=" +
               std::to_string(transA) + " transB=" + std::to_string(transB));
  Tensor a = random(DType::BF16, aShape), b = random(DType::BF16, bShape);
  Tensor a32(DType::F32, aShape), b32(DType::F32, bShape);
  for (int64_t i = 0; i < a.size(); ++i)
    a32.set(i, a.get(i));
  for (int64_t i = 0; i < b.size(); ++i)
    b32.set(i, b.get(i));
  Attributes attrs{{"transpose_lhs", int64_t(transA)},
                   {"transpose_rhs", int64_t(transB)}};
  Tensor c = run1("matmul", {&a, &b}, DType::BF16, cShape, attrs);
  Tensor c32 = run1("matmul", {&a32, &b32}, DType::F32, cShape, attrs);
  std::vector<double> exact = referenceMatmul(a, b, cShape, transA, transB);
  int64_t equal = 0, failures = 0;
  for (int64_t i = 0; i < c.size() && failures < 10; ++i) {
    double got = c.get(i), rounded = roundF32(c32.get(i));
    equal += got == rounded;
    // One bf16 step (2^-7 relative) around the exactly rounded result.
    double step = std::ldexp(std::abs(exact[size_t(i)]), -7) + 1e-30;
    if (std::abs(got - roundF32(exact[size_t(i)])) > step && ++failures)
      ADD_FAILURE() << "element " << i << ": got " << got << ", exact "
                    << exact[size_t(i)];
  }
  EXPECT_GE(equal, c.size() * 99 / 100) << "of " << c.size();
}

/// A bf16 epilogue runs on the f32 product and rounds once: it equals the
/// f32 kernel's fused result on the same inputs, rounded (up to the f32
/// summation order, as above), which rounding the product before adding the
/// bias would miss for a large share of elements.
TEST(CPUKernelsBF16, MatmulEpilogueRoundsOnce) {
  std::vector<int64_t> aShape{2, 300, 48}, bShape{48, 64}, cShape{2, 300, 64};
  Tensor a = random(DType::BF16, aShape), b = random(DType::BF16, bShape);
  Tensor bias = random(DType::BF16, {64}, -0.3, 0.3);
  Tensor a32(DType::F32, aShape), b32(DType::F32, bShape),
      bias32(DType::F32, {64});
  for (auto [from, to] : {std::pair{&a, &a32}, {&b, &b32}, {&bias, &bias32}})
    for (int64_t i = 0; i < from->size(); ++i)
      to->set(i, from->get(i));
  Attributes attrs{{"activation", std::string("gelu_tanh")}};
  std::vector<Tensor> out{Tensor(DType::BF16, cShape),
                          Tensor(DType::BF16, cShape)};
  std::vector<Tensor> out32{Tensor(DType::F32, cShape),
                            Tensor(DType::F32, cShape)};
  std::vector<const Tensor *> in{&a, &b, &bias}, in32{&a32, &b32, &bias32};
  ASSERT_EQ(runKernel(makeKernel("matmul", in, out, attrs), in, out), "");
  ASSERT_EQ(runKernel(makeKernel("matmul", in32, out32, attrs), in32, out32),
            "");
  for (int which : {0, 1}) {
    int64_t equal = 0;
    for (int64_t i = 0; i < out[which].size(); ++i)
      equal += out[which].get(i) == roundF32(out32[which].get(i));
    EXPECT_GE(equal, out[which].size() * 99 / 100)
        << (which ? "preactivation" : "result");
  }
}

/// In bf16 the product is multiplied in f32 and rounded once: the result
/// is the f32 kernel's on the same inputs, rounded (up to the f32
/// summation order), which rounding the product first would miss often.
TEST(CPUKernelsBF16, MatmulGeluGradRoundsOnce) {
  std::vector<int64_t> aShape{2, 300, 48}, bShape{64, 48}, cShape{2, 300, 64};
  Tensor a = random(DType::BF16, aShape), b = random(DType::BF16, bShape);
  Tensor x = random(DType::BF16, cShape, -3, 3);
  Tensor a32(DType::F32, aShape), b32(DType::F32, bShape),
      x32(DType::F32, cShape);
  for (auto [from, to] : {std::pair{&a, &a32}, {&b, &b32}, {&x, &x32}})
    for (int64_t i = 0; i < from->size(); ++i)
      to->set(i, from->get(i));
  Attributes attrs{{"transpose_rhs", int64_t(1)},
                   {"activation_grad", std::string("gelu_tanh")}};
  std::vector<Tensor> out{Tensor(DType::BF16, cShape)};
  std::vector<Tensor> out32{Tensor(DType::F32, cShape)};
  std::vector<const Tensor *> in{&a, &b, &x}, in32{&a32, &b32, &x32};
  ASSERT_EQ(runKernel(makeKernel("matmul", in, out, attrs), in, out), "");
  ASSERT_EQ(runKernel(makeKernel("matmul", in32, out32, attrs), in32, out32),
            "");
  int64_t equal = 0;
  for (int64_t i = 0; i < out[0].size(); ++i)
    equal += out[0].get(i) == roundF32(out32[0].get(i));
  EXPECT_GE(equal, out[0].size() * 99 / 100);
}

/// A residual projection (accumulate=1): bf16 operands, an f32 result, bias
/// and addend. The sum is product + bias + addend in f32, never rounded to
/// bf16: against an f64 reference from the same bf16 operands it is off by
/// f32 rounding only, which rounding the product to bf16 first would not
/// be. Batched GEMMs (the per-batch path) and f32 operands too.
TEST(CPUKernelsBF16, MatmulWidenedResidual) {
  struct Case {
    DType operands;
    std::vector<int64_t> aShape, bShape;
    bool transB, bias;
  };
  const Case cases[] = {{DType::BF16, {2, 30, 48}, {64, 48}, true, true},
                        {DType::BF16, {2, 30, 48}, {64, 48}, true, false},
                        {DType::BF16, {2, 30, 48}, {2, 48, 64}, false, true},
                        {DType::F32, {2, 30, 48}, {64, 48}, true, true}};
  for (const Case &c : cases) {
    SCOPED_TRACE(std::string(dtypeName(c.operands)) + (c.bias ? " bias" : "") +
                 (c.bShape.size() == 3 ? " batched" : ""));
    Tensor a = random(c.operands, c.aShape), b = random(c.operands, c.bShape);
    Tensor bias = random(DType::F32, {64}, -0.3, 0.3);
    std::vector<int64_t> cShape{2, 30, 64};
    Tensor residual = random(DType::F32, cShape, -4, 4);
    std::vector<const Tensor *> in{&a, &b};
    if (c.bias)
      in.push_back(&bias);
    in.push_back(&residual);
    Tensor out = run1(
        "matmul", in, DType::F32, cShape,
        {{"transpose_rhs", int64_t(c.transB)}, {"accumulate", int64_t(1)}});
    int64_t roundedAway = 0;
    for (int64_t batch = 0; batch < 2; ++batch)
      for (int64_t i = 0; i < 30; ++i)
        for (int64_t j = 0; j < 64; ++j) {
          double product = 0;
          for (int64_t k = 0; k < 48; ++k) {
            int64_t bIndex = c.transB ? j * 48 + k : k * 64 + j;
            if (c.bShape.size() == 3)
              bIndex += batch * 48 * 64;
            product += a.get((batch * 30 + i) * 48 + k) * b.get(bIndex);
          }
          int64_t o = (batch * 30 + i) * 64 + j;
          double want =
              product + (c.bias ? bias.get(j) : 0.0) + residual.get(o);
          EXPECT_NEAR(out.get(o), want, 1e-5 * (1 + std::abs(want)))
              << "at " << o;
          double rounded = roundF32(product) + (c.bias ? bias.get(j) : 0.0) +
                           residual.get(o);
          roundedAway += std::abs(rounded - want) > 1e-5 * (1 + std::abs(want));
        }
    if (c.operands == DType::BF16) {
      EXPECT_GT(roundedAway, 100) << "rounding the product would be caught";
    }
  }
  // The addend must be the result's shape and dtype; no activation.
  Tensor a = random(DType::BF16, {4, 8}), b = random(DType::BF16, {8, 16});
  Tensor r(DType::F32, {4, 16}), rb(DType::BF16, {4, 16}),
      r2(DType::F32, {4, 8});
  Tensor out(DType::F32, {4, 16});
  Attributes acc{{"accumulate", int64_t(1)}};
  EXPECT_EQ(checkMessage(makeKernel("matmul", {&a, &b, &r}, {out}, acc)), "");
  EXPECT_REJECTED(makeKernel("matmul", {&a, &b, &rb}, {out}, acc), "addend");
  EXPECT_REJECTED(makeKernel("matmul", {&a, &b, &r2}, {out}, acc), "addend");
  EXPECT_REJECTED(makeKernel("matmul", {&a, &b}, {out}, acc),
                  "accumulate=1 needs an addend");
  Attributes relu = acc;
  relu["activation"] = std::string("relu");
  EXPECT_REJECTED(makeKernel("matmul", {&a, &b, &r}, {out}, relu),
                  "accumulate=1 takes no activation");
  EXPECT_REJECTED(makeKernel("matmul", {&a, &b}, {Tensor(DType::F64, {4, 16})}),
                  "result");
  Tensor out16(DType::BF16, {4, 16});
  EXPECT_REJECTED(makeKernel("matmul", {&a, &b, &rb}, {out16}, acc),
                  "accumulate=1 needs an f32 or f64 result, not bf16");
  Tensor at = random(DType::BF16, {8, 4}), bt = random(DType::BF16, {8, 16});
  EXPECT_REJECTED(makeKernel("matmul", {&at, &bt},
                             {out, Tensor(DType::F32, {4})},
                             {{"transpose_lhs", int64_t(1)},
                              {"bias_grad", std::string("lhs")}}),
                  "bias_grad needs the operands' dtype");
}

TEST(CPUKernelsBF16, Matmul) {
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      testMatmulBF16(
          ta ? std::vector<int64_t>{7, 5} : std::vector<int64_t>{5, 7},
          tb ? std::vector<int64_t>{3, 7} : std::vector<int64_t>{7, 3}, {5, 3},
          ta, tb);
  // A linear layer of 600 rows: B widened once, A in blocks of rows.
  testMatmulBF16({3, 200, 40}, {24, 40}, {3, 200, 24}, false, true);
  // Attention-shaped batches (in parallel), shared operands, transposed A.
  testMatmulBF16({2, 12, 33, 16}, {2, 12, 33, 16}, {2, 12, 33, 33}, false,
                 true);
  testMatmulBF16({6, 5}, {3, 5, 7}, {3, 6, 7}, false, false);
  testMatmulBF16({3, 5, 4}, {5, 6}, {3, 4, 6}, true, false);
  // K = 0: zeros.
  Tensor a(DType::BF16, {3, 0}), b(DType::BF16, {0, 2});
  expectClose(run1("matmul", {&a, &b}, DType::BF16, {3, 2}),
              std::vector<double>(6, 0.0), 0, 0);
}

TEST(CPUKernelsBF16, MatmulRoundsToNearestEven) {
  // [1, 2^-8] . [1, 1] = 1 + 2^-8, a tie: the even 1. [1, 3 * 2^-8] . [1, 1]
  // ties to the even 1 + 2^-6. Large products overflow to infinity.
  Tensor a =
      filled(DType::BF16, {3, 2},
             {1, std::ldexp(1.0, -8), 1, 3 * std::ldexp(1.0, -8), 3e38, 3e38});
  Tensor b = filled(DType::BF16, {2, 1}, {1, 1});
  expectClose(
      run1("matmul", {&a, &b}, DType::BF16, {3, 1}),
      {1, 1 + std::ldexp(1.0, -6), std::numeric_limits<double>::infinity()}, 0,
      0);
}

TEST(CPUKernelsBF16, DataMovementMovesTheBits) {
  Tensor x = random(DType::BF16, {4, 6});
  Tensor c =
      run1("concat", {&x, &x}, DType::BF16, {8, 6}, {{"axis", int64_t(0)}});
  std::vector<double> twice = values(x);
  twice.insert(twice.end(), twice.begin(), twice.end());
  expectClose(c, twice, 0, 0);
  Tensor s = run1("slice", {&x}, DType::BF16, {2, 3},
                  {{"starts", std::vector<int64_t>{1, 0}},
                   {"strides", std::vector<int64_t>{2, 2}}});
  expectClose(s,
              {x.get(6), x.get(8), x.get(10), x.get(18), x.get(20), x.get(22)},
              0, 0);
  expectClose(run1("copy", {&x}, DType::BF16, {24}), values(x), 0, 0);
  Tensor ids = filled(DType::I64, {2}, {3, 0});
  Tensor g =
      run1("gather", {&x, &ids}, DType::BF16, {2, 6}, {{"axis", int64_t(0)}});
  std::vector<double> rows;
  for (int64_t row : {3, 0})
    for (int64_t j = 0; j < 6; ++j)
      rows.push_back(x.get(row * 6 + j));
  expectClose(g, rows, 0, 0);
}

TEST(CPUKernelsBF16, CheckRejects) {
  Tensor a(DType::BF16, {8, 16}), b(DType::F32, {16, 4}),
      c(DType::BF16, {8, 4});
  EXPECT_REJECTED(makeKernel("matmul", {&a, &b}, {c}), "same dtype");
  Tensor h(DType::F16, {8, 16}), hb(DType::F16, {16, 4}),
      hc(DType::F16, {8, 4});
  EXPECT_REJECTED(makeKernel("matmul", {&h, &hb}, {hc}),
                  "lhs has dtype f16; only f32, f64 and bf16");
  // Kernels without a bf16 path keep rejecting it.
  EXPECT_REJECTED(makeKernel("softmax", {&a}, {a}, {{"axis", int64_t(1)}}),
                  "has dtype bf16");
  EXPECT_REJECTED(makeKernel("reduce_sum", {&a}, {Tensor(DType::BF16, {8})},
                             {{"axes", std::vector<int64_t>{1}}}),
                  "result has dtype bf16; a sum of bf16 is f32");
  EXPECT_EQ(
      checkMessage(makeKernel("reduce_sum", {&a}, {Tensor(DType::F32, {8})},
                              {{"axes", std::vector<int64_t>{1}}})),
      "");
  EXPECT_REJECTED(makeKernel("reduce_max", {&a}, {Tensor(DType::F32, {8})},
                             {{"axes", std::vector<int64_t>{1}}}),
                  "input has dtype bf16");
}

//===----------------------------------------------------------------------===//
// attention, attention_backward
//===----------------------------------------------------------------------===//

/// The masks the attention tests use (true = masked out).
enum class MaskKind {
  None,
  /// Key j is masked for query i when j > i + (Sk - Sq), [1, 1, Sq, Sk].
  Causal,
  /// Random, one per batch element of the first lead dim, [lead0, 1, ...].
  Random,
};

struct AttentionCase {
  DType dtype = DType::F32;
  std::vector<int64_t> lead;
  int64_t sq = 16, sk = 16, d = 8, dv = 8;
  MaskKind mask = MaskKind::None;
  double maskValue = -std::numeric_limits<double>::infinity();

  std::string name() const {
    return std::string(dtypeName(dtype)) + " lead " + shapeString(lead) +
           " Sq " + std::to_string(sq) + " Sk " + std::to_string(sk) + " D " +
           std::to_string(d) + " Dv " + std::to_string(dv) + " mask " +
           std::to_string(int(mask)) + " mask_value " +
           std::to_string(maskValue);
  }
  double scale() const { return 1 / std::sqrt(double(d)); }
  std::vector<int64_t> shape(int64_t rows, int64_t cols) const {
    std::vector<int64_t> s = lead;
    s.push_back(rows);
    if (cols >= 0)
      s.push_back(cols);
    return s;
  }
  DType statType() const {
    return dtype == DType::F64 ? DType::F64 : DType::F32;
  }
  Attributes attrs() const {
    Attributes a{{"scale", scale()}};
    if (!std::isinf(maskValue))
      a["mask_value"] = maskValue;
    return a;
  }
};

Tensor attentionMask(const AttentionCase &c) {
  std::vector<int64_t> shape(c.lead.size(), 1);
  if (c.mask == MaskKind::Random && !shape.empty())
    shape[0] = c.lead[0];
  shape.push_back(c.sq);
  shape.push_back(c.sk);
  Tensor mask = random(DType::I1, shape, 0, 2);
  if (c.mask == MaskKind::Causal)
    for (int64_t i = 0; i < mask.size(); ++i) {
      int64_t row = (i / c.sk) % c.sq, col = i % c.sk;
      mask.set(i, col > row + (c.sk - c.sq));
    }
  return mask;
}

/// The naive attention reference in double, over whole score matrices. With
/// bf16, p and ds are rounded to bf16 before the products, as the kernels do.
struct AttentionReference {
  const AttentionCase &c;
  const Tensor &q, &k, &v;
  const Tensor *mask;

  int64_t batches() const { return numElements(c.lead); }
  bool masked(int64_t b, int64_t i, int64_t j) const {
    if (!mask)
      return false;
    std::vector<int64_t> index = unravel(b, c.lead);
    index.push_back(i);
    index.push_back(j);
    return broadcastGet(*mask, index) != 0;
  }
  double rounded(double x) const {
    return c.dtype == DType::BF16 ? roundF32(x) : x;
  }
  double score(int64_t b, int64_t i, int64_t j) const {
    if (masked(b, i, j))
      return c.maskValue;
    double dot = 0;
    for (int64_t t = 0; t < c.d; ++t)
      dot += q.get((b * c.sq + i) * c.d + t) * k.get((b * c.sk + j) * c.d + t);
    return c.scale() * dot;
  }

  void forward(std::vector<double> &out, std::vector<double> &lse) const {
    const double inf = std::numeric_limits<double>::infinity();
    out.assign(size_t(batches() * c.sq * c.dv), 0);
    lse.assign(size_t(batches() * c.sq), 0);
    for (int64_t b = 0; b < batches(); ++b)
      for (int64_t i = 0; i < c.sq; ++i) {
        std::vector<double> s(size_t(c.sk));
        double max = -inf;
        for (int64_t j = 0; j < c.sk; ++j) {
          s[size_t(j)] = score(b, i, j);
          max = std::max(max, s[size_t(j)]);
        }
        double *o = out.data() + (b * c.sq + i) * c.dv;
        if (max == -inf) {
          std::fill(o, o + c.dv, std::numeric_limits<double>::quiet_NaN());
          lse[size_t(b * c.sq + i)] = -inf;
          continue;
        }
        double sum = 0;
        for (double &x : s) {
          x = x == -inf ? 0 : std::exp(x - max);
          sum += x;
        }
        for (int64_t j = 0; j < c.sk; ++j) {
          double p = rounded(s[size_t(j)] / sum);
          for (int64_t t = 0; t < c.dv; ++t)
            o[t] += p * v.get((b * c.sk + j) * c.dv + t);
        }
        lse[size_t(b * c.sq + i)] = max + std::log(sum);
      }
  }

  void backward(const Tensor &dout, const Tensor &lse, const Tensor &delta,
                std::vector<double> &dq, std::vector<double> &dk,
                std::vector<double> &dv) const {
    const double inf = std::numeric_limits<double>::infinity();
    dq.assign(size_t(q.size()), 0);
    dk.assign(size_t(k.size()), 0);
    dv.assign(size_t(v.size()), 0);
    for (int64_t b = 0; b < batches(); ++b)
      for (int64_t i = 0; i < c.sq; ++i)
        for (int64_t j = 0; j < c.sk; ++j) {
          double s = score(b, i, j);
          double p = s == -inf ? 0 : std::exp(s - lse.get(b * c.sq + i));
          double dp = 0;
          for (int64_t t = 0; t < c.dv; ++t)
            dp += dout.get((b * c.sq + i) * c.dv + t) *
                  v.get((b * c.sk + j) * c.dv + t);
          double ds = masked(b, i, j) ? 0 : p * (dp - delta.get(b * c.sq + i));
          p = rounded(p);
          ds = rounded(ds);
          for (int64_t t = 0; t < c.dv; ++t)
            dv[size_t((b * c.sk + j) * c.dv + t)] +=
                p * dout.get((b * c.sq + i) * c.dv + t);
          for (int64_t t = 0; t < c.d; ++t) {
            dq[size_t((b * c.sq + i) * c.d + t)] +=
                c.scale() * ds * k.get((b * c.sk + j) * c.d + t);
            dk[size_t((b * c.sk + j) * c.d + t)] +=
                c.scale() * ds * q.get((b * c.sq + i) * c.d + t);
          }
        }
  }
};

/// delta = rowsum(dout * out) in double: the reference's.
Tensor attentionDelta(const AttentionCase &c, const Tensor &dout,
                      const Tensor &out) {
  Tensor delta(c.statType(), c.shape(c.sq, -1));
  for (int64_t r = 0; r < delta.size(); ++r) {
    double sum = 0;
    for (int64_t t = 0; t < c.dv; ++t)
      sum += dout.get(r * c.dv + t) * out.get(r * c.dv + t);
    delta.set(r, sum);
  }
  return delta;
}

/// Runs attention and attention_backward on random data and compares both
/// with the reference. The kernel's out and lse go into the backward, as
/// the compiler wires them; the reference takes delta from that out.
void testAttention(const AttentionCase &c) {
  SCOPED_TRACE(c.name());
  Tensor q = random(c.dtype, c.shape(c.sq, c.d));
  Tensor k = random(c.dtype, c.shape(c.sk, c.d));
  Tensor v = random(c.dtype, c.shape(c.sk, c.dv));
  Tensor mask;
  std::vector<const Tensor *> inputs{&q, &k, &v};
  if (c.mask != MaskKind::None) {
    mask = attentionMask(c);
    inputs.push_back(&mask);
  }
  AttentionReference ref{c, q, k, v,
                         c.mask == MaskKind::None ? nullptr : &mask};

  std::vector<Tensor> fwd{Tensor(c.dtype, c.shape(c.sq, c.dv)),
                          Tensor(c.statType(), c.shape(c.sq, -1))};
  Instruction forward = makeKernel("attention", inputs, fwd, c.attrs());
  ASSERT_EQ(runKernel(forward, inputs, fwd), "");
  std::vector<double> out, lse;
  ref.forward(out, lse);
  double rtol = c.dtype == DType::F64   ? 1e-10
                : c.dtype == DType::F32 ? 1e-4
                                        : 1e-2;
  double atol = c.dtype == DType::F64   ? 1e-12
                : c.dtype == DType::F32 ? 1e-5
                                        : 1e-2;
  {
    SCOPED_TRACE("out");
    expectCloseScaled(fwd[0], out, rtol, atol);
  }
  {
    SCOPED_TRACE("lse");
    expectClose(fwd[1], lse, c.dtype == DType::F64 ? 1e-12 : 1e-5,
                c.dtype == DType::F64 ? 1e-12 : 1e-5);
  }

  Tensor dout = random(c.dtype, c.shape(c.sq, c.dv));
  Tensor delta = attentionDelta(c, dout, fwd[0]);
  std::vector<const Tensor *> bwdInputs{&q, &k, &v, &dout, &fwd[1], &fwd[0]};
  if (c.mask != MaskKind::None)
    bwdInputs.push_back(&mask);
  std::vector<Tensor> grads{Tensor(c.dtype, q.shape), Tensor(c.dtype, k.shape),
                            Tensor(c.dtype, v.shape)};
  Instruction backward =
      makeKernel("attention_backward", bwdInputs, grads, c.attrs());
  ASSERT_EQ(runKernel(backward, bwdInputs, grads), "");
  std::vector<double> dq, dk, dv;
  ref.backward(dout, fwd[1], delta, dq, dk, dv);
  const char *names[] = {"dq", "dk", "dv"};
  const std::vector<double> *expected[] = {&dq, &dk, &dv};
  for (size_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(names[i]);
    expectCloseScaled(grads[i], *expected[i], rtol, atol);
  }
}

TEST(CPUKernelsAttention, MatchesTheReference) {
  const double inf = std::numeric_limits<double>::infinity();
  for (DType dtype : {DType::F32, DType::BF16, DType::F64}) {
    std::vector<AttentionCase> cases = {
        {dtype, {2, 3}, 16, 16, 8, 8, MaskKind::None, -inf},
        // Sq != Sk, D != Dv, partial blocks.
        {dtype, {2, 3}, 37, 53, 16, 24, MaskKind::None, -inf},
        // A causal mask broadcast from [1, 1, S, S]: blocks skip keys.
        {dtype, {2, 3}, 64, 64, 32, 32, MaskKind::Causal, -inf},
        {dtype, {}, 128, 128, 64, 64, MaskKind::Causal, -inf},
        // Causal with Sq < Sk (the last query sees every key).
        {dtype, {2}, 40, 70, 16, 16, MaskKind::Causal, -inf},
        // A finite mask_value: masked scores still take part.
        {dtype, {2, 3}, 48, 48, 16, 16, MaskKind::Causal, -1e4},
        {dtype, {2, 2}, 40, 70, 16, 8, MaskKind::Random, -1e4},
        {dtype, {3}, 33, 100, 8, 8, MaskKind::Random, -inf},
    };
    for (const AttentionCase &c : cases)
      testAttention(c);
  }
}

/// `t` ([..., A, B, C]) with dimensions rank-3 and rank-2 swapped: a
/// head-major [..., H, S, D] tensor as seq-major [..., S, H, D] and back.
Tensor swapSequenceAndHeads(const Tensor &t) {
  const size_t rank = t.shape.size();
  std::vector<int64_t> shape = t.shape;
  std::swap(shape[rank - 3], shape[rank - 2]);
  Tensor out(t.dtype, shape);
  const int64_t a = t.shape[rank - 3], b = t.shape[rank - 2],
                c = t.shape[rank - 1];
  for (int64_t e = 0; e < t.size(); ++e) {
    const int64_t outer = e / (a * b * c), i = (e / (b * c)) % a,
                  j = (e / c) % b, col = e % c;
    out.set(((outer * b + j) * a + i) * c + col, t.get(e));
  }
  return out;
}

TEST(CPUKernelsAttention, SeqMajorIsTheHeadTransposeOfHeadMajor) {
  // The same problem in both layouts: the seq-major results are the head
  // transposes of the head-major ones, bit for bit (lse as [..., S, H]
  // taken as [..., S, H, 1]).
  const double inf = std::numeric_limits<double>::infinity();
  for (DType dtype : {DType::F32, DType::BF16}) {
    for (AttentionCase c : {
             AttentionCase{
                 dtype, {2, 3}, 37, 37, 16, 8, MaskKind::Causal, -inf},
             AttentionCase{dtype, {2, 4}, 20, 33, 8, 8, MaskKind::Random, -1e4},
             AttentionCase{dtype, {3}, 16, 16, 8, 8, MaskKind::None, -inf},
         }) {
      SCOPED_TRACE(c.name());
      auto withColumn = [](const Tensor &t) {
        Tensor u = t;
        u.shape.push_back(1);
        return u;
      };
      auto withoutColumn = [](const Tensor &t) {
        Tensor u = t;
        u.shape.pop_back();
        return u;
      };
      Tensor q = random(dtype, c.shape(c.sq, c.d));
      Tensor k = random(dtype, c.shape(c.sk, c.d));
      Tensor v = random(dtype, c.shape(c.sk, c.dv));
      Tensor mask;
      std::vector<const Tensor *> inputs{&q, &k, &v};
      if (c.mask != MaskKind::None) {
        // A random mask differs from head to head, so that a layout that
        // mixed up heads would show.
        std::vector<int64_t> full = c.shape(c.sq, c.sk);
        mask = c.mask == MaskKind::Random ? random(DType::I1, full, 0, 2)
                                          : attentionMask(c);
        inputs.push_back(&mask);
      }
      std::vector<Tensor> fwd{Tensor(dtype, c.shape(c.sq, c.dv)),
                              Tensor(DType::F32, c.shape(c.sq, -1))};
      ASSERT_EQ(runKernel(makeKernel("attention", inputs, fwd, c.attrs()),
                          inputs, fwd),
                "");

      Attributes seqAttrs = c.attrs();
      seqAttrs["seq_major"] = int64_t(1);
      Tensor qs = swapSequenceAndHeads(q), ks = swapSequenceAndHeads(k),
             vs = swapSequenceAndHeads(v);
      std::vector<const Tensor *> seqInputs{&qs, &ks, &vs};
      if (c.mask != MaskKind::None)
        seqInputs.push_back(&mask); // the mask stays head-major
      std::vector<Tensor> seqFwd{
          Tensor(dtype, swapSequenceAndHeads(fwd[0]).shape),
          withoutColumn(swapSequenceAndHeads(withColumn(fwd[1])))};
      ASSERT_EQ(runKernel(makeKernel("attention", seqInputs, seqFwd, seqAttrs),
                          seqInputs, seqFwd),
                "");
      EXPECT_EQ(seqFwd[0].bytes, swapSequenceAndHeads(fwd[0]).bytes);
      EXPECT_EQ(seqFwd[1].bytes,
                swapSequenceAndHeads(withColumn(fwd[1])).bytes);

      Tensor dout = random(dtype, c.shape(c.sq, c.dv));
      std::vector<const Tensor *> bwdInputs{&q,    &k,      &v,
                                            &dout, &fwd[1], &fwd[0]};
      if (c.mask != MaskKind::None)
        bwdInputs.push_back(&mask);
      std::vector<Tensor> grads{Tensor(dtype, q.shape), Tensor(dtype, k.shape),
                                Tensor(dtype, v.shape)};
      ASSERT_EQ(runKernel(makeKernel("attention_backward", bwdInputs, grads,
                                     c.attrs()),
                          bwdInputs, grads),
                "");
      Tensor douts = swapSequenceAndHeads(dout);
      Tensor lses = withoutColumn(swapSequenceAndHeads(withColumn(fwd[1])));
      std::vector<const Tensor *> seqBwdInputs{&qs,    &ks,   &vs,
                                               &douts, &lses, &seqFwd[0]};
      if (c.mask != MaskKind::None)
        seqBwdInputs.push_back(&mask);
      std::vector<Tensor> seqGrads{Tensor(dtype, qs.shape),
                                   Tensor(dtype, ks.shape),
                                   Tensor(dtype, vs.shape)};
      ASSERT_EQ(runKernel(makeKernel("attention_backward", seqBwdInputs,
                                     seqGrads, seqAttrs),
                          seqBwdInputs, seqGrads),
                "");
      for (size_t i = 0; i < 3; ++i)
        EXPECT_EQ(seqGrads[i].bytes, swapSequenceAndHeads(grads[i]).bytes)
            << "gradient " << i;
    }
  }
}

TEST(CPUKernelsAttention, PackedQkvIsTheSeqMajorAttentionOfItsParts) {
  // packed_qkv=1 reads q, k and v where they lie in one [..., S, 3, H, D]
  // tensor and writes dq, dk and dv into one such tensor: the results are
  // those of the seq-major kernels on the three parts, bit for bit.
  const double inf = std::numeric_limits<double>::infinity();
  for (DType dtype : {DType::F32, DType::BF16}) {
    for (MaskKind maskKind : {MaskKind::Causal, MaskKind::None}) {
      AttentionCase c{dtype, {2, 3}, 21, 21, 8, 8, maskKind, -inf};
      SCOPED_TRACE(c.name());
      // Seq-major [2, S, 3 heads, D].
      std::vector<int64_t> shape{2, c.sq, 3, c.d}, rows{2, c.sq, 3};
      Tensor q = random(dtype, shape), k = random(dtype, shape),
             v = random(dtype, shape), dout = random(dtype, shape);
      Tensor qkv = packQkv(q, k, v);
      Tensor mask;
      std::vector<const Tensor *> inputs{&q, &k, &v}, packedInputs{&qkv};
      if (maskKind != MaskKind::None) {
        mask = attentionMask(c);
        inputs.push_back(&mask);
        packedInputs.push_back(&mask);
      }
      Attributes seqAttrs = c.attrs();
      seqAttrs["seq_major"] = int64_t(1);
      Attributes packedAttrs = seqAttrs;
      packedAttrs["packed_qkv"] = int64_t(1);

      std::vector<Tensor> fwd{Tensor(dtype, shape), Tensor(DType::F32, rows)};
      std::vector<Tensor> packedFwd = fwd;
      ASSERT_EQ(runKernel(makeKernel("attention", inputs, fwd, seqAttrs),
                          inputs, fwd),
                "");
      ASSERT_EQ(runKernel(makeKernel("attention", packedInputs, packedFwd,
                                     packedAttrs),
                          packedInputs, packedFwd),
                "");
      EXPECT_EQ(packedFwd[0].bytes, fwd[0].bytes);
      EXPECT_EQ(packedFwd[1].bytes, fwd[1].bytes);

      std::vector<const Tensor *> bwdInputs{&q,    &k,      &v,
                                            &dout, &fwd[1], &fwd[0]};
      std::vector<const Tensor *> packedBwdInputs{&qkv, &dout, &fwd[1],
                                                  &fwd[0]};
      if (maskKind != MaskKind::None) {
        bwdInputs.push_back(&mask);
        packedBwdInputs.push_back(&mask);
      }
      std::vector<Tensor> grads{Tensor(dtype, shape), Tensor(dtype, shape),
                                Tensor(dtype, shape)};
      std::vector<Tensor> packedGrads{Tensor(dtype, qkv.shape)};
      ASSERT_EQ(runKernel(makeKernel("attention_backward", bwdInputs, grads,
                                     seqAttrs),
                          bwdInputs, grads),
                "");
      ASSERT_EQ(runKernel(makeKernel("attention_backward", packedBwdInputs,
                                     packedGrads, packedAttrs),
                          packedBwdInputs, packedGrads),
                "");
      EXPECT_EQ(packedGrads[0].bytes,
                packQkv(grads[0], grads[1], grads[2]).bytes);
    }
  }
}

TEST(CPUKernelsAttention, FullyMaskedRow) {
  // Query 0 sees no key: its out is NaN and its lse -inf, as the unfused
  // softmax gives; it contributes nothing to the gradients.
  const double inf = std::numeric_limits<double>::infinity();
  for (DType dtype : {DType::F32, DType::BF16}) {
    AttentionCase c{dtype, {2}, 20, 40, 8, 8, MaskKind::Causal, -inf};
    SCOPED_TRACE(c.name());
    Tensor q = random(dtype, c.shape(c.sq, c.d));
    Tensor k = random(dtype, c.shape(c.sk, c.d));
    Tensor v = random(dtype, c.shape(c.sk, c.dv));
    Tensor mask = random(DType::I1, {1, c.sq, c.sk}, 0, 2);
    for (int64_t j = 0; j < c.sk; ++j)
      mask.set(j, 1);
    std::vector<const Tensor *> inputs{&q, &k, &v, &mask};
    std::vector<Tensor> fwd{Tensor(dtype, c.shape(c.sq, c.dv)),
                            Tensor(DType::F32, c.shape(c.sq, -1))};
    ASSERT_EQ(
        runKernel(makeKernel("attention", inputs, fwd, c.attrs()), inputs, fwd),
        "");
    for (int64_t b = 0; b < 2; ++b) {
      EXPECT_EQ(fwd[1].get(b * c.sq), -inf);
      EXPECT_TRUE(std::isfinite(fwd[1].get(b * c.sq + 1)));
      for (int64_t t = 0; t < c.dv; ++t) {
        EXPECT_TRUE(std::isnan(fwd[0].get(b * c.sq * c.dv + t)));
        EXPECT_TRUE(std::isfinite(fwd[0].get((b * c.sq + 1) * c.dv + t)));
      }
    }
    AttentionReference ref{c, q, k, v, &mask};
    std::vector<double> out, lse;
    ref.forward(out, lse);
    expectCloseScaled(fwd[0], out, 1e-2, 1e-2);
    expectClose(fwd[1], lse, 1e-5, 1e-5);

    Tensor dout = random(dtype, c.shape(c.sq, c.dv));
    Tensor delta = attentionDelta(c, dout, fwd[0]); // NaN for the NaN row
    std::vector<const Tensor *> bwdInputs{&q,      &k,      &v,   &dout,
                                          &fwd[1], &fwd[0], &mask};
    std::vector<Tensor> grads{Tensor(dtype, q.shape), Tensor(dtype, k.shape),
                              Tensor(dtype, v.shape)};
    ASSERT_EQ(
        runKernel(makeKernel("attention_backward", bwdInputs, grads, c.attrs()),
                  bwdInputs, grads),
        "");
    for (int64_t t = 0; t < c.d; ++t)
      EXPECT_EQ(grads[0].get(t), 0); // dq of the masked row
    std::vector<double> dq, dk, dv;
    ref.backward(dout, fwd[1], delta, dq, dk, dv);
    expectCloseScaled(grads[0], dq, 1e-2, 1e-2);
    expectCloseScaled(grads[1], dk, 1e-2, 1e-2);
    expectCloseScaled(grads[2], dv, 1e-2, 1e-2);
  }
}

TEST(CPUKernelsAttention, CheckRejects) {
  Tensor q(DType::F32, {2, 3, 16, 8}), k(DType::F32, {2, 3, 20, 8}),
      v(DType::F32, {2, 3, 20, 4});
  Tensor out(DType::F32, {2, 3, 16, 4}), lse(DType::F32, {2, 3, 16});
  Tensor mask(DType::I1, {1, 3, 16, 20});
  Attributes attrs{{"scale", 0.5}};
  auto fwd = [&](std::vector<const Tensor *> inputs,
                 std::vector<Tensor> outputs, Attributes a) {
    return makeKernel("attention", inputs, outputs, a);
  };
  EXPECT_EQ(checkMessage(fwd({&q, &k, &v}, {out, lse}, attrs)), "");
  EXPECT_EQ(checkMessage(fwd({&q, &k, &v, &mask}, {out, lse},
                             {{"scale", 0.5}, {"mask_value", -1e4}})),
            "");
  EXPECT_REJECTED(fwd({&q, &k}, {out, lse}, attrs),
                  "expects 3 or 4 inputs (q, k, v, mask) and 2 outputs");
  EXPECT_REJECTED(fwd({&q, &k, &v}, {out, lse}, {}),
                  "missing attribute 'scale'");
  EXPECT_REJECTED(
      fwd({&q, &k, &v}, {out, lse}, {{"scale", 0.5}, {"causal", int64_t(1)}}),
      "unknown attribute 'causal'");
  EXPECT_REJECTED(fwd({&q, &k, &v}, {out, lse},
                      {{"scale", 0.5}, {"mask_value", std::string("x")}}),
                  "attribute 'mask_value' must be a number");
  Tensor floatMask(DType::F32, {1, 3, 16, 20});
  EXPECT_REJECTED(fwd({&q, &k, &v, &floatMask}, {out, lse}, attrs),
                  "mask has dtype f32; expected i1");
  for (std::vector<int64_t> shape : std::vector<std::vector<int64_t>>{
           {2, 2, 16, 20}, {16, 20}, {1, 3, 20, 16}, {1, 1, 16, 1}}) {
    Tensor badMask(DType::I1, shape);
    EXPECT_REJECTED(fwd({&q, &k, &v, &badMask}, {out, lse}, attrs),
                    "should be [..., Sq, Sk] = [2,3,16,20]");
  }
  Tensor kHalf(DType::BF16, {2, 3, 20, 8});
  EXPECT_REJECTED(fwd({&q, &kHalf, &v}, {out, lse}, attrs),
                  "q (f32) and k (bf16) must have the same dtype");
  Tensor qInt(DType::I32, {2, 3, 16, 8});
  EXPECT_REJECTED(fwd({&qInt, &k, &v}, {out, lse}, attrs),
                  "q has dtype i32; only f32, f64 and bf16");
  Tensor kWide(DType::F32, {2, 3, 20, 9});
  EXPECT_REJECTED(fwd({&q, &kWide, &v}, {out, lse}, attrs), "k [2,3,20,9]");
  Tensor kBatch(DType::F32, {1, 3, 20, 8});
  EXPECT_REJECTED(fwd({&q, &kBatch, &v}, {out, lse}, attrs),
                  "q's batch dims and head dim");
  Tensor vShort(DType::F32, {2, 3, 19, 4});
  EXPECT_REJECTED(fwd({&q, &k, &vShort}, {out, lse}, attrs),
                  "v [2,3,19,4] should have q's batch dims and k's 20 keys");
  EXPECT_REJECTED(
      fwd({&q, &k, &v}, {out, Tensor(DType::F64, {2, 3, 16})}, attrs),
      "lse has dtype f64; expected f32");
  EXPECT_REJECTED(
      fwd({&q, &k, &v}, {Tensor(DType::F32, {2, 3, 16, 8}), lse}, attrs),
      "out [2,3,16,8] should be [2,3,16,4]");
  Tensor vector(DType::F32, {8});
  EXPECT_REJECTED(fwd({&vector, &vector, &vector}, {out, lse}, attrs),
                  "must have rank >= 2");

  // seq_major: q, k, v and out are [..., S, H, D], lse [..., S, H].
  Attributes seqMajor{{"scale", 0.5}, {"seq_major", int64_t(1)}};
  Tensor qs(DType::F32, {2, 16, 3, 8}), ks(DType::F32, {2, 20, 3, 8}),
      vs(DType::F32, {2, 20, 3, 4});
  Tensor outs(DType::F32, {2, 16, 3, 4}), lses(DType::F32, {2, 16, 3});
  EXPECT_EQ(checkMessage(fwd({&qs, &ks, &vs, &mask}, {outs, lses}, seqMajor)),
            "");
  EXPECT_REJECTED(fwd({&qs, &ks, &vs}, {outs, lses},
                      {{"scale", 0.5}, {"seq_major", int64_t(2)}}),
                  "seq_major must be 0 or 1, got 2");
  Tensor matrix(DType::F32, {16, 8});
  EXPECT_REJECTED(fwd({&matrix, &matrix, &matrix}, {outs, lses}, seqMajor),
                  "must have rank >= 3 ([..., Sq, H, D])");
  Tensor ksHeads(DType::F32, {2, 20, 2, 8});
  EXPECT_REJECTED(fwd({&qs, &ksHeads, &vs}, {outs, lses}, seqMajor),
                  "k [2,20,2,8] should be [2,20,3,8]");
  EXPECT_REJECTED(fwd({&qs, &ks, &vs}, {outs, lse}, seqMajor),
                  "lse [2,3,16] should be [2,16,3]");
  EXPECT_REJECTED(fwd({&q, &k, &v}, {out, lse}, seqMajor),
                  "k [2,3,20,8] should be [2,3,16,8]");

  // packed_qkv: q, k and v are one [..., S, 3, H, D] input.
  Attributes packed{
      {"scale", 0.5}, {"seq_major", int64_t(1)}, {"packed_qkv", int64_t(1)}};
  Tensor qkv(DType::F32, {2, 16, 3, 3, 8}), outp(DType::F32, {2, 16, 3, 8});
  Tensor squareMask(DType::I1, {1, 3, 16, 16});
  EXPECT_EQ(checkMessage(fwd({&qkv, &squareMask}, {outp, lses}, packed)), "");
  EXPECT_REJECTED(
      fwd({&qkv}, {outp, lses}, {{"scale", 0.5}, {"packed_qkv", int64_t(1)}}),
      "packed_qkv=1 needs seq_major=1");
  EXPECT_REJECTED(fwd({&qkv, &qkv, &qkv}, {outp, lses}, packed),
                  "expects 1 or 2 inputs (qkv, mask)");
  Tensor qkv4(DType::F32, {2, 16, 4, 3, 8});
  EXPECT_REJECTED(fwd({&qkv4}, {outp, lses}, packed),
                  "qkv [2,16,4,3,8] must be [..., S, 3, H, D]");
  EXPECT_REJECTED(fwd({&qkv}, {outs, lses}, packed),
                  "out [2,16,3,4] should be [2,16,3,8]");
  EXPECT_REJECTED(
      makeKernel("attention_backward", {&qkv, &outp, &lses, &outp},
                 {qkv, qkv, qkv}, packed),
      "4 or 5 inputs (qkv, dout, lse, out, mask) and 1 output (dqkv)");
  EXPECT_REJECTED(makeKernel("attention_backward", {&qkv, &outp, &lses, &outp},
                             {outp}, packed),
                  "dqkv [2,16,3,8] should be [2,16,3,3,8]");
  EXPECT_EQ(checkMessage(makeKernel("attention_backward",
                                    {&qkv, &outp, &lses, &outp, &squareMask},
                                    {qkv}, packed)),
            "");

  // attention_backward
  Tensor dout(DType::F32, {2, 3, 16, 4});
  auto bwd = [&](std::vector<const Tensor *> inputs,
                 std::vector<Tensor> outputs, Attributes a) {
    return makeKernel("attention_backward", inputs, outputs, a);
  };
  std::vector<Tensor> grads{q, k, v};
  EXPECT_EQ(checkMessage(bwd({&q, &k, &v, &dout, &lse, &out}, grads, attrs)),
            "");
  EXPECT_EQ(
      checkMessage(bwd({&q, &k, &v, &dout, &lse, &out, &mask}, grads, attrs)),
      "");
  EXPECT_REJECTED(bwd({&q, &k, &v, &dout, &lse}, grads, attrs),
                  "expects 6 or 7 inputs (q, k, v, dout, lse, out, mask)");
  EXPECT_REJECTED(bwd({&q, &k, &v, &dout, &lse, &out}, {q, k}, attrs),
                  "and 3 outputs (dq, dk, dv)");
  EXPECT_REJECTED(bwd({&q, &k, &v, &out, &lse, &out}, grads, {}),
                  "missing attribute 'scale'");
  EXPECT_REJECTED(bwd({&q, &k, &v, &q, &lse, &out}, grads, attrs),
                  "dout [2,3,16,8] should be [2,3,16,4]");
  Tensor lse64(DType::F64, {2, 3, 16});
  EXPECT_REJECTED(bwd({&q, &k, &v, &dout, &lse64, &out}, grads, attrs),
                  "lse has dtype f64; expected f32");
  EXPECT_REJECTED(bwd({&q, &k, &v, &dout, &lse, &lse}, grads, attrs),
                  "out [2,3,16] should be [2,3,16,4]");
  EXPECT_REJECTED(bwd({&q, &k, &v, &dout, &lse, &out}, {q, q, v}, attrs),
                  "dk [2,3,16,8] should be [2,3,20,8]");
  EXPECT_REJECTED(
      bwd({&q, &k, &v, &dout, &lse, &out, &floatMask}, grads, attrs),
      "mask has dtype f32; expected i1");
}

} // namespace
