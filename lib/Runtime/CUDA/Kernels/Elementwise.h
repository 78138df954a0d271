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

namespace loomrt {
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

//===----------------------------------------------------------------------===//
// Groups: several elementwise instructions in one launch
//===----------------------------------------------------------------------===//
//
// Instructions with the same program on operands of the same storage types
// and kinds (dense or scalar inputs only), which differ only in their
// operands' addresses and element counts, run as one launch of a group
// kernel (as PyTorch's multi-tensor apply runs an optimizer over many
// parameters): the AdamW updates of a model's ~100 small parameters are
// then a few launches. The members go to the kernel by value (one 4 KiB
// parameter, kElementwiseGroupWords words); each gets
// ceil(n / kElementwiseGroupChunk) blocks of 256 threads.

constexpr const char *kElementwiseGroupKernel = "loom_elementwise_group";
/// The group parameter's 64-bit words (4 KiB, the classic kernel parameter
/// limit, so no driver can refuse it).
constexpr int kElementwiseGroupWords = 512;
/// Elements per block.
constexpr int kElementwiseGroupChunk = 4096;
/// Members have fewer elements than this (32-bit indices with room).
constexpr int64_t kElementwiseGroupMaxElements =
    (int64_t(1) << 31) - (int64_t(1) << 25);

/// What decides whether two elementwise instructions can share a group
/// kernel (equal signatures: same source), or "" when `instruction` cannot
/// be a member (a kernel of another kind, one the CPU check rejects, f16,
/// strided inputs, no or too many elements, too many operands).
std::string elementwiseGroupSignature(const Instruction &instruction);

/// Words of one member's record: its operands' addresses, its element
/// count and path, its first block.
int elementwiseGroupRecordWords(const Instruction &instruction);
/// Members one launch takes.
int elementwiseGroupCapacity(const Instruction &instruction);

/// The CUDA C++ source of the group kernel of `instruction`'s signature.
std::string elementwiseGroupSource(const Instruction &instruction);

/// A run of consecutive kernel instructions, each a possible group member,
/// none of which reads or writes what another one writes: any order of
/// them computes the same, so the run's members of one signature form a
/// group that launches as one. The backend defers the members' launches
/// until `last`, the last member of any group, and then launches the
/// groups.
struct ElementwiseBatch {
  /// Instruction indices, two or more per group, in stream order; groups in
  /// the order of their first members.
  std::vector<std::vector<size_t>> groups;
  /// The run's other instructions between its first group member and
  /// `last`: they launch at once, without launching the deferred members
  /// first (which would split the groups).
  std::vector<size_t> singles;
  size_t last = 0;
};

/// The batches of a rank's instruction stream (ElementwiseGroups.cpp).
/// Runs hold at most kElementwiseBatchMaxRun instructions, which bounds the
/// work to plan them.
std::vector<ElementwiseBatch>
planElementwiseBatches(const std::vector<Instruction> &instructions);
constexpr size_t kElementwiseBatchMaxRun = 1024;

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
} // namespace loomrt

#endif // LOOM_LIB_RUNTIME_CUDA_KERNELS_ELEMENTWISE_H
