//===- GemmTuning.cpp - Timing cuBLASLt's algorithms for a matmul ---------===//
//
// Tuning (`loom-run --tune-matmuls`): the heuristic ranks cuBLASLt's
// algorithms by a model of the GPU, and its first is not always the
// fastest. `tune`, called by the backend before an instruction's first
// launch, times up to kTuneCandidates of them on the launch's own operands
// (each the best of kTuneRepeats launches after one to warm up) and keeps
// the fastest; another than the first only when it is at least
// kTuneMargin faster, so that timing noise does not trade algorithms that
// are as fast. Equal problems share one timing (MatmulTuning): the layers
// of a model get one algorithm per shape.
//
// The timed launches are the kernel's own (launchProducts), on the
// operands of the launch that follows, so what is timed is what will run;
// the own epilogue kernel, the same whatever the algorithm, is left out.
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace loomrt;
using namespace loomrt::cuda;

StatusOr<double> MatmulKernel::timeProducts(const LaunchContext &context,
                                            const MatmulOperands &ops,
                                            cudaEvent_t start,
                                            cudaEvent_t stop) {
  bool fused = false;
  if (!launchProducts(context, ops, fused)) {
    cudaGetLastError(); // a refused launch is not the device's error
    return std::numeric_limits<double>::infinity();
  }
  double best = std::numeric_limits<double>::infinity();
  for (int repeat = 0; repeat < kTuneRepeats; ++repeat) {
    if (Status s =
            cudaStatus(cudaEventRecord(start, context.stream), "matmul tuning");
        !s)
      return s;
    if (Status s = launchProducts(context, ops, fused); !s)
      return s;
    if (Status s =
            cudaStatus(cudaEventRecord(stop, context.stream), "matmul tuning");
        !s)
      return s;
    if (Status s = cudaStatus(cudaEventSynchronize(stop), "matmul tuning"); !s)
      return s;
    float ms = 0;
    if (Status s =
            cudaStatus(cudaEventElapsedTime(&ms, start, stop), "matmul tuning");
        !s)
      return s;
    best = std::min(best, double(ms) * 1e-3);
  }
  return best;
}

uint64_t MatmulKernel::tuningScratchBytes() const { return keptBytes_; }

Status MatmulKernel::tune(const LaunchContext &context,
                          const void *const *inputs, void *const *outputs,
                          MatmulTuning &tuning) {
  if (tuned_ || zeroBytes_ || calls_ == 0 ||
      context.workspaceBytes < workspaceBytes_)
    return Status::ok();
  tuned_ = true;
  const MatmulOperands ops = operands(inputs, outputs);
  const Slot slot = slotFor(ops);
  const std::string key = problemKey_ + slot.name;
  auto known = tuning.chosen.find(key);
  if (known != tuning.chosen.end() && known->second.checked) {
    *slot.algo = known->second.algo;
    ++tuning.instructions;
    tuning.heuristicSeconds += known->second.heuristicSeconds;
    tuning.chosenSeconds += known->second.chosenSeconds;
    return Status::ok();
  }
  // A choice read from a tuning file is launched once before it is
  // trusted: cuBLASLt may refuse it (a file from another setup); then the
  // problem is timed as a new one and the file is written again.
  const bool fromFile = known != tuning.chosen.end();

  // The timed launches write the outputs, and read an addend that may be
  // one of them (a residual added in place): such inputs are kept in the
  // backend's scratch, allocated with the kernels (tuningScratchBytes), so
  // that tuning allocates nothing while other ranks may be capturing.
  struct Kept {
    void *input;
    size_t offset;
    uint64_t bytes;
  };
  std::vector<Kept> kept;
  size_t used = 0;
  for (size_t i = 0; i < inputBytes_.size(); ++i) {
    auto in = reinterpret_cast<uintptr_t>(inputs[i]);
    bool overlapped = false;
    for (size_t o = 0; o < outputBytes_.size(); ++o) {
      auto out = reinterpret_cast<uintptr_t>(outputs[o]);
      overlapped = overlapped ||
                   (in < out + outputBytes_[o] && out < in + inputBytes_[i]);
    }
    if (!overlapped || inputBytes_[i] == 0)
      continue;
    kept.push_back({const_cast<void *>(inputs[i]), used, inputBytes_[i]});
    used += alignScratch(inputBytes_[i]);
  }
  // Operands that overlap where their plan offsets did not say so, or no
  // events to time with: not tuned (the launch keeps the heuristic's
  // algorithm, or the file's).
  cudaEvent_t start = nullptr, stop = nullptr;
  if (used > context.tuningScratchBytes ||
      cudaEventCreate(&start) != cudaSuccess ||
      cudaEventCreate(&stop) != cudaSuccess) {
    cudaGetLastError();
    if (start)
      cudaEventDestroy(start);
    if (fromFile)
      *slot.algo = known->second.algo;
    return Status::ok();
  }
  auto scratch = [&](const Kept &k) {
    return static_cast<char *>(context.tuningScratch) + k.offset;
  };
  for (const Kept &k : kept)
    if (Status s = cudaStatus(cudaMemcpyAsync(scratch(k), k.input, k.bytes,
                                              cudaMemcpyDeviceToDevice,
                                              context.stream),
                              "matmul tuning");
        !s) {
      cudaEventDestroy(start);
      cudaEventDestroy(stop);
      return s;
    }

  const cublasLtMatmulAlgo_t original = *slot.algo;
  // The time of each candidate (infinity: refused).
  auto timeAll = [&](const std::vector<cublasLtMatmulAlgo_t> &algos,
                     std::vector<double> &seconds) -> Status {
    seconds.clear();
    for (const cublasLtMatmulAlgo_t &algo : algos) {
      *slot.algo = algo;
      StatusOr<double> time = timeProducts(context, ops, start, stop);
      if (!time.isOk())
        return time.status();
      seconds.push_back(*time);
    }
    return Status::ok();
  };
  std::vector<cublasLtMatmulAlgo_t> algos;
  std::vector<double> seconds;
  Status failure = Status::ok();
  bool fileChoiceRuns = false;
  if (fromFile) {
    failure = timeAll({known->second.algo}, seconds);
    fileChoiceRuns = failure.isOk() && std::isfinite(seconds[0]);
  }
  if (failure && !fileChoiceRuns) {
    std::vector<cublasLtMatmulHeuristicResult_t> candidates;
    failure = heuristics(context, slot.desc, slot.alignment, kTuneCandidates,
                         candidates);
    for (const cublasLtMatmulHeuristicResult_t &candidate : candidates)
      algos.push_back(candidate.algo);
    if (failure)
      failure = timeAll(algos, seconds);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  *slot.algo = original;
  for (const Kept &k : kept)
    if (Status s = cudaStatus(cudaMemcpyAsync(k.input, scratch(k), k.bytes,
                                              cudaMemcpyDeviceToDevice,
                                              context.stream),
                              "matmul tuning");
        !s && failure.isOk())
      failure = s;
  if (!failure)
    return failure;

  if (fileChoiceRuns) {
    MatmulTuning::Choice &choice = known->second;
    choice.checked = true;
    *slot.algo = choice.algo;
    ++tuning.loaded;
    ++tuning.instructions;
    tuning.heuristicSeconds += choice.heuristicSeconds;
    tuning.chosenSeconds += choice.chosenSeconds;
    return Status::ok();
  }
  if (fromFile) {
    tuning.chosen.erase(known);
    ++tuning.refusedFromFile;
  }
  if (algos.empty())
    return Status::ok(); // nothing to choose from: as untuned
  // The heuristic's first unless another is clearly faster.
  size_t chosen = 0;
  for (size_t i = 1; i < seconds.size(); ++i)
    if (seconds[i] < seconds[chosen])
      chosen = i;
  if (std::isfinite(seconds[0]) &&
      !(seconds[chosen] < (1 - kTuneMargin) * seconds[0]))
    chosen = 0;
  if (!std::isfinite(seconds[chosen]))
    return Status::ok(); // cuBLASLt refused them all: the launch will say
  *slot.algo = algos[chosen];
  // Where the heuristic's first was refused, it costs what the choice does.
  MatmulTuning::Choice choice{
      algos[chosen], std::isfinite(seconds[0]) ? seconds[0] : seconds[chosen],
      seconds[chosen], true};
  tuning.chosen[key] = choice;
  ++tuning.problems;
  ++tuning.instructions;
  tuning.changed += chosen != 0;
  tuning.mostCandidates =
      std::max(tuning.mostCandidates, int64_t(algos.size()));
  tuning.heuristicSeconds += choice.heuristicSeconds;
  tuning.chosenSeconds += choice.chosenSeconds;
  return Status::ok();
}
