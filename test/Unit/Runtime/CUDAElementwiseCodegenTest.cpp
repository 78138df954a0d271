//===- CUDAElementwiseCodegenTest.cpp - CUDA elementwise source, no GPU ---===//
//
// The CUDA backend's elementwise programs become CUDA C++ that NVRTC compiles
// at run time. NVRTC needs no GPU, so every op of every dtype (bf16, i1,
// i32, i64, broadcast inputs, scalars, several outputs) is generated and
// compiled here for sm_90 (and other architectures), and a failure prints
// NVRTC's log and the source. Also: properties of the generated source, the
// NVRTC options per architecture, and createCUDAKernel's validation errors
// (which fail before touching a device).
//
//===----------------------------------------------------------------------===//

#include "CUDA/CUDAKernels.h"
#include "CUDA/Kernels/Common.h"
#include "CUDA/Kernels/Elementwise.h"
#include "loom/Runtime/Kernels.h"

#include <gtest/gtest.h>

#include <limits>

using namespace loomrt;
using namespace loomrt::cuda;

namespace {

TensorRef ref(DType dtype, std::vector<int64_t> shape) {
  TensorRef r;
  r.dtype = dtype;
  r.shape = std::move(shape);
  return r;
}

ProgramOp op(const std::string &name, DType dtype, std::vector<int> operands,
             Attributes attrs = {}) {
  ProgramOp p;
  p.op = name;
  p.dtype = dtype;
  p.operands = std::move(operands);
  p.attrs = std::move(attrs);
  return p;
}

/// An elementwise instruction; outputs take their dtypes from the yielded
/// values.
struct ProgramBuilder {
  Instruction instruction;
  std::vector<DType> types;
  std::vector<int64_t> shape;

  explicit ProgramBuilder(std::vector<int64_t> outputShape)
      : shape(std::move(outputShape)) {
    instruction.kernel = "elementwise";
  }
  int input(DType dtype, std::vector<int64_t> inputShape) {
    instruction.inputs.push_back(ref(dtype, std::move(inputShape)));
    types.push_back(dtype);
    return int(types.size()) - 1;
  }
  int add(const std::string &name, DType dtype, std::vector<int> operands,
          Attributes attrs = {}) {
    instruction.program.push_back(
        op(name, dtype, std::move(operands), std::move(attrs)));
    types.push_back(dtype);
    return int(types.size()) - 1;
  }
  void yield(int value) {
    instruction.yields.push_back(value);
    instruction.outputs.push_back(ref(types[size_t(value)], shape));
  }
};

/// Every op a dtype takes, on a dense input, a broadcast row and a scalar,
/// yielding several dtypes (bf16 among them unless `bf16Casts` is false: the
/// CPU check does not take bf16 yet).
Instruction everyOp(DType t, bool bf16Casts = true) {
  const bool isFloat = t == DType::F32 || t == DType::F64 || t == DType::BF16;
  ProgramBuilder p({3, 4, 5});
  int x = p.input(t, {3, 4, 5});
  int row = p.input(t, {5});
  int column = p.input(t, {3, 1, 1});
  int scalar = p.input(t, {});
  int acc = p.add("add", t, {x, row});
  acc = p.add("sub", t, {acc, column});
  acc = p.add("mul", t, {acc, scalar});
  acc = p.add("div", t, {acc, row});
  acc = p.add("pow", t, {acc, scalar});
  acc = p.add("max", t, {acc, x});
  acc = p.add("min", t, {acc, row});
  acc = p.add("neg", t, {acc});
  acc = p.add("relu", t, {acc});
  acc = p.add("abs", t, {acc});
  if (isFloat) {
    acc = p.add("fmod", t, {acc, row});
    for (const char *name : {"sqrt", "rsqrt", "exp", "log", "erf", "tanh",
                             "sigmoid", "reciprocal", "sin", "cos"})
      acc = p.add(name, t, {acc});
    acc = p.add("gelu", t, {acc}, {{"approximate", std::string("none")}});
    acc = p.add("gelu", t, {acc}, {{"approximate", std::string("tanh")}});
    acc = p.add("gelu", t, {acc});
  }
  int c = p.add("const", t, {}, {{"value", 2.5}});
  int flag = -1;
  for (const char *direction : {"eq", "ne", "lt", "le", "gt", "ge"})
    flag = p.add("compare", DType::I1, {acc, c},
                 {{"direction", std::string(direction)}});
  int selected = p.add("select", t, {flag, acc, x});
  p.yield(selected);
  p.yield(flag);
  for (DType to :
       {DType::F32, DType::F64, DType::BF16, DType::I1, DType::I32, DType::I64})
    if (to != DType::BF16 || bf16Casts)
      p.yield(p.add("cast", to, {selected}));
  return p.instruction;
}

/// i1 values: max, min, compare, select, const and casts both ways.
Instruction booleanOps(bool bf16Casts = true) {
  ProgramBuilder p({16, 8});
  int a = p.input(DType::I1, {16, 8});
  int b = p.input(DType::I1, {8});
  int f = p.input(DType::F32, {16, 8});
  int c = p.add("const", DType::I1, {}, {{"value", int64_t(1)}});
  int m = p.add("max", DType::I1, {a, b});
  int n = p.add("min", DType::I1, {m, c});
  int e =
      p.add("compare", DType::I1, {m, n}, {{"direction", std::string("ne")}});
  int s = p.add("select", DType::I1, {e, a, b});
  p.yield(s);
  for (DType to : {DType::F32, DType::F64, DType::BF16, DType::I32, DType::I64})
    if (to != DType::BF16 || bf16Casts)
      p.yield(p.add("cast", to, {s}));
  p.yield(p.add("cast", DType::I1, {f}));
  return p.instruction;
}

/// Compiles `instruction`'s source for `cc`; on failure the test fails with
/// the log and the source.
void expectCompiles(const Instruction &instruction, int cc = 90) {
  std::string source = elementwiseSource(instruction);
  std::string image;
  Status status = compileElementwise(source, cc, image);
  EXPECT_TRUE(status.isOk()) << status.message() << "\n--- source ---\n"
                             << source;
  if (status) {
    EXPECT_GT(image.size(), 0u);
  }
}

/// The CPU check's verdict.
std::string cpuCheck(const Instruction &instruction) {
  Status status = lookupCPUKernel("elementwise")->check(instruction);
  return status.isOk() ? "" : status.message();
}

//===----------------------------------------------------------------------===//
// Every op and dtype compiles
//===----------------------------------------------------------------------===//

TEST(CUDAElementwiseCodegen, EveryOpOfEveryDtypeCompiles) {
  for (DType t : {DType::F32, DType::F64, DType::I32, DType::I64}) {
    SCOPED_TRACE(dtypeName(t));
    // A valid plan program (what the CPU backend runs too).
    EXPECT_EQ(cpuCheck(everyOp(t, false)), "");
    expectCompiles(everyOp(t));
  }
}

TEST(CUDAElementwiseCodegen, BF16ProgramsCompile) {
  expectCompiles(everyOp(DType::BF16));
}

TEST(CUDAElementwiseCodegen, BooleanProgramsCompile) {
  EXPECT_EQ(cpuCheck(booleanOps(false)), "");
  expectCompiles(booleanOps());
}

TEST(CUDAElementwiseCodegen, CompilesForOtherArchitectures) {
  Instruction instruction = everyOp(DType::F32);
  for (int cc : {75, 80, 100})
    expectCompiles(instruction, cc);
}

TEST(CUDAElementwiseCodegen, ConstantOnlyAndScalarPrograms) {
  ProgramBuilder constant({7});
  constant.yield(constant.add("const", DType::F32, {}, {{"value", 1.5}}));
  EXPECT_EQ(cpuCheck(constant.instruction), "");
  expectCompiles(constant.instruction);

  ProgramBuilder scalar({});
  int x = scalar.input(DType::F64, {});
  scalar.yield(scalar.add("exp", DType::F64, {x}));
  EXPECT_EQ(cpuCheck(scalar.instruction), "");
  expectCompiles(scalar.instruction);
}

TEST(CUDAElementwiseCodegen, InPlaceYieldOfAnInput) {
  ProgramBuilder p({4, 4});
  int x = p.input(DType::I64, {4, 4});
  p.yield(x);
  EXPECT_EQ(cpuCheck(p.instruction), "");
  expectCompiles(p.instruction);
}

//===----------------------------------------------------------------------===//
// Properties of the source
//===----------------------------------------------------------------------===//

TEST(CUDAElementwiseCodegen, BroadcastStridesAreBakedIn) {
  // [3,1,5] into [3,4,5]: strides 5, 0, 1 over the (unmergeable) dims.
  ProgramBuilder p({3, 4, 5});
  int a = p.input(DType::F32, {3, 4, 5});
  int b = p.input(DType::F32, {3, 1, 5});
  p.yield(p.add("add", DType::F32, {a, b}));
  std::string source = elementwiseSource(p.instruction);
  EXPECT_NE(source.find("c2 = rest % 5u"), std::string::npos) << source;
  EXPECT_NE(source.find("rest /= 4u"), std::string::npos) << source;
  EXPECT_EQ(source.find("c1"), std::string::npos) << source; // not needed
  EXPECT_NE(source.find("in1[c0 * 5u + c2]"), std::string::npos) << source;
  EXPECT_NE(source.find("in0[i]"), std::string::npos) << source;
  EXPECT_NE(source.find("i < 60u"), std::string::npos) << source;
  // A broadcast input: no vector kernel.
  EXPECT_FALSE(elementwiseVectorizable(p.instruction));
  EXPECT_EQ(source.find(kElementwiseVectorKernel), std::string::npos);
  expectCompiles(p.instruction);
}

TEST(CUDAElementwiseCodegen, MergedDimsAndScalars) {
  // A bias [8] into [2,3,8] merges the outer dims: space [6,8], strides 0, 1.
  ProgramBuilder p({2, 3, 8});
  int a = p.input(DType::F32, {2, 3, 8});
  int bias = p.input(DType::F32, {1, 8});
  int s = p.input(DType::F32, {1});
  int sum = p.add("add", DType::F32, {a, bias});
  p.yield(p.add("mul", DType::F32, {sum, s}));
  std::string source = elementwiseSource(p.instruction);
  EXPECT_NE(source.find("in1[c1]"), std::string::npos) << source;
  EXPECT_NE(source.find("const float s2 = in2[0];"), std::string::npos)
      << source;
}

TEST(CUDAElementwiseCodegen, DenseProgramsHaveAVectorKernel) {
  ProgramBuilder p({1024});
  int a = p.input(DType::BF16, {1024});
  int b = p.input(DType::BF16, {});
  p.yield(p.add("mul", DType::BF16, {a, b}));
  EXPECT_TRUE(elementwiseVectorizable(p.instruction));
  std::string source = elementwiseSource(p.instruction);
  EXPECT_NE(source.find(kElementwiseVectorKernel), std::string::npos);
  // bf16 loads, f32 math rounded to bf16, bf16 stores.
  EXPECT_NE(source.find("rnd_bf16(v0 * v1)"), std::string::npos) << source;
  EXPECT_NE(source.find("ld_bf16(in0[i])"), std::string::npos) << source;
  EXPECT_NE(source.find("st_bf16(y0)"), std::string::npos) << source;
  expectCompiles(p.instruction);
}

TEST(CUDAElementwiseCodegen, HugeTensorsUse64BitIndices) {
  ProgramBuilder small({1 << 20});
  small.yield(small.add("const", DType::I1, {}, {{"value", 1.0}}));
  EXPECT_NE(elementwiseSource(small.instruction).find("u32 i ="),
            std::string::npos);

  // 3 * 2^30 elements, one input broadcast along the inner dim.
  ProgramBuilder huge({int64_t(3) << 29, 2});
  int x = huge.input(DType::F32, {int64_t(3) << 29, 2});
  int row = huge.input(DType::F32, {int64_t(3) << 29, 1});
  huge.yield(huge.add("add", DType::F32, {x, row}));
  EXPECT_EQ(cpuCheck(huge.instruction), "");
  std::string source = elementwiseSource(huge.instruction);
  EXPECT_NE(source.find("u64 i ="), std::string::npos) << source;
  expectCompiles(huge.instruction);
}

TEST(CUDAElementwiseCodegen, ConstantsFollowTheCastRules) {
  ProgramBuilder p({2});
  p.yield(p.add("const", DType::I32, {}, {{"value", 1e20}}));
  p.yield(p.add("const", DType::I32, {}, {{"value", -1e20}}));
  p.yield(p.add("const", DType::I64, {},
                {{"value", std::numeric_limits<double>::quiet_NaN()}}));
  p.yield(p.add("const", DType::I32, {}, {{"value", -2.9}}));
  p.yield(p.add("const", DType::F32, {},
                {{"value", -std::numeric_limits<double>::infinity()}}));
  p.yield(p.add("const", DType::I1, {}, {{"value", 0.25}}));
  std::string source = elementwiseSource(p.instruction);
  EXPECT_NE(source.find("(int)0x7fffffffu"), std::string::npos) << source;
  EXPECT_NE(source.find("(int)0x80000000u"), std::string::npos) << source;
  EXPECT_NE(source.find("(i64)0x0000000000000000ull"), std::string::npos)
      << source;
  EXPECT_NE(source.find("(int)0xfffffffeu"), std::string::npos) << source;
  EXPECT_NE(source.find("__uint_as_float(0xff800000u)"), std::string::npos)
      << source;
  EXPECT_NE(source.find("(u8)1"), std::string::npos) << source;
  expectCompiles(p.instruction);
}

TEST(CUDAElementwiseCodegen, SameSourceForTheSameProgram) {
  // The process-wide module cache is keyed by the source.
  EXPECT_EQ(elementwiseSource(everyOp(DType::F32)),
            elementwiseSource(everyOp(DType::F32)));
  EXPECT_NE(elementwiseSource(everyOp(DType::F32)),
            elementwiseSource(everyOp(DType::F64)));
}

//===----------------------------------------------------------------------===//
// NVRTC options
//===----------------------------------------------------------------------===//

TEST(CUDAElementwiseCodegen, NVRTCOptions) {
  std::vector<std::string> options;
  bool cubin = false;
  ASSERT_TRUE(nvrtcOptions(90, options, cubin).isOk());
  EXPECT_TRUE(cubin);
  EXPECT_NE(std::find(options.begin(), options.end(), "-arch=sm_90"),
            options.end());
  EXPECT_NE(std::find(options.begin(), options.end(), "-fmad=false"),
            options.end());
  // A future architecture: PTX for the newest one NVRTC has.
  ASSERT_TRUE(nvrtcOptions(990, options, cubin).isOk());
  EXPECT_FALSE(cubin);
  EXPECT_EQ(options.back().rfind("-arch=compute_", 0), 0u) << options.back();
  // Older than anything NVRTC knows.
  Status old = nvrtcOptions(10, options, cubin);
  EXPECT_FALSE(old.isOk());
  EXPECT_NE(old.message().find("cannot compile for compute capability 10"),
            std::string::npos)
      << old.message();
}

TEST(CUDAElementwiseCodegen, CompileErrorsCarryTheLog) {
  std::string image;
  Status status = compileElementwise("this is not CUDA", 90, image);
  ASSERT_FALSE(status.isOk());
  EXPECT_NE(status.message().find("NVRTC failed"), std::string::npos)
      << status.message();
  EXPECT_NE(status.message().find("error"), std::string::npos)
      << status.message();
}

//===----------------------------------------------------------------------===//
// createCUDAKernel's validation (fails before any device work)
//===----------------------------------------------------------------------===//

TEST(CUDAKernelValidation, EveryCPUKernelHasACUDAKernel) {
  EXPECT_EQ(cudaKernelNames(), kernelNames());
}

TEST(CUDAKernelValidation, UnknownKernelsAndCPUCheckMessages) {
  LaunchContext context;
  Instruction unknown;
  unknown.kernel = "frobnicate";
  auto created = createCUDAKernel(context, unknown);
  ASSERT_FALSE(created.isOk());
  EXPECT_NE(created.status().message().find("unknown kernel 'frobnicate'"),
            std::string::npos)
      << created.status().message();

  // The CPU check runs first: same message as the CPU backend.
  Instruction matmul;
  matmul.kernel = "matmul";
  matmul.inputs = {ref(DType::F32, {2, 3}), ref(DType::F32, {4, 5})};
  matmul.outputs = {ref(DType::F32, {2, 5})};
  created = createCUDAKernel(context, matmul);
  ASSERT_FALSE(created.isOk());
  EXPECT_NE(created.status().message().find("disagree on K"), std::string::npos)
      << created.status().message();

  Instruction collective = matmul;
  collective.kind = Instruction::Kind::Collective;
  created = createCUDAKernel(context, collective);
  ASSERT_FALSE(created.isOk());
  EXPECT_NE(created.status().message().find("not a kernel instruction"),
            std::string::npos)
      << created.status().message();
}

TEST(CUDAKernelValidation, ElementwiseNeedsAComputeCapability) {
  ProgramBuilder p({4});
  int x = p.input(DType::F32, {4});
  p.yield(p.add("exp", DType::F32, {x}));
  LaunchContext context; // computeCapability 0
  auto created = createCUDAKernel(context, p.instruction);
  ASSERT_FALSE(created.isOk());
  EXPECT_NE(created.status().message().find("no compute capability"),
            std::string::npos)
      << created.status().message();
}

TEST(CUDAKernelValidation, CrossEntropyNeedsWorkspaceToReduce) {
  Instruction inst;
  inst.kernel = "cross_entropy";
  inst.inputs = {ref(DType::F32, {64, 10}), ref(DType::I64, {64})};
  inst.outputs = {ref(DType::F32, {})};
  LaunchContext context;
  context.workspaceBytes = 100; // < 64 samples * 8 bytes
  auto created = createCUDAKernel(context, inst);
  ASSERT_FALSE(created.isOk());
  EXPECT_NE(created.status().message().find("needs 512 bytes of workspace"),
            std::string::npos)
      << created.status().message();
  inst.attrs["reduction"] = std::string("none");
  inst.outputs = {ref(DType::F32, {64})};
  EXPECT_TRUE(createCUDAKernel(context, inst).isOk());
}

} // namespace

//===----------------------------------------------------------------------===//
// A plan's programs compile in parallel, each distinct one once
//===----------------------------------------------------------------------===//

/// x * k + offset over [rows, 7]: distinct sources for distinct `rows`.
Instruction scaleProgram(int64_t rows) {
  ProgramBuilder p({rows, 7});
  int x = p.input(DType::F32, {rows, 7});
  int k = p.add("const", DType::F32, {}, {{"value", 3.0}});
  int offset = p.add("const", DType::F32, {}, {{"value", 0.5}});
  p.yield(p.add("add", DType::F32, {p.add("mul", DType::F32, {x, k}), offset}));
  return p.instruction;
}

TEST(CUDAElementwiseCodegen, PlansCompileEachDistinctProgramOnce) {
  // Sizes no other test uses, so the process-wide cache starts without
  // them: five programs, three of them twice, one f16 program (which
  // createElementwise rejects) and a kernel of another kind.
  std::vector<Instruction> plan;
  for (int64_t rows : {1001, 1002, 1003, 1004, 1005, 1001, 1002, 1003})
    plan.push_back(scaleProgram(rows));
  Instruction f16 = scaleProgram(1006);
  f16.inputs[0].dtype = DType::F16;
  plan.push_back(f16);
  Instruction other;
  other.kernel = "softmax";
  plan.push_back(other);
  EXPECT_EQ(compileElementwisePrograms(plan, {}, 90, 4), 5u);
  // All cached now; and an unknown device compiles nothing.
  EXPECT_EQ(compileElementwisePrograms(plan, {}, 90, 4), 0u);
  EXPECT_EQ(compileElementwisePrograms({scaleProgram(1007)}, {}, 0, 4), 0u);
  // One thread works through the list too.
  EXPECT_EQ(compileElementwisePrograms({scaleProgram(1007), scaleProgram(1008)},
                                       {}, 90, 1),
            2u);
}

//===----------------------------------------------------------------------===//
// How reductions that would leave the device idle are cut into chunks
//===----------------------------------------------------------------------===//

TEST(CUDAReductionChunks, FillTheDeviceWithinTheWorkspace) {
  const uint64_t workspace = uint64_t(32) << 20;
  // A GPT-2 bias gradient on an H200 (132 SMs): 768 columns in blocks of 32
  // over 8192 rows; 4 blocks per SM wanted, chunks of 64 rows at least.
  EXPECT_EQ(reductionChunks(24, 8192, 64, 768 * 8, 132, workspace),
            (4 * 132 + 23) / 24);
  // A whole-tensor sum: one block per row before.
  EXPECT_EQ(reductionChunks(1, int64_t(1) << 26, 2048, 8, 132, workspace),
            4 * 132);
  // Short ranges give fewer chunks (or none) rather than tiny ones.
  EXPECT_EQ(reductionChunks(1, 64 * 5 + 63, 64, 8, 132, workspace), 5);
  EXPECT_EQ(reductionChunks(1, 127, 64, 8, 132, workspace), 1);
  // Launches with half the wanted blocks or more are left alone.
  EXPECT_EQ(reductionChunks(2 * 132, 1 << 20, 64, 8, 132, workspace), 2);
  EXPECT_EQ(reductionChunks(2 * 132 + 1, 1 << 20, 64, 8, 132, workspace), 1);
  // The partial results must fit the workspace.
  EXPECT_EQ(reductionChunks(1, 1 << 20, 64, workspace / 3, 132, workspace), 3);
  EXPECT_EQ(reductionChunks(1, 1 << 20, 64, workspace, 132, workspace), 1);
  EXPECT_EQ(reductionChunks(1, 1 << 20, 64, 8, 132, 0), 1);
  // An unknown device is not chunked.
  EXPECT_EQ(reductionChunks(1, 1 << 20, 64, 8, 0, workspace), 1);
}

namespace {

TEST(CUDAAttentionFactory, BackwardNeedsWorkspaceForDelta) {
  // attention_backward keeps one delta per query row in the launch
  // workspace between its two kernels, a batch (here one of 2 x 4 heads)
  // at a time or more; a workspace that cannot hold one batch's rows is an
  // error when the kernel is created (before any device call, so no GPU
  // needed).
  Instruction inst;
  inst.kernel = "attention_backward";
  const std::vector<int64_t> rows = {2, 16, 4, 8}; // [B, S, H, D], seq-major
  // q, k, v, dout, lse, out.
  for (int i = 0; i < 5; ++i)
    inst.inputs.push_back(ref(DType::BF16, rows));
  inst.inputs.insert(inst.inputs.begin() + 4, ref(DType::F32, {2, 16, 4}));
  inst.outputs = {ref(DType::BF16, rows), ref(DType::BF16, rows),
                  ref(DType::BF16, rows)};
  inst.attrs["scale"] = 0.5;
  inst.attrs["seq_major"] = int64_t(1);
  LaunchContext context;
  context.workspaceBytes = 16 * 4 - 1; // one f32 short of 16 rows
  KernelOr kernel = createAttentionBackward(context, inst);
  ASSERT_FALSE(kernel.isOk());
  EXPECT_NE(kernel.status().message().find(
                "attention_backward keeps delta for one batch's 16 query "
                "rows (64 bytes) in the launch workspace, which has 63"),
            std::string::npos)
      << kernel.status().message();
}

} // namespace

//===----------------------------------------------------------------------===//
// Elementwise groups
//===----------------------------------------------------------------------===//

namespace {

TensorRef weight(uint64_t id, DType dtype, std::vector<int64_t> shape) {
  TensorRef r = ref(dtype, std::move(shape));
  r.space = TensorRef::Space::Weight;
  r.offset = id;
  return r;
}

TensorRef arena(uint64_t offset, DType dtype, std::vector<int64_t> shape) {
  TensorRef r = ref(dtype, std::move(shape));
  r.offset = offset;
  return r;
}

/// A momentum update of weight `param` (n elements) with moment `moment`,
/// its bf16 gradient at arena offset `grad` and the learning rate at arena
/// offset 0, in place.
Instruction update(int64_t n, uint64_t param, uint64_t moment, uint64_t grad,
                   double beta = 0.9) {
  ProgramBuilder p({n});
  int w = p.input(DType::F32, {n});
  int m = p.input(DType::F32, {n});
  int g = p.input(DType::BF16, {n});
  int lr = p.input(DType::F32, {});
  int k = p.add("const", DType::F32, {}, {{"value", beta}});
  int next =
      p.add("add", DType::F32,
            {p.add("mul", DType::F32, {m, k}), p.add("cast", DType::F32, {g})});
  p.yield(next);
  p.yield(p.add("sub", DType::F32, {w, p.add("mul", DType::F32, {next, lr})}));
  Instruction &inst = p.instruction;
  inst.inputs = {weight(param, DType::F32, {n}),
                 weight(moment, DType::F32, {n}), arena(grad, DType::BF16, {n}),
                 arena(0, DType::F32, {})};
  inst.outputs = {weight(moment, DType::F32, {n}),
                  weight(param, DType::F32, {n})};
  return inst;
}

/// out = in * 3 + 0.5 over `rows` x 7 f32, at arena offsets.
Instruction scaleAt(uint64_t in, uint64_t out, int64_t rows = 10) {
  Instruction inst = scaleProgram(rows);
  inst.inputs[0].offset = in;
  inst.outputs[0].offset = out;
  return inst;
}

std::vector<std::vector<std::vector<size_t>>>
groupsOf(const std::vector<ElementwiseBatch> &batches) {
  std::vector<std::vector<std::vector<size_t>>> groups;
  for (const ElementwiseBatch &batch : batches) {
    groups.push_back(batch.groups);
    size_t last = 0;
    for (const std::vector<size_t> &group : batch.groups)
      last = std::max(last, group.back());
    EXPECT_EQ(batch.last, last);
  }
  return groups;
}

using Groups = std::vector<std::vector<std::vector<size_t>>>;

} // namespace

TEST(CUDAElementwiseGroups, UpdatesOfOneProgramShareAGroup) {
  // An optimizer's updates: sizes differ, programs of two kinds (another
  // beta); a program with one update only stays on its own.
  std::vector<Instruction> plan = {
      update(768, 1, 2, 1024),         update(2304 * 768, 3, 4, 4096),
      update(768, 5, 6, 8192, 0.5),    update(3, 7, 8, 12288),
      update(4096, 9, 10, 16384, 0.5), update(1000, 11, 12, 20480, 0.25)};
  EXPECT_EQ(groupsOf(planElementwiseBatches(plan)),
            (Groups{{{0, 1, 3}, {2, 4}}}));
  // The signature does not depend on the size, does on the program.
  EXPECT_EQ(elementwiseGroupSignature(plan[0]),
            elementwiseGroupSignature(plan[1]));
  EXPECT_NE(elementwiseGroupSignature(plan[0]),
            elementwiseGroupSignature(plan[2]));
  // A run's instruction of no group between members launches at once.
  std::vector<Instruction> between = {
      update(8, 1, 2, 1024), update(8, 3, 4, 2048, 0.5), update(8, 5, 6, 3072)};
  std::vector<ElementwiseBatch> batches = planElementwiseBatches(between);
  EXPECT_EQ(groupsOf(batches), (Groups{{{0, 2}}}));
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0].singles, (std::vector<size_t>{1}));
  EXPECT_EQ(planElementwiseBatches(plan)[0].singles, std::vector<size_t>{});
}

TEST(CUDAElementwiseGroups, DependenciesEndARun) {
  std::vector<Instruction> plan = {
      scaleAt(0, 10000), scaleAt(20000, 30000),
      // Reads what instruction 0 writes: a new run.
      scaleAt(10000, 40000), scaleAt(50000, 60000),
      // Writes what instruction 3 reads: a new run.
      scaleAt(70000, 50000),
      // Writes part of what instruction 4 reads (280 bytes from 70000).
      scaleAt(80000, 70200),
      // In place: its own operands may overlap.
      scaleAt(90000, 90000), scaleAt(95000, 95000)};
  EXPECT_EQ(groupsOf(planElementwiseBatches(plan)),
            (Groups{{{0, 1}}, {{2, 3}}, {{5, 6, 7}}}));
  // The same weight written twice: two runs (the second update alone).
  std::vector<Instruction> twice = {
      update(8, 1, 2, 1024), update(8, 3, 4, 2048), update(8, 1, 5, 3072)};
  EXPECT_EQ(groupsOf(planElementwiseBatches(twice)), (Groups{{{0, 1}}}));
}

TEST(CUDAElementwiseGroups, OnlyDenseElementwiseKernelsAreMembers) {
  Instruction softmax;
  softmax.kernel = "softmax";
  Instruction f16 = scaleAt(40000, 41000);
  f16.inputs[0].dtype = DType::F16;
  // A bias row broadcast over rows (strided): not a member.
  ProgramBuilder p({4, 8});
  int x = p.input(DType::F32, {4, 8});
  int bias = p.input(DType::F32, {8});
  p.yield(p.add("add", DType::F32, {x, bias}));
  Instruction strided = p.instruction;
  strided.inputs[0].offset = 50000;
  strided.inputs[1].offset = 51000;
  strided.outputs[0].offset = 52000;
  std::vector<Instruction> plan = {scaleAt(0, 1000),
                                   scaleAt(2000, 3000),
                                   softmax,
                                   scaleAt(4000, 5000),
                                   f16,
                                   scaleAt(6000, 7000),
                                   strided,
                                   scaleAt(8000, 9000),
                                   scaleAt(10000, 11000)};
  EXPECT_EQ(elementwiseGroupSignature(softmax), "");
  EXPECT_EQ(elementwiseGroupSignature(f16), "");
  EXPECT_EQ(elementwiseGroupSignature(strided), "");
  EXPECT_EQ(groupsOf(planElementwiseBatches(plan)),
            (Groups{{{0, 1}}, {{7, 8}}}));
}

TEST(CUDAElementwiseGroups, GroupSourceCompiles) {
  for (int cc : {90, 80}) {
    SCOPED_TRACE("sm_" + std::to_string(cc));
    for (Instruction inst :
         {update(768, 1, 2, 1024), everyOp(DType::F32), everyOp(DType::BF16),
          everyOp(DType::I64), booleanOps()}) {
      // Broadcast rows are not members: every input dense or a scalar.
      for (TensorRef &input : inst.inputs)
        if (input.elements() != 1)
          input.shape = inst.outputs[0].shape;
      ASSERT_NE(elementwiseGroupSignature(inst), "");
      std::string source = elementwiseGroupSource(inst);
      EXPECT_NE(source.find("const LOOM_GRID_CONSTANT LoomGroup group"),
                std::string::npos);
      std::string image;
      Status status = compileElementwise(source, cc, image);
      EXPECT_TRUE(status.isOk()) << status.message() << "\n--- source ---\n"
                                 << source;
    }
  }
  // Six operands and two record words per member, 511 words for records.
  EXPECT_EQ(elementwiseGroupCapacity(update(8, 1, 2, 1024)), 511 / 8);
}
