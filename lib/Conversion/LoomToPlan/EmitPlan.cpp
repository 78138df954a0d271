//===- EmitPlan.cpp - A lowered function as a runtime plan ----------------===//
//
// Almost one instruction per plan op: buffers become arena or weight
// references, plan.kernel becomes a kernel instruction, and the body of an
// elementwise kernel becomes its numbered program.
//
//===----------------------------------------------------------------------===//

#include "loom/Conversion/LoomToPlan/LoomToPlan.h"
#include "loom/Conversion/Passes.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace mlir;
using namespace mlir::loom;
namespace rt = ::loom::runtime;

namespace {

std::optional<rt::DType> toDType(Type type) {
  if (type.isF16())
    return rt::DType::F16;
  if (type.isBF16())
    return rt::DType::BF16;
  if (type.isF32())
    return rt::DType::F32;
  if (type.isF64())
    return rt::DType::F64;
  if (type.isInteger(1))
    return rt::DType::I1;
  if (type.isInteger(32))
    return rt::DType::I32;
  if (type.isInteger(64))
    return rt::DType::I64;
  return std::nullopt;
}

/// A name for reports: the ONNX node name when there is one.
std::string locationName(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto fused = dyn_cast<FusedLoc>(loc)) {
    for (Location inner : fused.getLocations()) {
      std::string name = locationName(inner);
      if (!name.empty())
        return name;
    }
    return "";
  }
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    return (file.getFilename().getValue() + ":" + Twine(file.getLine()) + ":" +
            Twine(file.getColumn()))
        .str();
  return "";
}

class PlanBuilder {
public:
  explicit PlanBuilder(func::FuncOp func) : func(func) {}

  FailureOr<rt::Plan> build() {
    auto arena =
        func->getAttrOfType<IntegerAttr>(plan::PlanDialect::kArenaSizeAttrName);
    if (!arena)
      return func.emitOpError("has no planned arena; run -loom-plan-memory "
                              "(or the -loom-lower-to-plan pipeline) first");
    rt::RankProgram &rank = plan.ranks.emplace_back();
    rank.arenaBytes = arena.getInt();
    for (Operation &op : func.getBody().front()) {
      LogicalResult result =
          llvm::TypeSwitch<Operation *, LogicalResult>(&op)
              .Case([&](plan::InputOp input) -> LogicalResult {
                FailureOr<rt::TensorRef> ref = reference(input.getBuffer());
                if (failed(ref))
                  return failure();
                rank.inputs.push_back({input.getName().str(), *ref});
                return success();
              })
              .Case([&](plan::OutputOp output) -> LogicalResult {
                FailureOr<rt::TensorRef> ref = reference(output.getBuffer());
                if (failed(ref))
                  return failure();
                rank.outputs.push_back({output.getName().str(), *ref});
                return success();
              })
              .Case([&](plan::KernelOp kernel) {
                return addKernel(kernel, rank);
              })
              .Case<plan::AllocOp, plan::WeightOp, plan::ViewOp,
                    func::ReturnOp>([](Operation *) { return success(); })
              .Default([](Operation *op) {
                return op->emitOpError(
                    "cannot be part of a runtime plan; lower the function "
                    "with -loom-lower-to-plan first");
              });
      if (failed(result))
        return failure();
    }
    return std::move(plan);
  }

private:
  FailureOr<rt::TensorRef> reference(Value buffer) {
    auto type = cast<MemRefType>(buffer.getType());
    rt::TensorRef ref;
    std::optional<rt::DType> dtype = toDType(type.getElementType());
    if (!dtype)
      return emitError(buffer.getLoc())
             << "element type " << type.getElementType()
             << " has no runtime equivalent";
    ref.dtype = *dtype;
    ref.shape.assign(type.getShape().begin(), type.getShape().end());
    Operation *root = plan::ViewOp::getRoot(buffer).getDefiningOp();
    if (auto weight = dyn_cast_or_null<plan::WeightOp>(root)) {
      FailureOr<uint64_t> id = weightId(weight);
      if (failed(id))
        return failure();
      ref.space = rt::TensorRef::Space::Weight;
      ref.offset = *id;
      return ref;
    }
    IntegerAttr offset;
    if (auto input = dyn_cast_or_null<plan::InputOp>(root))
      offset = input.getOffsetAttr();
    else if (auto alloc = dyn_cast_or_null<plan::AllocOp>(root))
      offset = alloc.getOffsetAttr();
    else
      return emitError(buffer.getLoc())
             << "buffer is not a plan.input, plan.alloc or plan.weight";
    if (!offset)
      return root->emitOpError("has no arena offset; run -loom-plan-memory");
    ref.space = rt::TensorRef::Space::Arena;
    ref.offset = offset.getInt();
    return ref;
  }

  /// The id of the weight read by `weight`, adding it on first use.
  FailureOr<uint64_t> weightId(plan::WeightOp weight) {
    auto it = weightIds.find(weight.getNameAttr().getAttr());
    if (it != weightIds.end())
      return it->second;
    auto parameter = SymbolTable::lookupNearestSymbolFrom<ParameterOp>(
        weight, weight.getNameAttr());
    if (!parameter)
      return weight.emitOpError("refers to no loom.parameter");
    rt::Weight info;
    info.name = parameter.getSymName().str();
    RankedTensorType type = parameter.getTensorType();
    info.dtype = *toDType(type.getElementType());
    info.shape.assign(type.getShape().begin(), type.getShape().end());
    info.bytes = uint64_t(type.getNumElements()) * rt::dtypeSize(info.dtype);
    info.offset = llvm::alignTo(plan.data.size(), 64);
    plan.data.resize(info.offset + info.bytes);
    if (failed(
            copyValue(parameter, plan.data.data() + info.offset, info.bytes)))
      return failure();
    uint64_t id = plan.weights.size();
    plan.weights.push_back(std::move(info));
    weightIds[weight.getNameAttr().getAttr()] = id;
    return id;
  }

  LogicalResult copyValue(ParameterOp parameter, uint8_t *out, uint64_t bytes) {
    std::optional<Attribute> value = parameter.getInitialValue();
    if (!value)
      return parameter.emitOpError(
          "has no value; a plan needs every weight (the module was "
          "imported shapes-only)");
    if (auto external = dyn_cast<ExternalDataAttr>(*value)) {
      auto file = llvm::MemoryBuffer::getFileSlice(
          external.getPath(), external.getLength(), external.getOffset(),
          /*IsVolatile=*/false);
      if (!file)
        return parameter.emitOpError("cannot read external data '")
               << external.getPath() << "': " << file.getError().message();
      if (uint64_t((*file)->getBufferSize()) != bytes)
        return parameter.emitOpError("external data '")
               << external.getPath() << "' is shorter than the parameter";
      std::memcpy(out, (*file)->getBufferStart(), bytes);
      return success();
    }
    if (auto resource = dyn_cast<DenseResourceElementsAttr>(*value)) {
      AsmResourceBlob *blob = resource.getRawHandle().getBlob();
      if (!blob || blob->getData().size() != bytes)
        return parameter.emitOpError("resource blob is missing or has the "
                                     "wrong size");
      std::memcpy(out, blob->getData().data(), bytes);
      return success();
    }
    auto dense = dyn_cast<DenseElementsAttr>(*value);
    if (!dense)
      return parameter.emitOpError("has a value of an unsupported kind");
    if (dense.getElementType().isInteger(1)) {
      uint64_t index = 0;
      for (bool element : dense.getValues<bool>())
        out[index++] = element;
      return success();
    }
    ArrayRef<char> raw = dense.getRawData();
    if (dense.isSplat()) {
      uint64_t width = raw.size();
      for (uint64_t at = 0; at < bytes; at += width)
        std::memcpy(out + at, raw.data(), width);
    } else {
      std::memcpy(out, raw.data(), bytes);
    }
    return success();
  }

  LogicalResult addKernel(plan::KernelOp kernel, rt::RankProgram &rank) {
    rt::Instruction instruction;
    instruction.kernel = kernel.getKernel().str();
    instruction.loc = locationName(kernel.getLoc());
    for (Value input : kernel.getInputs()) {
      FailureOr<rt::TensorRef> ref = reference(input);
      if (failed(ref))
        return failure();
      instruction.inputs.push_back(*ref);
    }
    for (Value output : kernel.getOutputs()) {
      FailureOr<rt::TensorRef> ref = reference(output);
      if (failed(ref))
        return failure();
      // A weight the step writes (a trained parameter, optimizer state)
      // persists across steps in the runtime.
      if (ref->space == rt::TensorRef::Space::Weight)
        plan.weights[ref->offset].state = true;
      instruction.outputs.push_back(*ref);
    }
    for (NamedAttribute attr : kernel.getKernelAttrs()) {
      std::string name = attr.getName().str();
      Attribute value = attr.getValue();
      if (auto integer = dyn_cast<IntegerAttr>(value))
        instruction.attrs[name] = integer.getInt();
      else if (auto real = dyn_cast<FloatAttr>(value))
        instruction.attrs[name] = real.getValueAsDouble();
      else if (auto text = dyn_cast<StringAttr>(value))
        instruction.attrs[name] = text.str();
      else if (auto list = dyn_cast<DenseI64ArrayAttr>(value))
        instruction.attrs[name] = std::vector<int64_t>(list.asArrayRef());
    }
    if (!kernel.getBody().empty() &&
        failed(addProgram(kernel.getBody().front(), instruction)))
      return failure();
    rank.instructions.push_back(std::move(instruction));
    return success();
  }

  /// Numbers the body's values (arguments first) and emits one program op
  /// per body op; broadcasts are free, the kernel broadcasts its loads.
  LogicalResult addProgram(Block &body, rt::Instruction &instruction) {
    llvm::DenseMap<Value, int> numbers;
    int next = 0;
    for (BlockArgument arg : body.getArguments())
      numbers[arg] = next++;
    for (Operation &op : body) {
      if (auto yield = dyn_cast<YieldOp>(op)) {
        for (Value value : yield.getValues())
          instruction.yields.push_back(numbers.lookup(value));
        continue;
      }
      if (auto broadcast = dyn_cast<BroadcastOp>(op)) {
        numbers[broadcast.getResult()] = numbers.lookup(broadcast.getInput());
        continue;
      }
      rt::ProgramOp programOp;
      Type element = getElementTypeOrSelf(op.getResult(0).getType());
      std::optional<rt::DType> dtype = toDType(element);
      if (!dtype)
        return op.emitOpError("element type has no runtime equivalent");
      programOp.dtype = *dtype;
      for (Value operand : op.getOperands())
        programOp.operands.push_back(numbers.lookup(operand));
      programOp.op =
          llvm::TypeSwitch<Operation *, std::string>(&op)
              .Case([&](ConstantOp constant) {
                auto splat = cast<SplatElementsAttr>(constant.getValue());
                if (element.isIntOrIndex())
                  programOp.attrs["value"] =
                      double(element.isInteger(1)
                                 ? splat.getSplatValue<bool>()
                                 : splat.getSplatValue<APInt>().getSExtValue());
                else
                  programOp.attrs["value"] =
                      splat.getSplatValue<APFloat>().convertToDouble();
                return "const";
              })
              .Case([&](GeluOp gelu) {
                programOp.attrs["approximate"] =
                    stringifyGeluApproximation(gelu.getApproximate()).str();
                return "gelu";
              })
              .Case([&](CompareOp compare) {
                programOp.attrs["direction"] =
                    stringifyCompareDirection(compare.getDirection()).str();
                return "compare";
              })
              .Case([](BiasAddOp) { return "add"; })
              .Case([](AddOp) { return "add"; })
              .Case([](SubOp) { return "sub"; })
              .Case([](MulOp) { return "mul"; })
              .Case([](DivOp) { return "div"; })
              .Case([](PowOp) { return "pow"; })
              .Case([](SelectOp) { return "select"; })
              .Case([](CastOp) { return "cast"; })
              .Case([](SqrtOp) { return "sqrt"; })
              .Case([](RsqrtOp) { return "rsqrt"; })
              .Case([](ExpOp) { return "exp"; })
              .Case([](LogOp) { return "log"; })
              .Case([](NegOp) { return "neg"; })
              .Case([](ErfOp) { return "erf"; })
              .Case([](TanhOp) { return "tanh"; })
              .Case([](SigmoidOp) { return "sigmoid"; })
              .Case([](ReluOp) { return "relu"; })
              .Case([](ReciprocalOp) { return "reciprocal"; })
              .Default([](Operation *) { return ""; });
      if (programOp.op.empty())
        return op.emitOpError("has no elementwise program equivalent");
      numbers[op.getResult(0)] = next++;
      instruction.program.push_back(std::move(programOp));
    }
    return success();
  }

  func::FuncOp func;
  rt::Plan plan;
  llvm::DenseMap<Attribute, uint64_t> weightIds;
};

FailureOr<func::FuncOp> findFunction(ModuleOp module, StringRef name) {
  if (!name.empty()) {
    auto func = module.lookupSymbol<func::FuncOp>(name);
    if (!func)
      return module.emitError("no function named '") << name << "'";
    return func;
  }
  func::FuncOp found;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isExternal())
      continue;
    if (found)
      return module.emitError("the module has several functions; name the "
                              "one to run");
    found = func;
  }
  if (!found)
    return module.emitError("the module has no function to run");
  return found;
}

} // namespace

FailureOr<rt::Plan> mlir::loom::buildRuntimePlan(ModuleOp module,
                                                 StringRef funcName) {
  FailureOr<func::FuncOp> func = findFunction(module, funcName);
  if (failed(func))
    return failure();
  return PlanBuilder(*func).build();
}

FailureOr<rt::Plan> mlir::loom::lowerToRuntimePlan(ModuleOp module,
                                                   StringRef funcName) {
  FailureOr<func::FuncOp> func = findFunction(module, funcName);
  if (failed(func))
    return failure();
  std::string name = func->getSymName().str();
  PassManager pm(module.getContext());
  buildLowerToPlanPipeline(pm);
  if (failed(pm.run(module)))
    return failure();
  return buildRuntimePlan(module, name);
}
