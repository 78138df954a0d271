//===- loom-opt.cpp - Loom's mlir-opt -------------------------------------===//
//
// Runs Loom and upstream passes on .mlir files; the driver of Loom's lit
// tests and the tool pass developers use.
//
//===----------------------------------------------------------------------===//

#include "TestPasses.h"
#include "loom/InitAllDialects.h"
#include "loom/InitAllPasses.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::registerTransformsPasses();
  mlir::loom::registerAllPasses();
  mlir::loom::test::registerTestPasses();

  mlir::DialectRegistry registry;
  mlir::loom::registerAllDialects(registry);
  registry.insert<mlir::arith::ArithDialect, mlir::tensor::TensorDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Loom optimizer driver\n", registry));
}
