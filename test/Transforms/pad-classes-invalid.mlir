// RUN: loom-opt "--loom-pad-classes=multiple=0" -verify-diagnostics %s -o /dev/null

// expected-error @+1 {{loom-pad-classes: multiple must be at least 1, not 0}}
func.func @bad_multiple(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  return %x : tensor<8x16xf32>
}
