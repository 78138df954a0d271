//===- CUDAKernels.h - The CUDA backend's kernels (internal) ----*- C++ -*-===//
//
// The CUDA backend runs the same kernel kinds as the CPU backend, on one
// device. Each instruction of a plan becomes a CUDAKernel when an executor is
// created: that is where its operands are validated (by the CPU kernel's own
// check, so that both backends accept exactly the same plans, then by the
// restrictions of the CUDA implementation), and where everything that can be
// decided ahead is decided (cuBLASLt descriptors and algorithm, the compiled
// elementwise program). `launch` then only enqueues work on a stream.
//
// Errors that only the data can show (a gather index out of range) are
// recorded by the kernels in a DeviceError in device memory; the executor
// reads it after the step and names the instruction.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_RUNTIME_CUDA_CUDAKERNELS_H
#define LOOM_LIB_RUNTIME_CUDA_CUDAKERNELS_H

#include "loom/Runtime/Plan.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace loomrt {
namespace cuda {

/// Written by a kernel (first error wins: atomicCAS on `code`) when its data
/// is invalid; zeroed by the executor before each step.
struct DeviceError {
  enum Code : int32_t { None = 0, IndexOutOfRange = 1, LabelOutOfRange = 2 };
  int32_t code;
  /// The instruction that failed (LaunchContext::instruction).
  int32_t instruction;
  /// IndexOutOfRange: the index, its position (row-major, in the index
  /// tensor) and the size of the indexed dimension (negative indices count
  /// from its end). LabelOutOfRange: a cross-entropy label, its sample and
  /// the class count.
  int64_t value;
  int64_t position;
  int64_t bound;
};

/// What every launch of one executor shares.
struct LaunchContext {
  cudaStream_t stream = nullptr;
  cublasLtHandle_t lt = nullptr;
  /// Device scratch for cuBLASLt (and any kernel that needs some), valid for
  /// the duration of one launch.
  void *workspace = nullptr;
  size_t workspaceBytes = 0;
  /// Device memory; see DeviceError.
  DeviceError *error = nullptr;
  /// The index of the instruction being launched (for DeviceError).
  int32_t instruction = 0;
  /// f32 GEMMs may use TF32 tensor cores (`loom-run --allow-tf32`).
  bool allowTF32 = false;
  /// The device's compute capability, e.g. 90 (for NVRTC's target).
  int computeCapability = 0;
  /// The device's multiprocessor count (for launch geometry; 0: unknown).
  int multiprocessors = 0;
  /// Device scratch for CUDAKernel::tune, the largest tuningScratchBytes of
  /// the executor's kernels.
  void *tuningScratch = nullptr;
  size_t tuningScratchBytes = 0;
};

/// What tuning found (CUDAOptions::tuneMatmuls), shared by the kernels
/// of one executor. Equal problems (same shapes, types, layouts, epilogue
/// and operand alignment) are timed once and share the algorithm chosen.
struct MatmulTuning {
  /// A problem's algorithm, and its time (one launch) with the heuristic's
  /// first algorithm and with the chosen one.
  struct Choice {
    cublasLtMatmulAlgo_t algo;
    double heuristicSeconds, chosenSeconds;
    /// Known to run here: timed by this process, or read from a tuning
    /// file and launched once.
    bool checked;
  };
  /// By problem key.
  std::map<std::string, Choice> chosen;
  /// Distinct problems timed, and those where an algorithm other than the
  /// heuristic's first was faster; instructions tuned; the most algorithms
  /// one problem had to choose from.
  int64_t problems = 0, changed = 0, instructions = 0, mostCandidates = 0;
  /// Summed over the instructions tuned: their time with the heuristic's
  /// first algorithm, and with the chosen one (one launch each).
  double heuristicSeconds = 0, chosenSeconds = 0;
  /// Problems whose choice came from a tuning file (readTuningFile) and
  /// ran; those whose choice from the file cuBLASLt refused (timed again,
  /// and the file must be written again).
  int64_t loaded = 0, refusedFromFile = 0;
};

/// What a tuning file must have been made with to be used here: the
/// cuBLASLt version, compute capability, cuBLASLt workspace and GPU
/// (GemmTuningFile.cpp).
std::string tuningContext(int computeCapability, size_t workspaceBytes,
                          const std::string &gpuName);
/// Adds the choices kept in `path` to `tuning` (not yet `checked`). A
/// missing file is no error; one made in another `context` is not used
/// (`warning` says so); an unreadable or malformed one is an error naming
/// the file (and line).
Status readTuningFile(const std::string &path, const std::string &context,
                      MatmulTuning &tuning, std::string &warning);
/// Writes every choice of `tuning` to `path` (replacing it whole).
Status writeTuningFile(const std::string &path, const std::string &context,
                       const MatmulTuning &tuning);

/// One instruction, ready to launch.
class CUDAKernel {
public:
  virtual ~CUDAKernel();
  /// Enqueues the instruction on `context.stream`; `inputs[i]` and
  /// `outputs[i]` are device pointers to the instruction's operands (dense,
  /// row-major). Returns only launch errors (asynchronous errors surface at
  /// the next synchronization).
  virtual Status launch(const LaunchContext &context, const void *const *inputs,
                        void *const *outputs) = 0;
  /// Times the kernel's alternatives on the operands of the launch that
  /// follows, and keeps the fastest (matmuls: cuBLASLt's candidate
  /// algorithms). The backend calls it before that launch when tuning is on
  /// and no CUDA graph is being captured: it synchronizes the stream, and
  /// may write the outputs (the launch then overwrites them), but leaves the
  /// inputs as they were. Kernels with nothing to choose do nothing.
  virtual Status tune(const LaunchContext & /*context*/,
                      const void *const * /*inputs*/, void *const * /*outputs*/,
                      MatmulTuning & /*tuning*/) {
    return Status::ok();
  }
  /// The device scratch `tune` needs (LaunchContext::tuningScratch), which
  /// the backend allocates when it creates the kernels: tuning allocates
  /// nothing, so it cannot disturb another thread rank's graph capture.
  virtual uint64_t tuningScratchBytes() const { return 0; }
  /// Where a matmul's epilogue runs, as chosen when the kernel was created
  /// (a launch with misaligned pointers still falls back), for the
  /// backend's summary: one of cuBLASLt's epilogues ("GELU_AUX_BIAS"), or
  /// why the own kernel runs it ("own: batched"); "" without an epilogue
  /// (and for other kernel kinds).
  virtual std::string epilogueChoice() const { return ""; }
};

/// Validates `instruction` for the CUDA backend and prepares it. `context`
/// has the stream, cuBLASLt handle and compute capability the kernel will
/// be launched with. Fails (saying why) on kernels or operand dtypes this
/// backend does not implement.
StatusOr<std::unique_ptr<CUDAKernel>>
createCUDAKernel(const LaunchContext &context, const Instruction &instruction);

/// Every kernel name the CUDA backend implements, sorted.
std::vector<std::string> cudaKernelNames();

/// A member of a kernel group: one instruction's operands and element count.
struct GroupMember {
  std::vector<const void *> inputs;
  std::vector<void *> outputs;
  int64_t elements = 0;
};

/// Several instructions of one kind launched together (elementwise groups:
/// Kernels/Elementwise.h).
class CUDAKernelGroup {
public:
  virtual ~CUDAKernelGroup();
  /// Enqueues every member on `context.stream`, as their own kernels would
  /// compute them. Returns only launch errors.
  virtual Status launch(const LaunchContext &context,
                        const std::vector<GroupMember> &members) = 0;
};

/// The group kernel of the elementwise instructions whose group signature
/// is `representative`'s.
StatusOr<std::unique_ptr<CUDAKernelGroup>>
createElementwiseGroup(const LaunchContext &context,
                       const Instruction &representative);

struct ElementwiseBatch;

/// Compiles the distinct programs of `instructions`' elementwise kernels,
/// and of the groups of `batches`, that the process-wide cache lacks, on up
/// to `threads` threads, so that createCUDAKernel and
/// createElementwiseGroup then only load them. Compile errors are kept for
/// those to report. Needs no GPU. Returns how many programs it compiled
/// (Elementwise.cpp).
size_t compileElementwisePrograms(const std::vector<Instruction> &instructions,
                                  const std::vector<ElementwiseBatch> &batches,
                                  int computeCapability, unsigned threads);

} // namespace cuda
} // namespace loomrt

#endif // LOOM_LIB_RUNTIME_CUDA_CUDAKERNELS_H
