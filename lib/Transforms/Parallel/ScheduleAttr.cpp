//===- ScheduleAttr.cpp - A pipeline schedule kept in the module ----------===//

#include "ScheduleAttr.h"

#include "loom/Dialect/Loom/IR/LoomDialect.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::loom;

DictionaryAttr mlir::loom::scheduleToAttr(MLIRContext *context,
                                          const PipelineSchedule &schedule) {
  Builder builder(context);
  SmallVector<Attribute> ranks;
  for (const std::vector<PipelineAction> &list : schedule.actions) {
    std::string text;
    for (const PipelineAction &action : list)
      text += (text.empty() ? "" : " ") + formatPipelineAction(action);
    ranks.push_back(builder.getStringAttr(text));
  }
  return builder.getDictionaryAttr(
      {builder.getNamedAttr("kind", builder.getStringAttr(schedule.kind)),
       builder.getNamedAttr("ranks", builder.getI64IntegerAttr(schedule.ranks)),
       builder.getNamedAttr("stages",
                            builder.getI64IntegerAttr(schedule.stages)),
       builder.getNamedAttr("microbatches",
                            builder.getI64IntegerAttr(schedule.microbatches)),
       builder.getNamedAttr("actions", builder.getArrayAttr(ranks))});
}

FailureOr<PipelineSchedule> mlir::loom::readSchedule(ModuleOp module,
                                                     StringRef pass) {
  auto fail = [&](const Twine &message) {
    module.emitError() << pass << ": " << message;
    return failure();
  };
  auto dict = module->getAttrOfType<DictionaryAttr>(
      LoomDialect::kPipelineScheduleAttrName);
  if (!dict)
    return fail(Twine("the module has no '") +
                LoomDialect::kPipelineScheduleAttrName +
                "' (run loom-build-schedule first)");
  PipelineSchedule schedule;
  auto integer = [&](StringRef name) -> int {
    auto value = dict.getAs<IntegerAttr>(name);
    return value ? int(value.getInt()) : 0;
  };
  auto kind = dict.getAs<StringAttr>("kind");
  schedule.kind = kind ? kind.str() : "file";
  schedule.ranks = integer("ranks");
  schedule.stages = integer("stages");
  schedule.microbatches = integer("microbatches");
  auto actions = dict.getAs<ArrayAttr>("actions");
  if (!actions || int(actions.size()) != schedule.ranks)
    return fail("'actions' must list one string per rank");
  for (auto [rank, attr] : llvm::enumerate(actions)) {
    auto text = dyn_cast<StringAttr>(attr);
    if (!text)
      return fail("'actions' must list one string per rank");
    std::vector<PipelineAction> &list = schedule.actions.emplace_back();
    SmallVector<StringRef> words;
    text.getValue().split(words, ' ', -1, /*KeepEmpty=*/false);
    for (StringRef word : words) {
      std::optional<PipelineAction> action = parsePipelineAction(word);
      if (!action)
        return fail("rank " + Twine(rank) + ": '" + word +
                    "' is no action (F, B, W, SF, RF, SB or RB, then "
                    "STAGE.MB)");
      list.push_back(*action);
    }
  }
  return schedule;
}
