//===- AnnotateShardings.cpp - Command-line annotations as IR -------------===//
//
// Turns `--tp`/`--shard`/`--shardings` into a mesh and parameter
// shardings. The sharding text is parsed by MLIR's own attribute parser
// (as the dims of a `#loom.sharding`), so its errors and its grammar are the
// dialect's; every check runs before the module is changed.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Loom/IR/LoomOps.h"
#include "loom/Support/NameRegex.h"
#include "loom/Transforms/Parallel/Passes.h"
#include "mlir/AsmParser/AsmParser.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

namespace mlir {
namespace loom {
#define GEN_PASS_DEF_LOOMANNOTATESHARDINGS
#include "loom/Transforms/Parallel/Passes.h.inc"

namespace {

struct Annotation {
  std::string text; // as the user wrote it, for messages
  std::string pattern;
  std::string dims;
  int64_t priority = 0;
};

/// `REGEX=SHARDING[:PRIORITY]`, split at the last `=[`.
FailureOr<Annotation> splitAnnotation(ModuleOp module, StringRef text) {
  size_t equals = text.rfind("=[");
  if (equals == StringRef::npos || equals == 0)
    return module.emitError("malformed sharding annotation '")
           << text << "': expected REGEX=SHARDING, e.g. 'h\\..*\\.mlp\\.c_fc"
           << "\\.weight=[{tp}, {}]'";
  Annotation annotation;
  annotation.text = text.str();
  annotation.pattern = text.take_front(equals).str();
  StringRef rest = text.drop_front(equals + 1);
  size_t close = rest.rfind(']');
  StringRef dims = rest.take_front(close + 1);
  StringRef tail = rest.drop_front(close + 1).trim();
  if (!tail.empty()) {
    if (!tail.consume_front(":") ||
        tail.trim().getAsInteger(10, annotation.priority) ||
        annotation.priority < 0)
      return module.emitError("malformed sharding annotation '")
             << text << "': after the sharding, expected ':PRIORITY' (an "
             << "integer >= 0)";
  }
  annotation.dims = dims.str();
  return annotation;
}

FailureOr<SmallVector<Annotation>> readFile(ModuleOp module, StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return module.emitError("cannot read the shardings file '")
           << path << "': " << buffer.getError().message();
  llvm::Expected<llvm::json::Value> json =
      llvm::json::parse((*buffer)->getBuffer());
  if (!json)
    return module.emitError("the shardings file '")
           << path << "' is not JSON: " << llvm::toString(json.takeError());
  SmallVector<Annotation> annotations;
  const llvm::json::Object *root = json->getAsObject();
  const llvm::json::Array *list = root ? root->getArray("shardings") : nullptr;
  if (!list)
    return module.emitError("the shardings file '")
           << path << "' must be an object with a \"shardings\" array";
  for (auto [index, element] : llvm::enumerate(*list)) {
    const llvm::json::Object *entry = element.getAsObject();
    std::optional<StringRef> parameter =
        entry ? entry->getString("parameter") : std::nullopt;
    std::optional<StringRef> sharding =
        entry ? entry->getString("sharding") : std::nullopt;
    std::optional<int64_t> priority = entry && entry->get("priority")
                                          ? entry->getInteger("priority")
                                          : std::optional<int64_t>(0);
    if (!parameter || !sharding || !priority || *priority < 0)
      return module.emitError("the shardings file '")
             << path << "': entry " << index
             << " needs \"parameter\" (a regex) and \"sharding\" (a string "
                "like \"[{tp}, {}]\"), and an optional integer \"priority\" "
                ">= 0";
    annotations.push_back({(*parameter + "=" + *sharding).str(),
                           parameter->str(), sharding->str(), *priority});
  }
  return annotations;
}

/// `dp=2,tp=4` as a mesh attribute.
FailureOr<MeshAttr> parseMesh(ModuleOp module, StringRef spec) {
  Attribute attr =
      parseAttribute("#loom.mesh<" + spec.str() + ">", module.getContext());
  auto mesh = dyn_cast_or_null<MeshAttr>(attr);
  if (!mesh)
    return module.emitError("malformed mesh '")
           << spec << "': expected axes like 'tp=4' or 'dp=2,tp=4'";
  return mesh;
}

struct AnnotateShardingsPass
    : impl::LoomAnnotateShardingsBase<AnnotateShardingsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(annotate(module)))
      signalPassFailure();
  }

  LogicalResult annotate(ModuleOp module) {
    MLIRContext *context = module.getContext();
    SmallVector<Annotation> annotations;
    for (const std::string &text : shard) {
      FailureOr<Annotation> annotation = splitAnnotation(module, text);
      if (failed(annotation))
        return failure();
      annotations.push_back(*annotation);
    }
    if (!shardingsFile.empty()) {
      FailureOr<SmallVector<Annotation>> fromFile =
          readFile(module, shardingsFile);
      if (failed(fromFile))
        return failure();
      annotations.append(fromFile->begin(), fromFile->end());
    }

    // The mesh: the option's, or the module's own.
    MeshOp existing;
    for (auto mesh : module.getOps<MeshOp>()) {
      if (existing)
        return mesh.emitOpError("is a second mesh; sharding annotations "
                                "need one");
      existing = mesh;
    }
    MeshAttr mesh = existing ? existing.getMesh() : MeshAttr();
    if (!meshSpec.empty()) {
      FailureOr<MeshAttr> wanted = parseMesh(module, meshSpec);
      if (failed(wanted))
        return failure();
      if (mesh && mesh != *wanted)
        return existing.emitOpError("is ")
               << mesh << ", but the annotations ask for " << *wanted;
      mesh = *wanted;
    }
    if (!mesh) {
      if (annotations.empty())
        return success();
      return module.emitError("sharding annotations need a mesh (--tp N)");
    }
    FlatSymbolRefAttr meshName = FlatSymbolRefAttr::get(
        context, existing ? existing.getSymName() : StringRef("mesh"));

    // Every check first, then every change.
    SmallVector<std::pair<ParameterOp, std::pair<ShardingAttr, int64_t>>>
        changes;
    llvm::DenseMap<Operation *, const Annotation *> claimedBy;
    for (const Annotation &annotation : annotations) {
      std::string error;
      std::unique_ptr<NameRegex> regex =
          NameRegex::compile("^(?:" + annotation.pattern + ")$", error);
      if (!regex)
        return module.emitError("sharding annotation '")
               << annotation.text << "': '" << annotation.pattern
               << "' is not a valid regular expression: " << error;
      // The attribute parser reports its own error with a location in the
      // text; say which annotation it was.
      auto sharding = dyn_cast_or_null<ShardingAttr>(
          parseAttribute("#loom.sharding<@" + meshName.getValue().str() + ", " +
                             annotation.dims + ">",
                         context));
      if (!sharding)
        return module.emitError("sharding annotation '")
               << annotation.text << "': '" << annotation.dims
               << "' is not a list of dimensions like [{tp}, {}]";
      bool matched = false;
      for (auto parameter : module.getOps<ParameterOp>()) {
        if (!regex->search(parameter.getSymName().str()))
          continue;
        matched = true;
        auto [it, inserted] = claimedBy.try_emplace(parameter, &annotation);
        if (!inserted)
          return module.emitError("sharding annotations '")
                 << it->second->text << "' and '" << annotation.text
                 << "' both name parameter @" << parameter.getSymName();
        if (failed(verifySharding(sharding, mesh, parameter.getType(), [&]() {
              return module.emitError("sharding annotation '")
                     << annotation.text << "' on parameter @"
                     << parameter.getSymName() << ": ";
            })))
          return failure();
        changes.push_back({parameter, {sharding, annotation.priority}});
      }
      if (!matched)
        return module.emitError("sharding annotation '")
               << annotation.text << "' names no parameter";
    }

    if (!existing) {
      OpBuilder builder(module.getBodyRegion());
      builder.setInsertionPointToStart(module.getBody());
      builder.create<MeshOp>(module.getLoc(), meshName.getValue(), mesh);
    }
    Builder builder(context);
    for (auto &[parameter, change] : changes) {
      parameter.setShardingAttr(change.first);
      if (change.second != 0)
        parameter.setShardingPriorityAttr(
            builder.getI64IntegerAttr(change.second));
    }
    return success();
  }
};

} // namespace
} // namespace loom
} // namespace mlir
