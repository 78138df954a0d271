// RUN: loom-opt "--loom-pad-vocabulary=ways=0" -verify-diagnostics %s -o /dev/null
// RUN: not loom-opt "--loom-pad-vocabulary=ways=5000" %s -o /dev/null 2>&1 | FileCheck %s --check-prefix=HUGE

// HUGE: error: loom-pad-vocabulary: ways must be in [1, 4096], not 5000
// expected-error @+1 {{loom-pad-vocabulary: ways must be in [1, 4096], not 0}}
module {
  func.func @identity(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
    return %x : tensor<8x16xf32>
  }
}
