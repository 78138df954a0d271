//===- ScheduleAttr.h - A pipeline schedule kept in the module ---*- C++
//-*-===//
//
// `loom-build-schedule` stores the schedule it proved as the module's
// `loom.pipeline_schedule`, a dictionary (`kind`, `ranks`, `stages`,
// `microbatches`, and `actions`: one string per rank, its actions in order
// as formatPipelineAction writes them); the passes after it read it back.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_TRANSFORMS_PARALLEL_SCHEDULEATTR_H
#define LOOM_LIB_TRANSFORMS_PARALLEL_SCHEDULEATTR_H

#include "loom/Analysis/PipelineSchedule.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir {
namespace loom {

DictionaryAttr scheduleToAttr(MLIRContext *context,
                              const PipelineSchedule &schedule);

/// The module's schedule, or an error at the module (a missing or malformed
/// attribute).
FailureOr<PipelineSchedule> readSchedule(ModuleOp module, StringRef pass);

} // namespace loom
} // namespace mlir

#endif // LOOM_LIB_TRANSFORMS_PARALLEL_SCHEDULEATTR_H
