// RUN: loom-opt "--loom-pad-classes=multiple=0" -verify-diagnostics %s -o /dev/null
// RUN: not loom-opt "--loom-pad-classes=multiple=65537" %s -o /dev/null 2>&1 | FileCheck %s --check-prefix=HUGE

// HUGE: error: loom-pad-classes: multiple must be in [1, 65536], not 65537
// expected-error @+1 {{loom-pad-classes: multiple must be in [1, 65536], not 0}}
func.func @bad_multiple(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  return %x : tensor<8x16xf32>
}
