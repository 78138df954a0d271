//===- Elementwise.h - CUDA elementwise programs (internal) -----*- C++ -*-===//
//
// An `elementwise` instruction becomes CUDA C++ source (ElementwiseSource.cpp,
// no CUDA needed, so it can be tested anywhere), compiled by NVRTC for the
// device's architecture and loaded once per process (Elementwise.cpp).
//
// The source holds:
//  - loom_program(): the program on one element's input values (in the
//    compute type: f32 for bf16 values, which are rounded to bf16 after each
//    op, one byte for i1), returning the yielded values;
//  - extern "C" kElementwiseKernel(inputs..., outputs...): a grid-stride loop
//    over the output elements with the output shape and each input's
//    broadcast strides baked in as constants;
//  - when every input is dense or a scalar, kElementwiseVectorKernel: the
//    same with kElementwiseVector consecutive elements per thread loaded and
//    stored as one aligned vector (used when the element count and every
//    pointer allow it).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_RUNTIME_CUDA_KERNELS_ELEMENTWISE_H
#define LOOM_LIB_RUNTIME_CUDA_KERNELS_ELEMENTWISE_H

#include "loom/Runtime/Plan.h"

#include <string>
#include <vector>

namespace loom {
namespace runtime {
namespace cuda {

constexpr const char *kElementwiseKernel = "loom_elementwise";
constexpr const char *kElementwiseVectorKernel = "loom_elementwise_vector";
/// Elements per thread of the vector kernel.
constexpr int kElementwiseVector = 4;

/// The CUDA C++ source of a valid `elementwise` instruction (one the CPU
/// check accepted; f16 operands are not supported).
std::string elementwiseSource(const Instruction &instruction);

/// True when every input is dense (the outputs' element count) or a scalar:
/// the source then has the vector kernel.
bool elementwiseVectorizable(const Instruction &instruction);

/// NVRTC's options for a device of compute capability `computeCapability`
/// (e.g. 90): a cubin for sm_XX when NVRTC knows the architecture, else PTX
/// for the newest virtual architecture it has (the driver finishes it).
/// `cubin` says which.
Status nvrtcOptions(int computeCapability, std::vector<std::string> &options,
                    bool &cubin);

/// Compiles `source` with NVRTC for `computeCapability` into `image` (a cubin
/// or PTX, loadable with cudaLibraryLoadData). Needs no GPU. On failure the
/// Status holds NVRTC's log.
Status compileElementwise(const std::string &source, int computeCapability,
                          std::string &image);

} // namespace cuda
} // namespace runtime
} // namespace loom

#endif // LOOM_LIB_RUNTIME_CUDA_KERNELS_ELEMENTWISE_H
