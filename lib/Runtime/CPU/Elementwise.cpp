//===- Elementwise.cpp - The CPU elementwise-program kernel ---------------===//
//
// `elementwise` runs a small program (plan-format.md, "elementwise programs")
// over the outputs' shape, every input broadcast numpy-style to it.
//
// The program is interpreted blockwise, not per element: the flattened output
// is cut into blocks of at most kBlock elements (a block never crosses an
// innermost row when rows are long, so row-aligned inputs can be read in
// place), blocks are spread over OpenMP threads, and each program op runs a
// tight, vectorizable loop over a whole block of "registers" (one typed
// buffer per program value, per thread). Per block, an input is
//  - read in place when it has the output's shape, or when the block lies in
//    one contiguous row of it (a bias [N] into [M,N] with large N);
//  - splatted once per thread when it is a scalar, as are constants;
//  - otherwise gathered into its register with strides that are 0 along
//    broadcast dims, one contiguous (or splatted) run at a time.
// Yielded values are copied to the outputs after the whole block is computed,
// so an output may share memory with an input of the same shape.
//
// bf16 values live in f32 registers: inputs are widened when loaded, every
// op with a bf16 result computes in f32 and rounds its result to bf16 (so a
// fused chain gives what its ops give one kernel each), and outputs are
// narrowed (exactly, the values being bf16 already) when stored.
//
//===----------------------------------------------------------------------===//

#include "../ElementwiseSpace.h"
#include "BFloat16.h"
#include "CPUKernels.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

using namespace loomrt;
using namespace loomrt::cpu;

namespace {

enum class Code : uint8_t {
  Add,
  Sub,
  Mul,
  Div,
  Pow,
  Fmod,
  Max,
  Min,
  Neg,
  Sqrt,
  Rsqrt,
  Exp,
  Log,
  Erf,
  Tanh,
  Sigmoid,
  Relu,
  Reciprocal,
  Abs,
  Sin,
  Cos,
  Gelu,
  GeluTanh,
  Cast,
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,
  Select,
  Const,
};

/// Which dtypes an op accepts: Numeric = bf16 f32 f64 i32 i64, Float = bf16
/// f32 f64, Any = every supported dtype including i1.
enum class Types : uint8_t { Numeric, Float, Any };

struct OpInfo {
  const char *name;
  Code code;
  int operands;
  Types types;
};

constexpr OpInfo kOps[] = {
    {"add", Code::Add, 2, Types::Numeric},
    {"sub", Code::Sub, 2, Types::Numeric},
    {"mul", Code::Mul, 2, Types::Numeric},
    {"div", Code::Div, 2, Types::Numeric},
    {"pow", Code::Pow, 2, Types::Numeric},
    {"fmod", Code::Fmod, 2, Types::Float},
    {"max", Code::Max, 2, Types::Any},
    {"min", Code::Min, 2, Types::Any},
    {"neg", Code::Neg, 1, Types::Numeric},
    {"sqrt", Code::Sqrt, 1, Types::Float},
    {"rsqrt", Code::Rsqrt, 1, Types::Float},
    {"exp", Code::Exp, 1, Types::Float},
    {"log", Code::Log, 1, Types::Float},
    {"erf", Code::Erf, 1, Types::Float},
    {"tanh", Code::Tanh, 1, Types::Float},
    {"sigmoid", Code::Sigmoid, 1, Types::Float},
    {"relu", Code::Relu, 1, Types::Numeric},
    {"reciprocal", Code::Reciprocal, 1, Types::Float},
    {"abs", Code::Abs, 1, Types::Numeric},
    {"sin", Code::Sin, 1, Types::Float},
    {"cos", Code::Cos, 1, Types::Float},
    {"gelu", Code::Gelu, 1, Types::Float},
    {"cast", Code::Cast, 1, Types::Any},
    {"compare", Code::Eq, 2, Types::Any},
    {"select", Code::Select, 3, Types::Any},
    {"const", Code::Const, 0, Types::Any},
};

/// One decoded program op; operand and result are value numbers.
struct Step {
  Code code;
  DType dtype;
  int result;
  int a = -1, b = -1, c = -1;
  /// const: the splatted value.
  double value = 0;
};

struct Program {
  std::vector<DType> valueTypes;
  std::vector<Step> steps;
};

std::string opLabel(size_t index, int result, const std::string &op) {
  return "program line " + std::to_string(index + 1) + " (%" +
         std::to_string(result) + " = " + op + ")";
}

bool acceptsType(Types types, DType dtype) {
  switch (types) {
  case Types::Float:
    return dtype == DType::BF16 || dtype == DType::F32 || dtype == DType::F64;
  case Types::Numeric:
    return dtype != DType::I1;
  case Types::Any:
    return true;
  }
  return false;
}

const char *typesName(Types types) {
  switch (types) {
  case Types::Float:
    return "bf16, f32 or f64";
  case Types::Numeric:
    return "bf16, f32, f64, i32 or i64";
  case Types::Any:
    return "any dtype";
  }
  return "";
}

/// Decodes and validates one program op, appending it to `program`.
Status decodeOp(const ProgramOp &op, size_t index, Program &program) {
  int result = int(program.valueTypes.size());
  std::string label = opLabel(index, result, op.op);
  const OpInfo *info = nullptr;
  for (const OpInfo &candidate : kOps)
    if (op.op == candidate.name)
      info = &candidate;
  if (!info)
    return Status::error(label + ": unknown op '" + op.op + "'");
  if (Status s = expectComputable(op.dtype, label); !s)
    return s;
  if (int(op.operands.size()) != info->operands)
    return Status::error(label + ": expected " +
                         std::to_string(info->operands) + " operand(s), got " +
                         std::to_string(op.operands.size()));
  for (int operand : op.operands)
    if (operand < 0 || operand >= result)
      return Status::error(label + ": operand %" + std::to_string(operand) +
                           " is not defined before it");

  Step step{info->code, op.dtype, result};
  const std::vector<int> &ops = op.operands;
  if (!ops.empty())
    step.a = ops[0];
  if (ops.size() > 1)
    step.b = ops[1];
  if (ops.size() > 2)
    step.c = ops[2];
  auto typeOf = [&](int value) { return program.valueTypes[value]; };
  auto typeError = [&](const std::string &what, DType got,
                       const std::string &want) {
    return Status::error(label + ": " + what + " has dtype " + dtypeName(got) +
                         ", expected " + want);
  };

  // Attributes.
  Status attrs = Status::ok();
  switch (info->code) {
  case Code::Gelu: {
    attrs = expectKnownAttrs(op.attrs, {"approximate"});
    std::string approximate;
    if (attrs)
      attrs = getWordAttr(op.attrs, "approximate", approximate, false, "none");
    if (attrs && approximate == "tanh")
      step.code = Code::GeluTanh;
    else if (attrs && approximate != "none")
      attrs = Status::error("approximate must be none or tanh, not '" +
                            approximate + "'");
    break;
  }
  case Code::Eq: {
    attrs = expectKnownAttrs(op.attrs, {"direction"});
    std::string direction;
    if (attrs)
      attrs = getWordAttr(op.attrs, "direction", direction, true);
    static const std::pair<const char *, Code> kDirections[] = {
        {"eq", Code::Eq}, {"ne", Code::Ne}, {"lt", Code::Lt},
        {"le", Code::Le}, {"gt", Code::Gt}, {"ge", Code::Ge}};
    bool found = false;
    for (const auto &[name, code] : kDirections)
      if (direction == name) {
        step.code = code;
        found = true;
      }
    if (attrs && !found)
      attrs =
          Status::error("direction must be eq, ne, lt, le, gt or ge, not '" +
                        direction + "'");
    break;
  }
  case Code::Const:
    attrs = expectKnownAttrs(op.attrs, {"value"});
    if (attrs)
      attrs = getDoubleAttr(op.attrs, "value", step.value, true);
    break;
  default:
    attrs = expectKnownAttrs(op.attrs, {});
    break;
  }
  if (!attrs)
    return Status::error(label + ": " + attrs.message());

  // Dtypes.
  switch (info->code) {
  case Code::Cast:
  case Code::Const:
    break;
  case Code::Eq:
    if (op.dtype != DType::I1)
      return typeError("the result", op.dtype, "i1");
    if (typeOf(step.a) != typeOf(step.b))
      return Status::error(label + ": operands have different dtypes (" +
                           dtypeName(typeOf(step.a)) + " and " +
                           dtypeName(typeOf(step.b)) + ")");
    break;
  case Code::Select:
    if (typeOf(step.a) != DType::I1)
      return typeError("the condition", typeOf(step.a), "i1");
    for (int value : {step.b, step.c})
      if (typeOf(value) != op.dtype)
        return typeError("operand %" + std::to_string(value), typeOf(value),
                         dtypeName(op.dtype));
    break;
  default:
    if (!acceptsType(info->types, op.dtype))
      return typeError("the result", op.dtype, typesName(info->types));
    for (int value : op.operands)
      if (typeOf(value) != op.dtype)
        return typeError("operand %" + std::to_string(value), typeOf(value),
                         dtypeName(op.dtype));
    break;
  }
  program.valueTypes.push_back(op.dtype);
  program.steps.push_back(step);
  return Status::ok();
}

Status decodeProgram(const Instruction &instruction, Program &program) {
  for (size_t i = 0; i < instruction.inputs.size(); ++i)
    program.valueTypes.push_back(instruction.inputs[i].dtype);
  for (size_t i = 0; i < instruction.program.size(); ++i)
    if (Status s = decodeOp(instruction.program[i], i, program); !s)
      return s;
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Op loops
//===----------------------------------------------------------------------===//

/// i1 values are stored as one byte.
using Bool = uint8_t;

template <typename T> struct IsFloat : std::is_floating_point<T> {};

/// Wrapping integer arithmetic (signed overflow would be undefined).
template <typename T, typename F> inline T wrapping(T a, T b, F f) {
  using U = std::make_unsigned_t<T>;
  return T(f(U(a), U(b)));
}

template <typename T> inline T intDiv(T a, T b) {
  if (b == 0)
    return 0; // defined as 0 rather than a crash
  if (b == T(-1))
    return wrapping(T(0), a, [](auto x, auto y) { return x - y; });
  return a / b; // C++ truncates toward zero
}

template <typename T> inline T intPow(T base, T exponent) {
  if (exponent < 0) {
    if (base == 1)
      return 1;
    if (base == T(-1))
      return (exponent & 1) ? T(-1) : T(1);
    return 0;
  }
  using U = std::make_unsigned_t<T>;
  U result = 1, b = U(base);
  for (auto e = std::make_unsigned_t<T>(exponent); e; e >>= 1) {
    if (e & 1)
      result *= b;
    b *= b;
  }
  return T(result);
}

template <typename T> inline T maxOf(T a, T b) {
  if constexpr (IsFloat<T>::value)
    return (a != a || a > b) ? a : b; // NaN propagates, as in PyTorch
  else
    return a > b ? a : b;
}
template <typename T> inline T minOf(T a, T b) {
  if constexpr (IsFloat<T>::value)
    return (a != a || a < b) ? a : b;
  else
    return a < b ? a : b;
}

/// Converts with the plan's cast rules: float->int truncates (NaN gives 0,
/// out-of-range values saturate), anything->i1 tests non-zero.
template <typename To, typename From> inline To convert(From x) {
  if constexpr (std::is_same_v<To, Bool>) {
    return x != From(0);
  } else if constexpr (IsFloat<From>::value && !IsFloat<To>::value) {
    constexpr double lo = double(std::numeric_limits<To>::min());
    constexpr double hi = double(std::numeric_limits<To>::max());
    if (!(x == x))
      return 0;
    if (double(x) <= lo)
      return std::numeric_limits<To>::min();
    if (double(x) >= hi)
      return std::numeric_limits<To>::max();
    return To(x);
  } else {
    return To(x);
  }
}

template <typename T, typename F>
inline void unary(const void *x, void *r, int64_t n, F f) {
  const T *in = static_cast<const T *>(x);
  T *out = static_cast<T *>(r);
  for (int64_t i = 0; i < n; ++i)
    out[i] = f(in[i]);
}

template <typename T, typename R = T, typename F>
inline void binary(const void *x, const void *y, void *r, int64_t n, F f) {
  const T *a = static_cast<const T *>(x);
  const T *b = static_cast<const T *>(y);
  R *out = static_cast<R *>(r);
  for (int64_t i = 0; i < n; ++i)
    out[i] = f(a[i], b[i]);
}

/// f32 transcendental ops: vectorized fast math, one clone per ISA.
#define LOOM_FAST_ARRAY(name, fn)                                              \
  LOOM_VECTOR_CLONES void name(const void *x, void *r, int64_t n) {            \
    const float *in = static_cast<const float *>(x);                           \
    float *out = static_cast<float *>(r);                                      \
    for (int64_t i = 0; i < n; ++i)                                            \
      out[i] = fn(in[i]);                                                      \
  }
LOOM_FAST_ARRAY(expArray, fast::exp)
LOOM_FAST_ARRAY(erfArray, fast::erf)
LOOM_FAST_ARRAY(tanhArray, fast::tanh)
LOOM_FAST_ARRAY(sigmoidArray, fast::sigmoid)
LOOM_FAST_ARRAY(geluArray, fast::gelu)
LOOM_FAST_ARRAY(geluTanhArray, fast::geluTanh)
#undef LOOM_FAST_ARRAY

/// Runs the f32 fast-math version of a transcendental op; false for other
/// ops.
bool evalFastFloat(Code code, const void *a, void *r, int64_t n) {
  switch (code) {
  case Code::Exp:
    return expArray(a, r, n), true;
  case Code::Erf:
    return erfArray(a, r, n), true;
  case Code::Tanh:
    return tanhArray(a, r, n), true;
  case Code::Sigmoid:
    return sigmoidArray(a, r, n), true;
  case Code::Gelu:
    return geluArray(a, r, n), true;
  case Code::GeluTanh:
    return geluTanhArray(a, r, n), true;
  default:
    return false;
  }
}

/// Ops whose operands and result share the dtype T.
template <typename T>
void evalSameType(const Step &s, void *const *v, int64_t n) {
  void *r = v[s.result];
  const void *a = v[s.a];
  const void *b = s.b >= 0 ? v[s.b] : nullptr;
  constexpr bool isFloat = IsFloat<T>::value;
  using Plus = std::plus<>;
  switch (s.code) {
  case Code::Add:
    if constexpr (isFloat)
      return binary<T>(a, b, r, n, [](T x, T y) { return x + y; });
    else
      return binary<T>(a, b, r, n,
                       [](T x, T y) { return wrapping(x, y, Plus()); });
  case Code::Sub:
    if constexpr (isFloat)
      return binary<T>(a, b, r, n, [](T x, T y) { return x - y; });
    else
      return binary<T>(a, b, r, n, [](T x, T y) {
        return wrapping(x, y, [](auto p, auto q) { return p - q; });
      });
  case Code::Mul:
    if constexpr (isFloat)
      return binary<T>(a, b, r, n, [](T x, T y) { return x * y; });
    else
      return binary<T>(a, b, r, n, [](T x, T y) {
        return wrapping(x, y, [](auto p, auto q) { return p * q; });
      });
  case Code::Div:
    if constexpr (isFloat)
      return binary<T>(a, b, r, n, [](T x, T y) { return x / y; });
    else
      return binary<T>(a, b, r, n, intDiv<T>);
  case Code::Pow:
    if constexpr (isFloat)
      return binary<T>(a, b, r, n, [](T x, T y) { return std::pow(x, y); });
    else
      return binary<T>(a, b, r, n, intPow<T>);
  case Code::Max:
    return binary<T>(a, b, r, n, maxOf<T>);
  case Code::Min:
    return binary<T>(a, b, r, n, minOf<T>);
  case Code::Neg:
    if constexpr (isFloat)
      return unary<T>(a, r, n, [](T x) { return -x; });
    else
      return unary<T>(a, r, n, [](T x) {
        return wrapping(T(0), x, [](auto p, auto q) { return p - q; });
      });
  case Code::Relu:
    return unary<T>(a, r, n, [](T x) { return x < T(0) ? T(0) : x; });
  case Code::Abs:
    if constexpr (isFloat)
      return unary<T>(a, r, n, [](T x) { return std::fabs(x); });
    else
      return unary<T>(a, r, n, [](T x) {
        return x < T(0)
                   ? wrapping(T(0), x, [](auto p, auto q) { return p - q; })
                   : x;
      });
  case Code::Select: {
    const Bool *cond = static_cast<const Bool *>(a);
    const T *onTrue = static_cast<const T *>(b);
    const T *onFalse = static_cast<const T *>(v[s.c]);
    T *out = static_cast<T *>(r);
    for (int64_t i = 0; i < n; ++i)
      out[i] = cond[i] ? onTrue[i] : onFalse[i];
    return;
  }
  default:
    break;
  }
  if constexpr (std::is_same_v<T, float>)
    if (evalFastFloat(s.code, a, r, n))
      return;
  if constexpr (isFloat) {
    switch (s.code) {
    case Code::Sqrt:
      return unary<T>(a, r, n, [](T x) { return std::sqrt(x); });
    case Code::Rsqrt:
      return unary<T>(a, r, n, [](T x) { return T(1) / std::sqrt(x); });
    case Code::Exp:
      return unary<T>(a, r, n, [](T x) { return std::exp(x); });
    case Code::Log:
      return unary<T>(a, r, n, [](T x) { return std::log(x); });
    case Code::Erf:
      return unary<T>(a, r, n, [](T x) { return std::erf(x); });
    case Code::Tanh:
      return unary<T>(a, r, n, [](T x) { return std::tanh(x); });
    case Code::Sigmoid:
      return unary<T>(a, r, n,
                      [](T x) { return T(1) / (T(1) + std::exp(-x)); });
    case Code::Reciprocal:
      return unary<T>(a, r, n, [](T x) { return T(1) / x; });
    case Code::Fmod:
      return binary<T>(a, b, r, n, [](T x, T y) { return std::fmod(x, y); });
    case Code::Sin:
      return unary<T>(a, r, n, [](T x) { return std::sin(x); });
    case Code::Cos:
      return unary<T>(a, r, n, [](T x) { return std::cos(x); });
    case Code::Gelu:
      return unary<T>(a, r, n, [](T x) {
        return T(0.5) * x * (T(1) + std::erf(x * T(M_SQRT1_2)));
      });
    case Code::GeluTanh:
      return unary<T>(a, r, n, [](T x) {
        const T k = T(0.7978845608028654); // sqrt(2/pi)
        return T(0.5) * x *
               (T(1) + std::tanh(k * (x + T(0.044715) * x * x * x)));
      });
    default:
      break;
    }
  }
}

template <typename T>
void evalCompare(const Step &s, void *const *v, int64_t n) {
  const void *a = v[s.a], *b = v[s.b];
  void *r = v[s.result];
  switch (s.code) {
  case Code::Eq:
    return binary<T, Bool>(a, b, r, n, [](T x, T y) { return Bool(x == y); });
  case Code::Ne:
    return binary<T, Bool>(a, b, r, n, [](T x, T y) { return Bool(x != y); });
  case Code::Lt:
    return binary<T, Bool>(a, b, r, n, [](T x, T y) { return Bool(x < y); });
  case Code::Le:
    return binary<T, Bool>(a, b, r, n, [](T x, T y) { return Bool(x <= y); });
  case Code::Gt:
    return binary<T, Bool>(a, b, r, n, [](T x, T y) { return Bool(x > y); });
  case Code::Ge:
    return binary<T, Bool>(a, b, r, n, [](T x, T y) { return Bool(x >= y); });
  default:
    return;
  }
}

/// Calls f(T{}) with T the C++ type of a register holding `dtype`: bf16
/// registers hold f32 (never f16: check rejected it).
template <typename F> inline void withType(DType dtype, F &&f) {
  switch (dtype) {
  case DType::BF16:
  case DType::F32:
    return f(float());
  case DType::F64:
    return f(double());
  case DType::I32:
    return f(int32_t());
  case DType::I64:
    return f(int64_t());
  case DType::I1:
    return f(Bool());
  default:
    return;
  }
}

/// Rounds a register of f32 values to bf16 precision, in place.
void roundRegister(void *r, int64_t n) {
  float *x = static_cast<float *>(r);
  for (int64_t i = 0; i < n; ++i)
    x[i] = roundThroughBF16(x[i]);
}

void evalCast(const Step &s, const std::vector<DType> &types, void *const *v,
              int64_t n) {
  withType(types[s.a], [&](auto from) {
    using From = decltype(from);
    const From *in = static_cast<const From *>(v[s.a]);
    if (s.dtype == DType::BF16) {
      // Rounded once: f32 (and bf16) directly, the others through f64, which
      // holds every f64, i32 and i1 value exactly (i64 beyond 2^53 rounds
      // twice).
      float *out = static_cast<float *>(v[s.result]);
      for (int64_t i = 0; i < n; ++i) {
        if constexpr (std::is_same_v<From, float>)
          out[i] = roundThroughBF16(in[i]);
        else
          out[i] = widenBF16(roundToBF16(double(in[i])));
      }
      return;
    }
    withType(s.dtype, [&](auto to) {
      using To = decltype(to);
      To *out = static_cast<To *>(v[s.result]);
      for (int64_t i = 0; i < n; ++i)
        out[i] = convert<To>(in[i]);
    });
  });
}

void evalStep(const Step &s, const std::vector<DType> &types, void *const *v,
              int64_t n) {
  switch (s.code) {
  case Code::Const:
    return; // splatted once per thread
  case Code::Cast:
    return evalCast(s, types, v, n);
  case Code::Eq:
  case Code::Ne:
  case Code::Lt:
  case Code::Le:
  case Code::Gt:
  case Code::Ge:
    return withType(types[s.a],
                    [&](auto t) { evalCompare<decltype(t)>(s, v, n); });
  default:
    withType(s.dtype, [&](auto t) { evalSameType<decltype(t)>(s, v, n); });
    if (s.dtype == DType::BF16)
      roundRegister(v[s.result], n);
    return;
  }
}

//===----------------------------------------------------------------------===//
// Iteration space and input access
//===----------------------------------------------------------------------===//

/// Elements per block: a few KiB per register, so a program's registers stay
/// in L1/L2 while the per-op dispatch is amortized over many elements.
constexpr int64_t kBlock = 512;

using Space = ElementwiseSpace;
using InputKind = ElementwiseSpace::InputKind;

/// Offset in input `i` of the space position whose multi-index is `index`.
int64_t inputOffset(const Space &space, size_t i,
                    const std::vector<int64_t> &index) {
  int64_t offset = 0;
  for (size_t d = 0; d < index.size(); ++d)
    offset += index[d] * space.strides[i][d];
  return offset;
}

/// Copies `count` elements of `size` bytes, `stride` elements apart, to
/// `dst`.
void copyRun(const uint8_t *src, int64_t stride, int64_t count, size_t size,
             uint8_t *dst) {
  if (stride == 1) {
    std::memcpy(dst, src, count * size);
    return;
  }
  auto loop = [&](auto tag) {
    using T = decltype(tag);
    const T *in = reinterpret_cast<const T *>(src);
    T *out = reinterpret_cast<T *>(dst);
    if (stride == 0) {
      std::fill(out, out + count, in[0]);
      return;
    }
    for (int64_t j = 0; j < count; ++j)
      out[j] = in[j * stride];
  };
  switch (size) {
  case 1:
    return loop(uint8_t());
  case 2:
    return loop(uint16_t());
  case 4:
    return loop(uint32_t());
  default:
    return loop(uint64_t());
  }
}

/// Fills `dst` with input `i`'s elements at space positions
/// [start, start + count).
void gatherBlock(const Space &space, size_t i, const uint8_t *base, size_t size,
                 int64_t start, int64_t count, uint8_t *dst) {
  size_t rank = space.shape.size();
  std::vector<int64_t> index(rank);
  int64_t rest = start;
  for (size_t d = rank; d-- > 0;) {
    index[d] = rest % space.shape[d];
    rest /= space.shape[d];
  }
  const int64_t innerStride = space.strides[i][rank - 1];
  while (count > 0) {
    int64_t run = std::min(count, space.inner() - index[rank - 1]);
    copyRun(base + inputOffset(space, i, index) * size, innerStride, run, size,
            dst);
    dst += run * size;
    count -= run;
    // Advance the multi-index by `run` (to the start of the next row).
    index[rank - 1] += run;
    for (size_t d = rank - 1; d > 0 && index[d] == space.shape[d]; --d) {
      index[d] = 0;
      ++index[d - 1];
    }
  }
}

template <typename T> void splat(void *dst, T value, int64_t count) {
  std::fill(static_cast<T *>(dst), static_cast<T *>(dst) + count, value);
}

void splatConst(const Step &s, void *dst) {
  if (s.dtype == DType::BF16)
    return splat<float>(dst, widenBF16(roundToBF16(s.value)), kBlock);
  withType(s.dtype, [&](auto t) {
    using T = decltype(t);
    splat<T>(dst, convert<T>(s.value), kBlock);
  });
}

void splatScalar(const void *src, size_t size, void *dst) {
  switch (size) {
  case 1:
    return splat(dst, *static_cast<const uint8_t *>(src), kBlock);
  case 4:
    return splat(dst, *static_cast<const uint32_t *>(src), kBlock);
  default:
    return splat(dst, *static_cast<const uint64_t *>(src), kBlock);
  }
}

} // namespace

Status cpu::check_elementwise(const Instruction &instruction) {
  if (Status s = expectKnownAttrs(instruction.attrs, {}); !s)
    return s;
  if (instruction.outputs.empty())
    return Status::error("expected at least one output");
  const TensorRef &first = instruction.outputs[0];
  for (size_t i = 0; i < instruction.outputs.size(); ++i) {
    const TensorRef &out = instruction.outputs[i];
    std::string name = "output " + std::to_string(i);
    if (Status s = expectComputable(out.dtype, name); !s)
      return s;
    if (Status s = expectSameShape(first, "output 0", out, name); !s)
      return s;
  }
  for (size_t i = 0; i < instruction.inputs.size(); ++i) {
    const TensorRef &in = instruction.inputs[i];
    std::string name = "input " + std::to_string(i);
    if (Status s = expectComputable(in.dtype, name); !s)
      return s;
    bool ok = in.shape.size() <= first.shape.size();
    size_t offset = first.shape.size() - in.shape.size();
    for (size_t d = 0; ok && d < in.shape.size(); ++d)
      ok = in.shape[d] == 1 || in.shape[d] == first.shape[offset + d];
    if (!ok)
      return Status::error(name + " " + shapeString(in.shape) +
                           " does not broadcast to the output shape " +
                           shapeString(first.shape));
  }
  Program program;
  if (Status s = decodeProgram(instruction, program); !s)
    return s;
  if (instruction.yields.size() != instruction.outputs.size())
    return Status::error(
        "the program yields " + std::to_string(instruction.yields.size()) +
        " value(s) for " + std::to_string(instruction.outputs.size()) +
        " output(s)");
  for (size_t i = 0; i < instruction.yields.size(); ++i) {
    int value = instruction.yields[i];
    if (value < 0 || value >= int(program.valueTypes.size()))
      return Status::error("yield of undefined value %" +
                           std::to_string(value));
    if (program.valueTypes[value] != instruction.outputs[i].dtype)
      return Status::error("output " + std::to_string(i) + " has dtype " +
                           dtypeName(instruction.outputs[i].dtype) +
                           " but the program yields %" + std::to_string(value) +
                           " of dtype " + dtypeName(program.valueTypes[value]));
  }
  return Status::ok();
}

void cpu::run_elementwise(const KernelArgs &args) {
  const Instruction &instruction = args.instruction;
  Program program;
  (void)decodeProgram(instruction, program); // validated by check
  Space space = elementwiseSpace(instruction);
  if (space.total == 0)
    return;
  const size_t inputs = instruction.inputs.size();
  const size_t values = program.valueTypes.size();

  // Blocks: within rows when rows are long (so row-aligned inputs can be read
  // in place), else runs of kBlock consecutive elements.
  const bool rowBlocks = space.inner() >= kBlock;
  const int64_t chunksPerRow =
      rowBlocks ? (space.inner() + kBlock - 1) / kBlock : 1;
  const int64_t blocks = rowBlocks
                             ? (space.total / space.inner()) * chunksPerRow
                             : (space.total + kBlock - 1) / kBlock;
  // Elementwise work is memory bound: give each thread at least ~16K
  // elements.
  int threads = threadsFor(space.total, 1 << 14);

#pragma omp parallel num_threads(threads)
  {
    // Registers: kBlock elements of up to 8 bytes per value, 64-byte aligned.
    constexpr size_t kRegisterBytes = kBlock * 8;
    std::vector<uint64_t> storage(values * kRegisterBytes / 8 + 8);
    uint8_t *aligned = reinterpret_cast<uint8_t *>(
        (reinterpret_cast<uintptr_t>(storage.data()) + 63) & ~uintptr_t(63));
    auto reg = [&](size_t value) { return aligned + value * kRegisterBytes; };
    std::vector<void *> v(values);
    for (size_t i = 0; i < inputs; ++i) {
      if (space.kinds[i] != InputKind::Scalar)
        continue;
      if (instruction.inputs[i].dtype == DType::BF16)
        splat<float>(v[i] = reg(i),
                     widenBF16(*static_cast<const BF16 *>(args.inputs[i])),
                     kBlock);
      else
        splatScalar(args.inputs[i], dtypeSize(instruction.inputs[i].dtype),
                    v[i] = reg(i));
    }
    for (const Step &step : program.steps) {
      v[step.result] = reg(step.result);
      if (step.code == Code::Const)
        splatConst(step, v[step.result]);
    }

#pragma omp for schedule(static)
    for (int64_t block = 0; block < blocks; ++block) {
      int64_t start, count;
      if (rowBlocks) {
        int64_t row = block / chunksPerRow, chunk = block % chunksPerRow;
        start = row * space.inner() + chunk * kBlock;
        count = std::min(kBlock, space.inner() - chunk * kBlock);
      } else {
        start = block * kBlock;
        count = std::min(kBlock, space.total - start);
      }
      for (size_t i = 0; i < inputs; ++i) {
        const uint8_t *base = static_cast<const uint8_t *>(args.inputs[i]);
        size_t size = dtypeSize(instruction.inputs[i].dtype);
        const bool bf16 = instruction.inputs[i].dtype == DType::BF16;
        switch (space.kinds[i]) {
        case InputKind::Dense:
          v[i] = const_cast<uint8_t *>(base + start * size);
          break;
        case InputKind::Scalar:
          break;
        case InputKind::Strided: {
          const std::vector<int64_t> &strides = space.strides[i];
          if (rowBlocks && strides.back() == 1) {
            // The block lies in one row that the input stores contiguously.
            int64_t row = start / space.inner(), offset = start % space.inner();
            int64_t rowOffset = 0;
            for (size_t d = space.shape.size() - 1; d-- > 0;) {
              rowOffset += (row % space.shape[d]) * strides[d];
              row /= space.shape[d];
            }
            v[i] = const_cast<uint8_t *>(base + (rowOffset + offset) * size);
          } else if (bf16) {
            // Gathered into the register's upper half, widened into its
            // lower half (2 * count bytes after 4 * kBlock: no overlap).
            uint8_t *raw = reg(i) + 4 * kBlock;
            gatherBlock(space, i, base, size, start, count, raw);
            widenBF16(reinterpret_cast<const BF16 *>(raw),
                      reinterpret_cast<float *>(v[i] = reg(i)), count);
          } else {
            v[i] = reg(i);
            gatherBlock(space, i, base, size, start, count, reg(i));
          }
          break;
        }
        }
        // bf16 read in place: widen it into its register.
        if (bf16 && space.kinds[i] != InputKind::Scalar && v[i] != reg(i)) {
          widenBF16(static_cast<const BF16 *>(v[i]),
                    reinterpret_cast<float *>(reg(i)), count);
          v[i] = reg(i);
        }
      }
      for (const Step &step : program.steps)
        evalStep(step, program.valueTypes, v.data(), count);
      for (size_t o = 0; o < instruction.outputs.size(); ++o) {
        size_t size = dtypeSize(instruction.outputs[o].dtype);
        uint8_t *out = static_cast<uint8_t *>(args.outputs[o]) + start * size;
        // bf16 values are registers (inputs were widened), already rounded.
        if (instruction.outputs[o].dtype == DType::BF16)
          roundToBF16(static_cast<const float *>(v[instruction.yields[o]]),
                      reinterpret_cast<BF16 *>(out), count);
        else // memmove: the output may be the very input it yields.
          std::memmove(out, v[instruction.yields[o]], count * size);
      }
    }
  }
}
