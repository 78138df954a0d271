//===- PlanDialect.h - The plan dialect -------------------------*- C++ -*-===//

#ifndef LOOM_DIALECT_PLAN_IR_PLANDIALECT_H
#define LOOM_DIALECT_PLAN_IR_PLANDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "loom/Dialect/Plan/IR/PlanDialect.h.inc"

#define GET_OP_CLASSES
#include "loom/Dialect/Plan/IR/PlanOps.h.inc"

#endif // LOOM_DIALECT_PLAN_IR_PLANDIALECT_H
