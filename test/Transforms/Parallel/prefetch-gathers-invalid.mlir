// RUN: loom-opt "--loom-prefetch-gathers=distance=-1" --verify-diagnostics %s

// Gathers are posted ahead by 0 or more places.
// expected-error @+1 {{loom-prefetch-gathers: distance must be >= 0 (0: no prefetch), got -1}}
func.func @negative(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
