//===- Passes.td - Loom passes -----------------------------*- tablegen -*-===//
//
// Every Loom pass is declared here; lib/Transforms holds one file per pass.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TRANSFORMS_PASSES_TD
#define LOOM_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def LoomTestPrintFactors : Pass<"loom-test-print-factors"> {
  let summary = "Print every loom op's factor rule as a remark (for tests)";
  let description = [{
    Emits one remark per op that implements `FactorRuleOpInterface`, giving
    the op's name, its factors' kinds (`iterators`), their `sizes`, and the indexing map of
    every operand and then every result, in the linalg style. A rule that
    does not fit its op (wrong rank, sizes that do not multiply out) is an
    error. Lit tests pin each op's rule with `-verify-diagnostics`.

    Input:
    ```mlir
    %c = loom.matmul %a, %b : (tensor<8x512xf32>, tensor<512x2048xf32>) -> tensor<8x2048xf32>
    ```
    Remark:
    ```
    loom.matmul: iterators = [parallel, parallel, contracting], sizes = [8, 2048, 512],
    maps = [(d0, d1, d2) -> (d0, d2), (d0, d1, d2) -> (d2, d1),
            (d0, d1, d2) -> (d0, d1)]
    ```
  }];
  let dependentDialects = ["::mlir::loom::LoomDialect"];
}

#endif // LOOM_TRANSFORMS_PASSES_TD
