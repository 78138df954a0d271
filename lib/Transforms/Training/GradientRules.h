//===- GradientRules.h - Reverse-mode rules of the loom ops -----*- C++ -*-===//
//
// The gradient rule of every differentiable loom op, written as loom ops so
// that backward graphs lower and run like forward ones. The rules are
// GradientOpInterface external models (GradientRules.cpp) that
// registerGradientExternalModels attaches; the loom-autodiff pass
// (Autodiff.cpp) calls them through the interface.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_TRANSFORMS_TRAINING_GRADIENTRULES_H
#define LOOM_LIB_TRANSFORMS_TRAINING_GRADIENTRULES_H

#include "loom/Dialect/Loom/IR/LoomInterfaces.h"
#include "loom/InitAllDialects.h"

#endif // LOOM_LIB_TRANSFORMS_TRAINING_GRADIENTRULES_H
