//===- LoomInterfaces.h - Loom op interfaces --------------------*- C++ -*-===//

#ifndef LOOM_DIALECT_LOOM_IR_LOOMINTERFACES_H
#define LOOM_DIALECT_LOOM_IR_LOOMINTERFACES_H

#include "loom/Dialect/Loom/IR/FactorRule.h"
#include "loom/Dialect/Loom/IR/GradientContext.h"
#include "mlir/IR/OpDefinition.h"

#include "loom/Dialect/Loom/IR/LoomInterfaces.h.inc"

#endif // LOOM_DIALECT_LOOM_IR_LOOMINTERFACES_H
