//===- LoomDialect.h - The loom dialect -------------------------*- C++ -*-===//

#ifndef LOOM_DIALECT_LOOM_IR_LOOMDIALECT_H
#define LOOM_DIALECT_LOOM_IR_LOOMDIALECT_H

#include "mlir/IR/Dialect.h"

#include "loom/Dialect/Loom/IR/LoomDialect.h.inc"

#endif // LOOM_DIALECT_LOOM_IR_LOOMDIALECT_H
