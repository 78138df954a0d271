// Every annotation error is reported before anything changes, naming the
// annotation as the user wrote it.
// RUN: not loom-opt '--loom-annotate-shardings=mesh=tp=2 shard=w' %s 2>&1 | FileCheck %s --check-prefix=MALFORMED
// MALFORMED: error: malformed sharding annotation 'w': expected REGEX=SHARDING
// RUN: not loom-opt '--loom-annotate-shardings=mesh=tp=2 shard=w=[{tp},{}]:x' %s 2>&1 | FileCheck %s --check-prefix=PRIORITY
// PRIORITY: error: malformed sharding annotation 'w=[{tp},{}]:x': after the sharding, expected ':PRIORITY' (an integer >= 0)
// RUN: not loom-opt '--loom-annotate-shardings=mesh=tp=2 shard=nothing=[{tp},{}]' %s 2>&1 | FileCheck %s --check-prefix=NONE
// NONE: error: sharding annotation 'nothing=[{tp},{}]' names no parameter
// RUN: not loom-opt '--loom-annotate-shardings=mesh=tp=2 shard=w=[{dp},{}]' %s 2>&1 | FileCheck %s --check-prefix=AXIS
// AXIS: error: sharding annotation 'w=[{dp},{}]' on parameter @w: unknown mesh axis 'dp'; mesh @mesh has axes tp
// RUN: not loom-opt '--loom-annotate-shardings=mesh=tp=4 shard=w=[{},{tp}]' %s 2>&1 | FileCheck %s --check-prefix=UNEVEN
// UNEVEN: error: sharding annotation 'w=[{},{tp}]' on parameter @w: dimension 1 of 'tensor<8x6xf32>' has size 6, which 4 shards do not divide evenly
// RUN: not loom-opt '--loom-annotate-shardings=mesh=tp=2 shard=w=[{tp},{}] shard=.*=[{},{tp}]' %s 2>&1 | FileCheck %s --check-prefix=TWICE
// TWICE: error: sharding annotations 'w=[{tp},{}]' and '.*=[{},{tp}]' both name parameter @w
// RUN: not loom-opt '--loom-annotate-shardings=mesh=tp=2 shard=*w=[{tp},{}]' %s 2>&1 | FileCheck %s --check-prefix=REGEX
// REGEX: error: sharding annotation '*w=[{tp},{}]': '*w' is not a valid regular expression
// RUN: not loom-opt '--loom-annotate-shardings=mesh=tp=2 shard=w=[tp]' %s 2>&1 | FileCheck %s --check-prefix=DIMS
// DIMS: error: sharding annotation 'w=[tp]': '[tp]' is not a list of dimensions like [{tp}, {}]
// RUN: not loom-opt '--loom-annotate-shardings=shard=w=[{tp},{}]' %s 2>&1 | FileCheck %s --check-prefix=MESH
// MESH: error: sharding annotations need a mesh (--tp N)
// RUN: echo '{"shardings": [{"sharding": "[{tp}, {}]"}]}' > %t.json
// RUN: not loom-opt '--loom-annotate-shardings=mesh=tp=2 shardings-file=%t.json' %s 2>&1 | FileCheck %s --check-prefix=FILE
// FILE: error: the shardings file '{{.*}}.json': entry 0 needs "parameter" (a regex) and "sharding"
// RUN: not loom-opt '--loom-annotate-shardings=mesh=tp=2 shardings-file=%t.missing' %s 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: error: cannot read the shardings file '{{.*}}.missing'
module {
  loom.parameter @w trainable : tensor<8x6xf32>
}
