//===- ElementwiseSource.cpp - CUDA source of elementwise programs --------===//
//
// Generates the CUDA C++ of an `elementwise` instruction (see Elementwise.h).
// Each program op becomes one statement with the CPU kernel's semantics
// (plan-format.md, "elementwise programs"):
//  - integers wrap (arithmetic on the unsigned type), integer x / 0 is 0 and
//    MIN / -1 wraps, integer pow by squaring (negative exponents give 0
//    unless the base is 1 or -1);
//  - float max/min propagate NaN;
//  - casts: float->int truncates and saturates (NaN -> 0), ->i1 tests
//    non-zero, i64->i32 wraps;
//  - f32 transcendental ops use CUDA's accurate functions (expf, erff, ...)
//    where the CPU uses its own vectorized approximations; both are within a
//    few ulp of the exact values. gelu f32 is x * Phi(x) (normcdff), which
//    keeps the negative tail's relative accuracy as the CPU's erfc form
//    does; f64 gelu uses the CPU's formulas as written.
//  - bf16 values compute in f32 and are rounded to bf16 (to nearest even)
//    after each op, so a program's intermediate values are what separate
//    bf16 kernels would store. The conversions are written out here (bit
//    operations), so the source needs no CUDA header at run time.
// The source is compiled with -fmad=false so that a * b + c rounds twice, as
// on the CPU.
//
//===----------------------------------------------------------------------===//

#include "CPU/BFloat16.h"
#include "Elementwise.h"
#include "ElementwiseSpace.h"
#include "loom/Runtime/Kernels.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <sstream>

using namespace loomrt;
using namespace loomrt::cuda;

namespace {

/// Everything the generated source needs besides the program itself.
const char *const kPrelude = R"(typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;

// bf16 <-> f32: the high half of an f32; round to nearest even, NaN kept.
__device__ __forceinline__ float ld_bf16(u16 v) {
  return __uint_as_float(((u32)v) << 16);
}
__device__ __forceinline__ u16 st_bf16(float f) {
  u32 u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return (u16)((u >> 16) | 0x40u);
  return (u16)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
__device__ __forceinline__ float rnd_bf16(float f) { return ld_bf16(st_bf16(f)); }
// f64 -> bf16 rounding once: to f32 toward zero, the lowest bit set when
// anything was dropped (round to odd), then to nearest even.
__device__ __forceinline__ float ew_bf16_of_f64(double v) {
  if (v != v) return rnd_bf16((float)v);
  float f = __double2float_rz(v);
  if ((double)f != v) f = __uint_as_float(__float_as_uint(f) | 1u);
  return rnd_bf16(f);
}

// max/min: a NaN operand wins for floats.
__device__ __forceinline__ float ew_max(float a, float b) { return (a != a || a > b) ? a : b; }
__device__ __forceinline__ float ew_min(float a, float b) { return (a != a || a < b) ? a : b; }
__device__ __forceinline__ double ew_max(double a, double b) { return (a != a || a > b) ? a : b; }
__device__ __forceinline__ double ew_min(double a, double b) { return (a != a || a < b) ? a : b; }
__device__ __forceinline__ int ew_max(int a, int b) { return a > b ? a : b; }
__device__ __forceinline__ int ew_min(int a, int b) { return a < b ? a : b; }
__device__ __forceinline__ i64 ew_max(i64 a, i64 b) { return a > b ? a : b; }
__device__ __forceinline__ i64 ew_min(i64 a, i64 b) { return a < b ? a : b; }
__device__ __forceinline__ u8 ew_max(u8 a, u8 b) { return a > b ? a : b; }
__device__ __forceinline__ u8 ew_min(u8 a, u8 b) { return a < b ? a : b; }

// Wrapping integer arithmetic.
__device__ __forceinline__ int ew_add(int a, int b) { return (int)((u32)a + (u32)b); }
__device__ __forceinline__ int ew_sub(int a, int b) { return (int)((u32)a - (u32)b); }
__device__ __forceinline__ int ew_mul(int a, int b) { return (int)((u32)a * (u32)b); }
__device__ __forceinline__ int ew_neg(int a) { return (int)(0u - (u32)a); }
__device__ __forceinline__ i64 ew_add(i64 a, i64 b) { return (i64)((u64)a + (u64)b); }
__device__ __forceinline__ i64 ew_sub(i64 a, i64 b) { return (i64)((u64)a - (u64)b); }
__device__ __forceinline__ i64 ew_mul(i64 a, i64 b) { return (i64)((u64)a * (u64)b); }
__device__ __forceinline__ i64 ew_neg(i64 a) { return (i64)(0ull - (u64)a); }
__device__ __forceinline__ int ew_abs(int a) { return a < 0 ? ew_neg(a) : a; }
__device__ __forceinline__ i64 ew_abs(i64 a) { return a < 0 ? ew_neg(a) : a; }
__device__ __forceinline__ int ew_div(int a, int b) {
  if (b == 0) return 0;
  if (b == -1) return ew_neg(a);
  return a / b;
}
__device__ __forceinline__ i64 ew_div(i64 a, i64 b) {
  if (b == 0) return 0;
  if (b == -1) return ew_neg(a);
  return a / b;
}
__device__ __forceinline__ int ew_pow(int base, int e) {
  if (e < 0) return base == 1 ? 1 : base == -1 ? ((e & 1) ? -1 : 1) : 0;
  u32 r = 1u, b = (u32)base;
  for (u32 x = (u32)e; x; x >>= 1) {
    if (x & 1u) r *= b;
    b *= b;
  }
  return (int)r;
}
__device__ __forceinline__ i64 ew_pow(i64 base, i64 e) {
  if (e < 0) return base == 1 ? 1 : base == -1 ? ((e & 1) ? -1 : 1) : 0;
  u64 r = 1ull, b = (u64)base;
  for (u64 x = (u64)e; x; x >>= 1) {
    if (x & 1ull) r *= b;
    b *= b;
  }
  return (i64)r;
}

// float -> int: truncate, saturate, NaN -> 0 (compared in double).
__device__ __forceinline__ int ew_to_i32(double x) {
  if (!(x == x)) return 0;
  if (x <= -2147483648.0) return (int)0x80000000u;
  if (x >= 2147483647.0) return 2147483647;
  return (int)x;
}
__device__ __forceinline__ i64 ew_to_i64(double x) {
  if (!(x == x)) return 0;
  if (x <= -9223372036854775808.0) return (i64)0x8000000000000000ull;
  if (x >= 9223372036854775807.0) return (i64)0x7fffffffffffffffull;
  return (i64)x;
}

// gelu: f32 as x * Phi(x), 0 where Phi underflows (as the CPU's erfc form);
// f64 exactly as the CPU writes it.
__device__ __forceinline__ float ew_gelu(float x) {
  float p = normcdff(x);
  return p == 0.0f ? 0.0f : x * p;
}
__device__ __forceinline__ double ew_gelu(double x) {
  return 0.5 * x * (1.0 + erf(x * 0.70710678118654752440));
}
// tanh approximation: f32 as x * sigmoid(2u) (no cancellation for x < 0).
__device__ __forceinline__ float ew_gelu_tanh(float x) {
  float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
  float d = 1.0f + expf(-2.0f * u);
  return isinf(d) ? 0.0f : x / d;
}
__device__ __forceinline__ double ew_gelu_tanh(double x) {
  const double k = 0.7978845608028654;
  return 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)));
}

struct __align__(16) V4_f32 { float x[4]; };
struct __align__(16) V4_f64 { double x[4]; };
struct __align__(8) V4_bf16 { u16 x[4]; };
struct __align__(4) V4_i1 { u8 x[4]; };
struct __align__(16) V4_i32 { int x[4]; };
struct __align__(16) V4_i64 { i64 x[4]; };
)";

/// How a value of a dtype is stored in memory and held in registers.
struct TypeInfo {
  const char *storage; // element type in memory
  const char *compute; // register type
  const char *vector;  // V4_* of the vector kernel
};

TypeInfo typeInfo(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return {"float", "float", "V4_f32"};
  case DType::F64:
    return {"double", "double", "V4_f64"};
  case DType::BF16:
    return {"u16", "float", "V4_bf16"};
  case DType::I1:
    return {"u8", "u8", "V4_i1"};
  case DType::I32:
    return {"int", "int", "V4_i32"};
  case DType::I64:
    return {"i64", "i64", "V4_i64"};
  case DType::F16:
    break;
  }
  return {"void", "void", "void"}; // rejected before generation
}

bool isFloat(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F64 || dtype == DType::BF16;
}

std::string value(int number) { return "v" + std::to_string(number); }

/// A loaded element `expr` of `dtype` in its compute type.
std::string load(const std::string &expr, DType dtype) {
  return dtype == DType::BF16 ? "ld_bf16(" + expr + ")" : expr;
}

/// A compute-type value `expr` of `dtype` as stored.
std::string store(const std::string &expr, DType dtype) {
  return dtype == DType::BF16 ? "st_bf16(" + expr + ")" : expr;
}

/// An exact f32 literal (its bits).
std::string floatLiteral(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  char text[64];
  std::snprintf(text, sizeof(text), "__uint_as_float(0x%08" PRIx32 "u)", u);
  return text;
}

/// A `const` op's value in `dtype`, converted by the CPU's rules.
std::string constLiteral(double x, DType dtype) {
  char text[96];
  switch (dtype) {
  case DType::F32:
    return floatLiteral(float(x));
  case DType::BF16:
    // Rounded once from the double, as the CPU kernel does.
    return floatLiteral(cpu::widenBF16(cpu::roundToBF16(x)));
  case DType::F64: {
    uint64_t u;
    std::memcpy(&u, &x, 8);
    std::snprintf(text, sizeof(text),
                  "__longlong_as_double(0x%016" PRIx64 "ll)", u);
    return text;
  }
  case DType::I1:
    return x != 0 ? "(u8)1" : "(u8)0";
  case DType::I32: {
    int32_t v = x != x               ? 0
                : x <= -2147483648.0 ? std::numeric_limits<int32_t>::min()
                : x >= 2147483647.0  ? std::numeric_limits<int32_t>::max()
                                     : int32_t(x);
    std::snprintf(text, sizeof(text), "(int)0x%08" PRIx32 "u", uint32_t(v));
    return text;
  }
  case DType::I64: {
    const double lo = -9223372036854775808.0, hi = 9223372036854775807.0;
    int64_t v = x != x    ? 0
                : x <= lo ? std::numeric_limits<int64_t>::min()
                : x >= hi ? std::numeric_limits<int64_t>::max()
                          : int64_t(x);
    std::snprintf(text, sizeof(text), "(i64)0x%016" PRIx64 "ull", uint64_t(v));
    return text;
  }
  case DType::F16:
    break;
  }
  return "0";
}

/// `x` (compute type of `from`) converted to `to` by the plan's cast rules.
std::string castExpr(const std::string &x, DType from, DType to) {
  if (from == to)
    return x;
  if (to == DType::I1)
    return "(u8)(" + x + " != 0)";
  switch (to) {
  case DType::F32:
    return "(float)" + x;
  case DType::F64:
    return "(double)" + x;
  case DType::BF16:
    // From f64 and the integers, rounded once (as the CPU): f64 -> f32 -> bf16
    // could round a tie the wrong way.
    return from == DType::F32 || from == DType::BF16
               ? "rnd_bf16((float)" + x + ")"
               : "ew_bf16_of_f64((double)" + x + ")";
  case DType::I32:
    if (isFloat(from))
      return "ew_to_i32((double)" + x + ")";
    return from == DType::I64 ? "(int)(u32)(u64)" + x : "(int)" + x;
  case DType::I64:
    if (isFloat(from))
      return "ew_to_i64((double)" + x + ")";
    return "(i64)" + x;
  default:
    return x;
  }
}

/// The f32 or f64 spelling of a math function.
std::string fn(const char *name, DType dtype) {
  return dtype == DType::F64 ? std::string(name) : std::string(name) + "f";
}

std::string wordOf(const Attributes &attrs, const char *name,
                   const char *fallback) {
  auto it = attrs.find(name);
  if (it != attrs.end())
    if (const std::string *word = std::get_if<std::string>(&it->second))
      return *word;
  return fallback;
}

double numberOf(const Attributes &attrs, const char *name) {
  auto it = attrs.find(name);
  if (it == attrs.end())
    return 0;
  if (const double *d = std::get_if<double>(&it->second))
    return *d;
  if (const int64_t *i = std::get_if<int64_t>(&it->second))
    return double(*i);
  return 0;
}

/// The right-hand side of one program op; `a`, `b`, `c` are its operands
/// and `operandType` the first operand's dtype.
std::string opExpr(const ProgramOp &op, const std::string &a,
                   const std::string &b, const std::string &c,
                   DType operandType) {
  const DType t = op.dtype;
  const bool flt = isFloat(t);
  const std::string one = t == DType::F64 ? "1.0" : "1.0f";
  const std::string zero = t == DType::F64 ? "0.0" : "0.0f";
  const std::string &name = op.op;
  std::string expr;
  if (name == "add")
    expr = flt ? a + " + " + b : "ew_add(" + a + ", " + b + ")";
  else if (name == "sub")
    expr = flt ? a + " - " + b : "ew_sub(" + a + ", " + b + ")";
  else if (name == "mul")
    expr = flt ? a + " * " + b : "ew_mul(" + a + ", " + b + ")";
  else if (name == "div")
    expr = flt ? a + " / " + b : "ew_div(" + a + ", " + b + ")";
  else if (name == "pow")
    expr = flt ? fn("pow", t) + "(" + a + ", " + b + ")"
               : "ew_pow(" + a + ", " + b + ")";
  else if (name == "fmod")
    expr = fn("fmod", t) + "(" + a + ", " + b + ")";
  else if (name == "max")
    expr = "ew_max(" + a + ", " + b + ")";
  else if (name == "min")
    expr = "ew_min(" + a + ", " + b + ")";
  else if (name == "neg")
    expr = flt ? "-" + a : "ew_neg(" + a + ")";
  else if (name == "sqrt")
    expr = fn("sqrt", t) + "(" + a + ")";
  else if (name == "rsqrt")
    expr = one + " / " + fn("sqrt", t) + "(" + a + ")";
  else if (name == "exp")
    expr = fn("exp", t) + "(" + a + ")";
  else if (name == "log")
    expr = fn("log", t) + "(" + a + ")";
  else if (name == "erf")
    expr = fn("erf", t) + "(" + a + ")";
  else if (name == "tanh")
    expr = fn("tanh", t) + "(" + a + ")";
  else if (name == "sigmoid")
    expr = one + " / (" + one + " + " + fn("exp", t) + "(-" + a + "))";
  else if (name == "relu")
    expr = flt ? "(" + a + " < " + zero + " ? " + zero + " : " + a + ")"
               : "(" + a + " < 0 ? 0 : " + a + ")";
  else if (name == "reciprocal")
    expr = one + " / " + a;
  else if (name == "abs")
    expr = flt ? fn("fabs", t) + "(" + a + ")" : "ew_abs(" + a + ")";
  else if (name == "sin")
    expr = fn("sin", t) + "(" + a + ")";
  else if (name == "cos")
    expr = fn("cos", t) + "(" + a + ")";
  else if (name == "gelu")
    expr = (wordOf(op.attrs, "approximate", "none") == "tanh" ? "ew_gelu_tanh("
                                                              : "ew_gelu(") +
           a + ")";
  else if (name == "cast")
    return castExpr(a, operandType, t); // already in t's precision
  else if (name == "compare") {
    std::string direction = wordOf(op.attrs, "direction", "eq");
    const char *symbol = direction == "ne"   ? "!="
                         : direction == "lt" ? "<"
                         : direction == "le" ? "<="
                         : direction == "gt" ? ">"
                         : direction == "ge" ? ">="
                                             : "==";
    return "(u8)(" + a + " " + symbol + " " + b + ")";
  } else if (name == "select")
    return "(" + a + " ? " + b + " : " + c + ")";
  else if (name == "const")
    return constLiteral(numberOf(op.attrs, "value"), t);
  // A bf16 result is rounded after each op (f32 in registers).
  return t == DType::BF16 ? "rnd_bf16(" + expr + ")" : expr;
}

using Space = ElementwiseSpace;

/// The kernel parameter list: inputs, then outputs.
std::string parameters(const Instruction &instruction) {
  std::string params;
  for (size_t i = 0; i < instruction.inputs.size(); ++i)
    params += std::string(params.empty() ? "" : ", ") + "const " +
              typeInfo(instruction.inputs[i].dtype).storage + " *in" +
              std::to_string(i);
  for (size_t o = 0; o < instruction.outputs.size(); ++o)
    params += std::string(params.empty() ? "" : ", ") +
              typeInfo(instruction.outputs[o].dtype).storage + " *out" +
              std::to_string(o);
  return params;
}

/// loom_program(inputs..., &outputs...).
void emitProgram(const Instruction &instruction, std::ostringstream &os) {
  std::vector<DType> types;
  os << "__device__ __forceinline__ void loom_program(";
  bool first = true;
  for (size_t i = 0; i < instruction.inputs.size(); ++i) {
    types.push_back(instruction.inputs[i].dtype);
    os << (first ? "" : ", ") << typeInfo(types.back()).compute << " "
       << value(int(i));
    first = false;
  }
  for (size_t o = 0; o < instruction.outputs.size(); ++o) {
    os << (first ? "" : ", ") << typeInfo(instruction.outputs[o].dtype).compute
       << " &y" << o;
    first = false;
  }
  os << ") {\n";
  for (const ProgramOp &op : instruction.program) {
    const int result = int(types.size());
    auto operand = [&](size_t k) {
      return k < op.operands.size() ? value(op.operands[k]) : std::string();
    };
    DType operandType =
        op.operands.empty() ? op.dtype : types[size_t(op.operands[0])];
    os << "  const " << typeInfo(op.dtype).compute << " " << value(result)
       << " = " << opExpr(op, operand(0), operand(1), operand(2), operandType)
       << ";\n";
    types.push_back(op.dtype);
  }
  for (size_t o = 0; o < instruction.yields.size(); ++o)
    os << "  y" << o << " = " << value(instruction.yields[o]) << ";\n";
  os << "}\n\n";
}

/// Scalar inputs, loaded once per thread as s<i>.
void emitScalarLoads(const Instruction &instruction,
                     const std::vector<Space::InputKind> &kinds,
                     std::ostringstream &os) {
  for (size_t i = 0; i < instruction.inputs.size(); ++i)
    if (kinds[i] == Space::InputKind::Scalar)
      os << "  const " << typeInfo(instruction.inputs[i].dtype).compute << " s"
         << i << " = "
         << load("in" + std::to_string(i) + "[0]", instruction.inputs[i].dtype)
         << ";\n";
}

/// y<o> = loom_program(args...).
void emitCall(const Instruction &instruction,
              const std::vector<std::string> &args, std::ostringstream &os) {
  for (size_t o = 0; o < instruction.outputs.size(); ++o)
    os << "    " << typeInfo(instruction.outputs[o].dtype).compute << " y" << o
       << ";\n";
  os << "    loom_program(";
  for (size_t k = 0; k < args.size(); ++k)
    os << (k ? ", " : "") << args[k];
  for (size_t o = 0; o < instruction.outputs.size(); ++o)
    os << (o || !args.empty() ? ", " : "") << "y" << o;
  os << ");\n";
}

/// loom_program on `args`, then out<o>[index] = y<o>.
void emitCallAndStores(const Instruction &instruction,
                       const std::vector<std::string> &args,
                       const std::string &index, std::ostringstream &os) {
  emitCall(instruction, args, os);
  for (size_t o = 0; o < instruction.outputs.size(); ++o)
    os << "    out" << o << "[" << index
       << "] = " << store("y" + std::to_string(o), instruction.outputs[o].dtype)
       << ";\n";
}

/// The body of a loop over vectors `i`: kElementwiseVector consecutive
/// elements of each dense input loaded as one aligned vector, the program
/// run on each, the results stored as vectors (inputs dense or scalar).
void emitVectorStep(const Instruction &instruction,
                    const std::vector<Space::InputKind> &kinds,
                    std::ostringstream &os) {
  const int vector = kElementwiseVector;
  const size_t inputs = instruction.inputs.size();
  const size_t outputs = instruction.outputs.size();
  for (size_t i = 0; i < inputs; ++i)
    if (kinds[i] == Space::InputKind::Dense) {
      const char *vectorType = typeInfo(instruction.inputs[i].dtype).vector;
      os << "    const " << vectorType << " l" << i << " = *(const "
         << vectorType << " *)(in" << i << " + i * " << vector << ");\n";
    }
  for (size_t o = 0; o < outputs; ++o)
    os << "    " << typeInfo(instruction.outputs[o].dtype).vector << " r" << o
       << ";\n";
  os << "#pragma unroll\n    for (int e = 0; e < " << vector << "; ++e) {\n";
  std::vector<std::string> args;
  for (size_t i = 0; i < inputs; ++i)
    args.push_back(kinds[i] == Space::InputKind::Dense
                       ? load("l" + std::to_string(i) + ".x[e]",
                              instruction.inputs[i].dtype)
                       : "s" + std::to_string(i));
  emitCall(instruction, args, os);
  for (size_t o = 0; o < outputs; ++o)
    os << "    r" << o << ".x[e] = "
       << store("y" + std::to_string(o), instruction.outputs[o].dtype) << ";\n";
  os << "    }\n";
  for (size_t o = 0; o < outputs; ++o)
    os << "    *(" << typeInfo(instruction.outputs[o].dtype).vector << " *)(out"
       << o << " + i * " << vector << ") = r" << o << ";\n";
}

} // namespace

bool cuda::elementwiseVectorizable(const Instruction &instruction) {
  const int64_t total = instruction.outputs[0].elements();
  for (const TensorRef &input : instruction.inputs)
    if (input.elements() != total && input.elements() != 1)
      return false;
  return true;
}

std::string cuda::elementwiseSource(const Instruction &instruction) {
  const Space space = elementwiseSpace(instruction);
  const size_t inputs = instruction.inputs.size();
  const size_t outputs = instruction.outputs.size();
  // 32-bit indices when every index (and input offset, which is smaller)
  // fits with room for the grid stride; see Device.cuh's gridFor.
  const bool wide = space.total >= (int64_t(1) << 31) - (int64_t(1) << 25);
  const std::string index = wide ? "u64" : "u32";
  std::ostringstream os;
  os << "// loom elementwise: " << space.total << " elements, shape "
     << shapeString(space.shape) << "\n";
  os << kPrelude << "\n";
  emitProgram(instruction, os);

  const std::string params = parameters(instruction);
  const std::string total = std::to_string(space.total) + (wide ? "ull" : "u");
  auto loopHead = [&](const std::string &count) {
    os << "  for (" << index << " i = (" << index
       << ")blockIdx.x * blockDim.x + threadIdx.x; i < " << count << "; i += ("
       << index << ")gridDim.x * blockDim.x) {\n";
  };
  auto scalarLoads = [&]() { emitScalarLoads(instruction, space.kinds, os); };

  // The general kernel.
  os << "extern \"C\" __global__ void __launch_bounds__(256) "
     << kElementwiseKernel << "(" << params << ") {\n";
  scalarLoads();
  loopHead(total);
  bool anyStrided = false;
  for (Space::InputKind kind : space.kinds)
    anyStrided = anyStrided || kind == Space::InputKind::Strided;
  if (anyStrided) {
    // The multi-index over the merged space, innermost dim first (only the
    // coordinates some strided input moves along).
    const size_t rank = space.shape.size();
    std::vector<bool> used(rank, false);
    for (size_t i = 0; i < inputs; ++i)
      if (space.kinds[i] == Space::InputKind::Strided)
        for (size_t d = 0; d < rank; ++d)
          used[d] = used[d] || space.strides[i][d] != 0;
    size_t outermost = 0;
    while (!used[outermost])
      ++outermost;
    os << "    " << index << " rest = i;\n";
    for (size_t d = rank; d-- > outermost;) {
      const std::string size = std::to_string(space.shape[d]) + "u";
      os << "    ";
      if (d == 0)
        os << "const " << index << " c0 = rest;";
      else if (used[d])
        os << "const " << index << " c" << d << " = rest % " << size << ";";
      if (d > outermost)
        os << (used[d] ? " " : "") << "rest /= " << size << ";";
      os << "\n";
    }
  }
  std::vector<std::string> args;
  for (size_t i = 0; i < inputs; ++i) {
    const DType dtype = instruction.inputs[i].dtype;
    const std::string in = "in" + std::to_string(i);
    switch (space.kinds[i]) {
    case Space::InputKind::Dense:
      args.push_back(load(in + "[i]", dtype));
      break;
    case Space::InputKind::Scalar:
      args.push_back("s" + std::to_string(i));
      break;
    case Space::InputKind::Strided: {
      std::string offset;
      for (size_t d = 0; d < space.shape.size(); ++d) {
        int64_t stride = space.strides[i][d];
        if (stride == 0)
          continue;
        offset += (offset.empty() ? "" : " + ") + std::string("c") +
                  std::to_string(d) +
                  (stride == 1 ? "" : " * " + std::to_string(stride) + "u");
      }
      if (offset.empty())
        offset = "0";
      args.push_back(load(in + "[" + offset + "]", dtype));
      break;
    }
    }
  }
  emitCallAndStores(instruction, args, "i", os);
  os << "  }\n}\n";

  if (!elementwiseVectorizable(instruction))
    return os.str();

  // The vector kernel: kElementwiseVector consecutive elements per thread
  // (launched only when the element count is a multiple of it and every
  // dense pointer is aligned to the vector).
  os << "\nextern \"C\" __global__ void __launch_bounds__(256) "
     << kElementwiseVectorKernel << "(" << params << ") {\n";
  scalarLoads();
  loopHead(std::to_string(space.total / kElementwiseVector) +
           (wide ? "ull" : "u"));
  emitVectorStep(instruction, space.kinds, os);
  os << "  }\n}\n";
  return os.str();
}

//===----------------------------------------------------------------------===//
// Groups
//===----------------------------------------------------------------------===//

int cuda::elementwiseGroupRecordWords(const Instruction &instruction) {
  return int(instruction.inputs.size() + instruction.outputs.size()) + 2;
}

int cuda::elementwiseGroupCapacity(const Instruction &instruction) {
  return (kElementwiseGroupWords - 1) /
         elementwiseGroupRecordWords(instruction);
}

std::string cuda::elementwiseGroupSignature(const Instruction &instruction) {
  if (instruction.kind != Instruction::Kind::Kernel ||
      instruction.kernel != "elementwise" || instruction.outputs.empty())
    return "";
  const int64_t total = instruction.outputs[0].elements();
  if (total <= 0 || total > kElementwiseGroupMaxElements)
    return "";
  for (const std::vector<TensorRef> *refs :
       {&instruction.inputs, &instruction.outputs})
    for (const TensorRef &ref : *refs)
      if (ref.dtype == DType::F16)
        return "";
  for (const ProgramOp &op : instruction.program)
    if (op.dtype == DType::F16)
      return "";
  if (!checkKernel(instruction) || !elementwiseVectorizable(instruction) ||
      elementwiseGroupCapacity(instruction) < 2)
    return "";
  // The operands' storage types, which inputs are scalars, and the program:
  // what the group's source is made of.
  const Space space = elementwiseSpace(instruction);
  std::ostringstream os;
  os << parameters(instruction) << "\n";
  for (Space::InputKind kind : space.kinds)
    os << (kind == Space::InputKind::Scalar ? 's' : 'd');
  os << "\n";
  emitProgram(instruction, os);
  return os.str();
}

std::string cuda::elementwiseGroupSource(const Instruction &instruction) {
  const Space space = elementwiseSpace(instruction);
  const size_t inputs = instruction.inputs.size();
  const size_t outputs = instruction.outputs.size();
  const int record = elementwiseGroupRecordWords(instruction);
  const size_t count = inputs + outputs; // the record's size word
  std::ostringstream os;
  os << "// loom elementwise group: up to "
     << elementwiseGroupCapacity(instruction) << " members\n";
  os << kPrelude << "\n";
  emitProgram(instruction, os);
  // The launch's members, passed by value: word 0 is their count, then one
  // record each: the operands' addresses, the element count (low half) and
  // whether the member takes the vector path (high half), and its first
  // block. __grid_constant__: indexed in place, never copied per thread.
  // (__grid_constant__ needs compute capability 7.0; older devices copy.)
  os << "struct LoomGroup { u64 w[" << kElementwiseGroupWords << "]; };\n";
  os << "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 700\n"
        "#define LOOM_GRID_CONSTANT\n#else\n"
        "#define LOOM_GRID_CONSTANT __grid_constant__\n#endif\n\n";
  os << "extern \"C\" __global__ void __launch_bounds__(256) "
     << kElementwiseGroupKernel
     << "(const LOOM_GRID_CONSTANT LoomGroup group) {\n";
  os << "  const u32 block = blockIdx.x;\n";
  os << "  u32 lo = 0, hi = (u32)group.w[0] - 1;\n";
  os << "  while (lo < hi) {\n";
  os << "    const u32 mid = (lo + hi + 1) / 2;\n";
  os << "    if ((u32)group.w[1 + mid * " << record << " + " << count + 1
     << "] <= block)\n";
  os << "      lo = mid;\n    else\n      hi = mid - 1;\n  }\n";
  os << "  const u32 base = 1 + lo * " << record << ";\n";
  for (size_t i = 0; i < inputs; ++i)
    os << "  const " << typeInfo(instruction.inputs[i].dtype).storage
       << " *const in" << i << " = (const "
       << typeInfo(instruction.inputs[i].dtype).storage << " *)group.w[base + "
       << i << "];\n";
  for (size_t o = 0; o < outputs; ++o)
    os << "  " << typeInfo(instruction.outputs[o].dtype).storage
       << " *const out" << o << " = ("
       << typeInfo(instruction.outputs[o].dtype).storage << " *)group.w[base + "
       << inputs + o << "];\n";
  os << "  const u64 sizeAndPath = group.w[base + " << count << "];\n";
  os << "  const u32 n = (u32)sizeAndPath;\n";
  os << "  const u32 begin = (block - (u32)group.w[base + " << count
     << " + 1]) * " << kElementwiseGroupChunk << "u;\n";
  os << "  const u32 end = n - begin < " << kElementwiseGroupChunk
     << "u ? n : begin + " << kElementwiseGroupChunk << "u;\n";
  emitScalarLoads(instruction, space.kinds, os);
  // The vector path: begin and end are multiples of the vector there.
  os << "  if (sizeAndPath >> 32) {\n";
  os << "  for (u32 i = begin / " << kElementwiseVector
     << " + threadIdx.x; i < end / " << kElementwiseVector
     << "; i += blockDim.x) {\n";
  emitVectorStep(instruction, space.kinds, os);
  os << "  }\n  return;\n  }\n";
  os << "  for (u32 i = begin + threadIdx.x; i < end; i += blockDim.x) {\n";
  std::vector<std::string> args;
  for (size_t i = 0; i < inputs; ++i)
    args.push_back(space.kinds[i] == Space::InputKind::Dense
                       ? load("in" + std::to_string(i) + "[i]",
                              instruction.inputs[i].dtype)
                       : "s" + std::to_string(i));
  emitCallAndStores(instruction, args, "i", os);
  os << "  }\n}\n";
  return os.str();
}
