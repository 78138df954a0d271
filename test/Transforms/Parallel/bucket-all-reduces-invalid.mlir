// RUN: loom-opt "--loom-bucket-all-reduces=bucket-mb=-1" --verify-diagnostics %s

// A bucket has a size of at least 0 (0 turns buckets off).
// expected-error @+1 {{loom-bucket-all-reduces: bucket-mb must be >= 0 (0: no buckets), got -1}}
func.func @negative(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
