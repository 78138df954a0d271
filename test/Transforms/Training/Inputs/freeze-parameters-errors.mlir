// Error cases of loom-freeze-parameters=freeze=. (run from
// freeze-parameters.mlir).

// expected-error @+1 {{the model has no trainable parameters (float initializers; --freeze '.' matches them all)}}
module {
  loom.parameter @w trainable : tensor<4xf32>
}

// -----

// Nothing was trainable to begin with.
// expected-error @+1 {{the model has no trainable parameters (float initializers; --freeze '.' matches them all)}}
module {
  loom.parameter @w : tensor<4xf32>
}
