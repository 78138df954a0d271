// loom-freeze-parameters=freeze=( (run from freeze-parameters.mlir).

// expected-error @+1 {{--freeze '(' is not a valid regular expression}}
module {
  loom.parameter @w trainable : tensor<4xf32>
}
