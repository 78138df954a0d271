// RUN: loom-opt '--loom-annotate-shardings=mesh=tp=2 shard=h\.[0-9]+\.fc\.weight=[{tp},{}] shard=h\.0\.proj\.weight=[{?},{tp}]:2' %s | FileCheck %s
// RUN: echo '{"shardings": [{"parameter": "h\\.1\\.proj\\.weight", "sharding": "[{}, {tp}]", "priority": 3}]}' > %t.json
// RUN: loom-opt '--loom-annotate-shardings=mesh=tp=2 shardings-file=%t.json' %s | FileCheck %s --check-prefix=FILE

// The mesh is declared; a regex names parameters by their whole name (so
// h.1.fc.weight.extra is not matched); a priority other than 0 is kept.
// CHECK:      loom.mesh @mesh = <tp = 2>
// CHECK-NEXT: loom.parameter @h.0.fc.weight trainable : tensor<8x4xf32> sharding <@mesh, [{tp}, {}]>{{$}}
// CHECK-NEXT: loom.parameter @h.1.fc.weight trainable : tensor<8x4xf32> sharding <@mesh, [{tp}, {}]>{{$}}
// CHECK-NEXT: loom.parameter @h.1.fc.weight.extra trainable : tensor<8x4xf32>{{$}}
// CHECK-NEXT: loom.parameter @h.0.proj.weight trainable : tensor<4x8xf32> sharding <@mesh, [{?}, {tp}]> priority 2{{$}}
// CHECK-NEXT: loom.parameter @h.1.proj.weight trainable : tensor<4x8xf32>{{$}}

// FILE: loom.parameter @h.0.proj.weight trainable : tensor<4x8xf32>{{$}}
// FILE: loom.parameter @h.1.proj.weight trainable : tensor<4x8xf32> sharding <@mesh, [{}, {tp}]> priority 3{{$}}
module {
  loom.parameter @h.0.fc.weight trainable : tensor<8x4xf32>
  loom.parameter @h.1.fc.weight trainable : tensor<8x4xf32>
  loom.parameter @h.1.fc.weight.extra trainable : tensor<8x4xf32>
  loom.parameter @h.0.proj.weight trainable : tensor<4x8xf32>
  loom.parameter @h.1.proj.weight trainable : tensor<4x8xf32>
}
