//===- EmitPlan.cpp - A lowered function as a runtime plan ----------------===//
//
// Almost one instruction per plan op: buffers become arena or weight
// references, plan.kernel becomes a kernel instruction, and the body of an
// elementwise kernel becomes its numbered program.
//
//===----------------------------------------------------------------------===//

#include "loom/Target/Plan/EmitPlan.h"
#include "loom/Conversion/Passes.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Runtime/TensorIO.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/MemoryBuffer.h"

#include <map>

using namespace mlir;
using namespace mlir::loom;
namespace rt = loomrt;

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

/// Kernels that become `collective` instructions (the runtime's list).
bool isCollective(StringRef kernel) {
  static const std::vector<std::string> names = rt::collectiveNames();
  return llvm::is_contained(names, kernel.str());
}

class PlanBuilder {
public:
  /// Appends the program of world rank `rankNumber`, which runs `func`.
  LogicalResult addRank(func::FuncOp func, int rankNumber) {
    auto arena =
        func->getAttrOfType<IntegerAttr>(plan::PlanDialect::kArenaSizeAttrName);
    if (!arena)
      return func.emitOpError("has no planned arena; run -loom-plan-memory "
                              "(or the -loom-lower-to-plan pipeline) first");
    rt::RankProgram &rank = plan.ranks.emplace_back();
    rank.rank = rankNumber;
    rank.arenaBytes = arena.getInt();
    for (Operation &op : func.getBody().front()) {
      LogicalResult result =
          llvm::TypeSwitch<Operation *, LogicalResult>(&op)
              .Case([&](plan::InputOp input) -> LogicalResult {
                FailureOr<rt::TensorRef> ref = reference(input.getBuffer());
                if (failed(ref))
                  return failure();
                rt::Binding &binding = rank.inputs.emplace_back();
                binding.name = input.getName().str();
                binding.ref = *ref;
                return batchRows(func, input, rankNumber, binding);
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
    return success();
  }

  /// The first row of the step's global batch that `input` holds on rank
  /// `rankNumber` (its `rows`, one per rank of `func`), when it has them.
  static LogicalResult batchRows(func::FuncOp func, plan::InputOp input,
                                 int rankNumber, rt::Binding &binding) {
    std::optional<ArrayRef<int64_t>> rows = input.getRows();
    if (!rows)
      return success();
    SmallVector<int64_t> ranks = LoomDialect::getRanksOf(func);
    auto position = llvm::find(ranks, rankNumber);
    if (rows->size() != ranks.size() || position == ranks.end())
      return input.emitOpError()
             << "has " << rows->size() << " batch row offset(s) but @"
             << func.getSymName() << " runs on " << ranks.size() << " rank(s)";
    binding.batchOffset = (*rows)[position - ranks.begin()];
    return success();
  }

  rt::Plan take() {
    // A copy whose source the plan also holds names it, so that the runtime
    // keeps the two in step; without it (inference reads only the copy)
    // the copy is simply the weight.
    for (auto [copy, source] : copySources) {
      auto it = weightIds.find(source);
      if (it != weightIds.end())
        plan.weights[copy].castOf = int64_t(it->second);
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
    if (auto castOf = dyn_cast_if_present<CastOfAttr>(
            parameter.getInitialValue().value_or(nullptr)))
      copySources.emplace_back(id, castOf.getSource().getAttr());
    return id;
  }

  LogicalResult copyValue(ParameterOp parameter, uint8_t *out, uint64_t bytes) {
    std::optional<Attribute> value = parameter.getInitialValue();
    if (!value)
      return parameter.emitOpError(
          "has no value; a plan needs every weight (the module was "
          "imported shapes-only)");
    if (auto castOf = dyn_cast<CastOfAttr>(*value))
      return copyCastValue(parameter, castOf, out, bytes);
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

  /// A narrowed copy of another parameter: its source's value converted
  /// by the runtime's own rounding, so the copy holds what a cast kernel
  /// computes from the source.
  LogicalResult copyCastValue(ParameterOp parameter, CastOfAttr castOf,
                              uint8_t *out, uint64_t bytes) {
    auto source = SymbolTable::lookupNearestSymbolFrom<ParameterOp>(
        parameter, castOf.getSource());
    // (The verifier checks the source; a module that skipped it must still
    // not recurse here.)
    if (!source ||
        isa_and_present<CastOfAttr>(source.getInitialValue().value_or(nullptr)))
      return parameter.emitOpError("is a cast of ")
             << castOf.getSource() << ", which is not an f32 or f64 "
             << "loom.parameter with a value";
    RankedTensorType type = source.getTensorType();
    rt::HostTensor wide;
    wide.dtype = *toDType(type.getElementType());
    wide.shape.assign(type.getShape().begin(), type.getShape().end());
    wide.data.resize(uint64_t(type.getNumElements()) *
                     rt::dtypeSize(wide.dtype));
    if (failed(copyValue(source, wide.data.data(), wide.data.size())))
      return failure();
    rt::StatusOr<rt::HostTensor> narrow = rt::castTensor(
        wide, *toDType(parameter.getTensorType().getElementType()));
    if (!narrow)
      return parameter.emitOpError("cannot hold a cast of ")
             << castOf.getSource() << ": " << narrow.status().message();
    if (narrow->data.size() != bytes)
      return parameter.emitOpError("is a cast of ")
             << castOf.getSource() << ", which has another element count";
    std::memcpy(out, narrow->data.data(), bytes);
    return success();
  }

  LogicalResult addKernel(plan::KernelOp kernel, rt::RankProgram &rank) {
    rt::Instruction instruction;
    instruction.kernel = kernel.getKernel().str();
    if (isCollective(kernel.getKernel())) {
      instruction.kind = rt::Instruction::Kind::Collective;
      if (failed(resolveRanks(kernel, rank.rank, instruction)))
        return failure();
    }
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
      // Rank lists were resolved to this rank's group or peer.
    }
    if (!kernel.getBody().empty() &&
        failed(addProgram(kernel.getBody().front(), instruction)))
      return failure();
    rank.instructions.push_back(std::move(instruction));
    return success();
  }

  /// Replaces a collective's rank lists by what they mean for `rank`: the id
  /// of its group in the plan (`group=`), or its peer (`peer=`).
  LogicalResult resolveRanks(plan::KernelOp kernel, int rank,
                             rt::Instruction &instruction) {
    DictionaryAttr attrs = kernel.getKernelAttrs();
    if (auto groups = attrs.getAs<ArrayAttr>("groups")) {
      for (Attribute attr : groups) {
        ArrayRef<int64_t> group = cast<DenseI64ArrayAttr>(attr).asArrayRef();
        if (!llvm::is_contained(group, rank))
          continue;
        std::vector<int> members(group.begin(), group.end());
        auto [it, inserted] = groupIds.try_emplace(members, plan.groups.size());
        if (inserted)
          plan.groups.push_back(members);
        instruction.attrs["group"] = int64_t(it->second);
        return success();
      }
      return kernel.emitOpError("runs on rank ")
             << rank << ", which is in none of its groups";
    }
    auto pairs = attrs.getAs<ArrayAttr>("pairs");
    if (!pairs)
      return kernel.emitOpError("needs 'groups' or 'pairs'");
    bool sending = kernel.getKernel() == "send";
    for (Attribute attr : pairs) {
      ArrayRef<int64_t> pair = cast<DenseI64ArrayAttr>(attr).asArrayRef();
      if (pair.size() == 2 && pair[sending ? 0 : 1] == rank) {
        instruction.attrs["peer"] = pair[sending ? 1 : 0];
        return success();
      }
    }
    return kernel.emitOpError("runs on rank ")
           << rank << ", which " << (sending ? "sends" : "receives")
           << " in none of its pairs";
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
              .Case([](AbsOp) { return "abs"; })
              .Case([](SinOp) { return "sin"; })
              .Case([](CosOp) { return "cos"; })
              .Case([](FmodOp) { return "fmod"; })
              .Case([](MaximumOp) { return "max"; })
              .Case([](MinimumOp) { return "min"; })
              .Default([](Operation *) { return ""; });
      if (programOp.op.empty())
        return op.emitOpError("has no elementwise program equivalent");
      numbers[op.getResult(0)] = next++;
      instruction.program.push_back(std::move(programOp));
    }
    return success();
  }

  rt::Plan plan;
  llvm::DenseMap<Attribute, uint64_t> weightIds;
  /// The weights that are `#loom.cast_of` copies, and their sources' names.
  SmallVector<std::pair<uint64_t, Attribute>> copySources;
  std::map<std::vector<int>, size_t> groupIds;
};

/// The function each world rank runs: `name` (or the only function) on
/// every rank, or else the functions that say which ranks run them
/// (`loom.ranks`), which must cover each rank once.
FailureOr<SmallVector<func::FuncOp>> functionsByRank(ModuleOp module,
                                                     StringRef name) {
  int64_t worldSize = LoomDialect::getWorldSize(module);
  SmallVector<func::FuncOp> candidates;
  if (!name.empty()) {
    auto func = module.lookupSymbol<func::FuncOp>(name);
    if (!func)
      return module.emitError("no function named '") << name << "'";
    candidates.push_back(func);
  } else {
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal())
        candidates.push_back(func);
    if (candidates.empty())
      return module.emitError("the module has no function to run");
    if (candidates.size() > 1) {
      llvm::erase_if(candidates, [](func::FuncOp func) {
        return !func->hasAttr(LoomDialect::kRanksAttrName);
      });
      if (candidates.empty())
        return module.emitError("the module has several functions; name the "
                                "one to run, or give each the ranks that run "
                                "it (loom.ranks)");
    }
  }
  SmallVector<func::FuncOp> byRank(worldSize);
  for (func::FuncOp func : candidates)
    for (int64_t rank : LoomDialect::getRanksOf(func)) {
      if (byRank[rank])
        return func.emitOpError("runs on rank ")
               << rank << ", which @" << byRank[rank].getSymName()
               << " runs too";
      byRank[rank] = func;
    }
  for (auto [rank, func] : llvm::enumerate(byRank))
    if (!func)
      return module.emitError("no function runs on rank ")
             << rank << " of the module's loom.world_size " << worldSize;
  return byRank;
}

/// The plan of the lowered module: one program per rank.
FailureOr<rt::Plan> buildPlan(ModuleOp module, StringRef funcName) {
  FailureOr<SmallVector<func::FuncOp>> byRank =
      functionsByRank(module, funcName);
  if (failed(byRank))
    return failure();
  PlanBuilder builder;
  for (auto [rank, func] : llvm::enumerate(*byRank))
    if (failed(builder.addRank(func, int(rank))))
      return failure();
  rt::Plan plan = builder.take();
  if (rt::Status status = rt::checkCommunication(plan); !status)
    return module.emitError("the ranks' communication does not match: ")
           << status.message();
  return plan;
}

} // namespace

FailureOr<rt::Plan> mlir::loom::buildRuntimePlan(ModuleOp module,
                                                 StringRef funcName) {
  return buildPlan(module, funcName);
}

FailureOr<rt::Plan> mlir::loom::lowerToRuntimePlan(ModuleOp module,
                                                   StringRef funcName) {
  // Checked before lowering, which would otherwise report a missing
  // function only after running every pass.
  if (failed(functionsByRank(module, funcName)))
    return failure();
  PassManager pm(module.getContext());
  buildLowerToPlanPipeline(pm);
  if (failed(pm.run(module)))
    return failure();
  return buildPlan(module, funcName);
}
