//===- CUDABackend.cpp - Kernels on one GPU
//--------------------------------===//
//
// One backend per executor (per rank): its own compute stream, cuBLASLt
// handle and workspace, arena and weights, so N thread ranks can share one
// GPU. Everything a step does is enqueued on the compute stream; the host
// only waits in `synchronize` (and for downloads), so kernel launches run
// ahead of the GPU. Communication runs on the communicator's stream, ordered
// against the compute stream with events (orderCommunication,
// waitOnDevice). Consecutive independent elementwise instructions with the
// same program launch as one group kernel (Kernels/Elementwise.h): their
// launches are deferred until the batch's last member, and any other call
// launches what was deferred first, so the order the executor sees is kept.
//
//===----------------------------------------------------------------------===//

#include "../Backend.h"
#include "CUDAKernels.h"
#include "Kernels/Elementwise.h"
#include "loom/Runtime/Communicator.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <thread>
#include <unistd.h>
#include <utility>

using namespace loomrt;
using namespace loomrt::cuda;

namespace {

/// cuBLASLt's scratch per executor: what its heuristics want for large
/// GEMMs on Hopper (the cuBLAS documentation recommends 32 MiB there).
constexpr size_t kWorkspaceBytes = size_t(32) << 20;

Status cudaFailure(const std::string &what, cudaError_t error) {
  return Status::error(what + " failed in CUDA: " + cudaGetErrorName(error) +
                       " (" + cudaGetErrorString(error) + ")");
}

std::string mebibytes(uint64_t bytes) {
  return std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB";
}

class CUDABackend : public Backend {
public:
  ~CUDABackend() override {
    cudaSetDevice(device_);
    if (compute_)
      cudaStreamSynchronize(compute_);
    kernels_.clear();
    for (cudaEvent_t event : starts_)
      cudaEventDestroy(event);
    for (cudaEvent_t event : ends_)
      cudaEventDestroy(event);
    for (void *block : blocks_)
      cudaFree(block);
    if (tuningScratch_)
      cudaFree(tuningScratch_);
    if (hostError_)
      cudaFreeHost(hostError_);
    if (graphExec_)
      cudaGraphExecDestroy(graphExec_);
    if (lt_)
      cublasLtDestroy(lt_);
    if (compute_)
      cudaStreamDestroy(compute_);
  }

  Status init(const ExecutorOptions &options) {
    std::string why;
    int count = cudaDeviceCount(&why);
    if (count == 0)
      return Status::error("--device cuda: " + why);
    if (options.cuda.gpu >= count)
      return Status::error(
          "--device cuda: there is no GPU " + std::to_string(options.cuda.gpu) +
          " (this process sees " + std::to_string(count) + ")");
    if (options.cuda.gpu >= 0) {
      if (cudaError_t error = cudaSetDevice(options.cuda.gpu))
        return cudaFailure("selecting GPU " + std::to_string(options.cuda.gpu),
                           error);
      device_ = options.cuda.gpu;
    } else if (cudaError_t error = cudaGetDevice(&device_)) {
      return cudaFailure("finding the current GPU", error);
    }
    int major = 0, minor = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device_);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device_);
    // Non-blocking: the legacy default stream must not serialize ranks that
    // share the GPU.
    if (cudaError_t error =
            cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking))
      return cudaFailure("creating the compute stream", error);
    if (cublasStatus_t status = cublasLtCreate(&lt_))
      return Status::error("cuBLASLt initialization failed: " +
                           std::string(cublasLtGetStatusName(status)));
    StatusOr<uint8_t *> workspace = allocate(kWorkspaceBytes);
    if (!workspace)
      return workspace.status().withContext("the cuBLASLt workspace");
    StatusOr<uint8_t *> error = allocate(sizeof(DeviceError));
    if (!error)
      return error.status();
    if (cudaError_t failure = cudaMallocHost(&hostError_, sizeof(DeviceError)))
      return cudaFailure("allocating pinned memory", failure);
    context_.stream = compute_;
    context_.lt = lt_;
    context_.workspace = *workspace;
    context_.workspaceBytes = kWorkspaceBytes;
    context_.error = reinterpret_cast<DeviceError *>(*error);
    context_.allowTF32 = options.cuda.allowTF32;
    context_.computeCapability = major * 10 + minor;
    groupElementwise_ = options.cuda.groupElementwise;
    tuneMatmuls_ = options.cuda.tunesMatmuls();
    tuningFile_ = options.cuda.tuningFile;
    if (!tuningFile_.empty()) {
      cudaDeviceProp properties{};
      cudaGetDeviceProperties(&properties, device_);
      tuningContext_ = tuningContext(context_.computeCapability,
                                     kWorkspaceBytes, properties.name);
      if (Status status = readTuningFile(tuningFile_, tuningContext_, tuning_,
                                         tuningWarning_);
          !status)
        return status.withContext("--tuning-file");
      // Written after runs: a folder it cannot be written to is found now,
      // before any work.
      std::string folder = tuningFile_.substr(
          0, tuningFile_.find_last_of('/') == std::string::npos
                 ? 0
                 : tuningFile_.find_last_of('/') + 1);
      if (access(folder.empty() ? "." : folder.c_str(), W_OK) != 0)
        return Status::error("--tuning-file: cannot write to the folder of " +
                             tuningFile_ + ": " + std::strerror(errno));
      // A file made elsewhere is rewritten after the first run.
      savedChanges_ = tuningWarning_.empty() ? 0 : -1;
    }
    cudaDeviceGetAttribute(&context_.multiprocessors,
                           cudaDevAttrMultiProcessorCount, device_);
    return clearError();
  }

  const char *name() const override { return "CUDA"; }

  void preparePlan(const std::vector<Instruction> &instructions) override {
    batches_.clear();
    if (groupElementwise_)
      batches_ = planElementwiseBatches(instructions);
    membership_.assign(instructions.size(), Membership());
    tuneOffered_.assign(instructions.size(), false);
    groupKernels_.clear();
    groupedKernels_ = groupLaunches_ = 0;
    for (size_t b = 0; b < batches_.size(); ++b) {
      groupKernels_.emplace_back(batches_[b].groups.size());
      for (size_t g = 0; g < batches_[b].groups.size(); ++g) {
        const std::vector<size_t> &group = batches_[b].groups[g];
        for (size_t index : group)
          membership_[index] = {int32_t(b), uint32_t(g)};
        const size_t capacity =
            size_t(elementwiseGroupCapacity(instructions[group[0]]));
        groupedKernels_ += group.size();
        groupLaunches_ += (group.size() + capacity - 1) / capacity;
      }
      for (size_t index : batches_[b].singles)
        membership_[index] = {int32_t(b), kSingle};
    }
    // NVRTC runs on the host: one thread per core compiles the plan's
    // elementwise programs before the kernels are created one by one.
    unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    cuda::compileElementwisePrograms(instructions, batches_,
                                     context_.computeCapability, cores);
  }

  Status prepare(size_t index, const Instruction &instruction) override {
    cudaSetDevice(device_);
    if (kernels_.size() <= index)
      kernels_.resize(index + 1);
    context_.instruction = int32_t(index);
    StatusOr<std::unique_ptr<CUDAKernel>> kernel =
        createCUDAKernel(context_, instruction);
    if (!kernel)
      return kernel.status();
    kernels_[index] = std::move(*kernel);
    if (std::string choice = kernels_[index]->epilogueChoice(); !choice.empty())
      ++epilogueChoices_[choice];
    if (tuneMatmuls_)
      if (Status status =
              growTuningScratch(kernels_[index]->tuningScratchBytes());
          !status)
        return status;
    // A group's kernel comes with its last member (any member stands for
    // the signature).
    if (index < membership_.size() && membership_[index].batch >= 0 &&
        membership_[index].group != kSingle) {
      const Membership m = membership_[index];
      const std::vector<size_t> &members =
          batches_[size_t(m.batch)].groups[m.group];
      if (members.back() == index) {
        auto group = createElementwiseGroup(context_, instruction);
        if (group) {
          groupKernels_[size_t(m.batch)][m.group] = std::move(*group);
        } else {
          // Its members launch one by one, as without groups (their own
          // kernels compiled).
          for (size_t member : members)
            membership_[member] = {int32_t(m.batch), kSingle};
          const size_t capacity = size_t(elementwiseGroupCapacity(instruction));
          groupedKernels_ -= members.size();
          groupLaunches_ -= (members.size() + capacity - 1) / capacity;
        }
      }
    }
    return Status::ok();
  }

  std::string epilogueSummary() const override {
    // cuBLASLt's epilogues first, then the own kernel's reasons.
    std::string cublas, own;
    int64_t inCublas = 0, inOwn = 0;
    for (const auto &[choice, count] : epilogueChoices_) {
      const bool isOwn = choice.rfind("own: ", 0) == 0;
      std::string &list = isOwn ? own : cublas;
      list += (list.empty() ? "" : ", ") + (isOwn ? choice.substr(5) : choice) +
              " " + std::to_string(count);
      (isOwn ? inOwn : inCublas) += count;
    }
    std::string summary;
    if (inCublas)
      summary = std::to_string(inCublas) + " in cuBLASLt (" + cublas + ")";
    if (inOwn)
      summary += (summary.empty() ? "" : ", ") + std::to_string(inOwn) +
                 " in the own kernel (" + own + ")";
    return summary;
  }

  std::string groupSummary() const override {
    if (groupedKernels_ == 0)
      return "";
    return std::to_string(groupedKernels_) + " elementwise kernels in " +
           std::to_string(groupLaunches_) +
           (groupLaunches_ == 1 ? " launch" : " launches");
  }

  void saveTuning() override {
    const int64_t changes = tuning_.problems + tuning_.refusedFromFile;
    if (tuningFile_.empty() || changes == savedChanges_)
      return;
    // A cache that cannot be written is not worth the run: said in the
    // summary, and tried again after the next run.
    Status status = writeTuningFile(tuningFile_, tuningContext_, tuning_);
    saveWarning_ = status ? "" : status.message();
    if (status)
      savedChanges_ = changes;
  }

  std::string tuningSummary() const override {
    if (!tuneMatmuls_ || tuning_.instructions == 0)
      return tuningWarning_ +
             (tuningWarning_.empty() || saveWarning_.empty() ? "" : "; ") +
             saveWarning_;
    std::string summary = std::to_string(tuning_.instructions) + " matmuls";
    if (tuning_.problems > 0)
      summary += ", " + std::to_string(tuning_.problems) +
                 " problems timed with up to " +
                 std::to_string(tuning_.mostCandidates) +
                 " cuBLASLt algorithms (" + std::to_string(tuning_.changed) +
                 " moved off the heuristic's first)";
    if (tuning_.loaded > 0)
      summary += ", " + std::to_string(tuning_.loaded) +
                 " problems read from " + tuningFile_;
    if (tuning_.refusedFromFile > 0)
      summary += ", " + std::to_string(tuning_.refusedFromFile) +
                 " algorithms kept in " + tuningFile_ +
                 " refused here (timed again)";
    char times[96];
    const double before = tuning_.heuristicSeconds * 1e3,
                 after = tuning_.chosenSeconds * 1e3;
    std::snprintf(times, sizeof times, "%.3f ms -> %.3f ms (%+.1f%%)", before,
                  after, before > 0 ? 100 * (after - before) / before : 0.0);
    summary += std::string("; their time in a step ") + times;
    if (!tuningWarning_.empty())
      summary += "; " + tuningWarning_;
    if (!saveWarning_.empty())
      summary += "; " + saveWarning_;
    return summary;
  }

  StatusOr<uint8_t *> allocateArena(uint64_t bytes) override {
    StatusOr<uint8_t *> arena = allocate(bytes);
    if (!arena)
      return arena.status().withContext("the arena");
    return arena;
  }

  StatusOr<uint8_t *> allocate(uint64_t bytes) override {
    cudaSetDevice(device_);
    void *block = nullptr;
    // cudaMalloc aligns to 256 bytes, more than any kernel needs.
    if (cudaError_t error =
            cudaMalloc(&block, std::max<uint64_t>(bytes, 256))) {
      size_t free = 0, total = 0;
      cudaGetLastError();
      cudaMemGetInfo(&free, &total);
      return Status::error("cannot allocate " + mebibytes(bytes) + " on GPU " +
                           std::to_string(device_) + " (" + mebibytes(free) +
                           " of " + mebibytes(total) +
                           " free): " + cudaGetErrorString(error));
    }
    blocks_.push_back(block);
    return static_cast<uint8_t *>(block);
  }

  bool addressesHostMemory() const override { return false; }

  Status upload(void *destination, const void *source,
                uint64_t bytes) override {
    if (Status status = launchDeferred(); !status)
      return status;
    cudaSetDevice(device_);
    // From pageable memory the call returns once the source is staged, so
    // the caller may reuse it; the copy is ordered before later launches.
    if (cudaError_t error = cudaMemcpyAsync(destination, source, bytes,
                                            cudaMemcpyHostToDevice, compute_))
      return cudaFailure(
          "copying " + std::to_string(bytes) + " bytes to the GPU", error);
    return Status::ok();
  }

  Status download(void *destination, const void *source,
                  uint64_t bytes) override {
    if (Status status = launchDeferred(); !status)
      return status;
    cudaSetDevice(device_);
    cudaError_t error = cudaMemcpyAsync(destination, source, bytes,
                                        cudaMemcpyDeviceToHost, compute_);
    if (!error)
      error = cudaStreamSynchronize(compute_);
    if (error)
      return cudaFailure(
          "copying " + std::to_string(bytes) + " bytes from the GPU", error);
    return Status::ok();
  }

  Status copy(void *destination, const void *source, uint64_t bytes) override {
    if (Status status = launchDeferred(); !status)
      return status;
    cudaSetDevice(device_);
    if (cudaError_t error = cudaMemcpyAsync(destination, source, bytes,
                                            cudaMemcpyDeviceToDevice, compute_))
      return cudaFailure(
          "copying " + std::to_string(bytes) + " bytes on the GPU", error);
    return Status::ok();
  }

  Status launch(size_t index, const Instruction &instruction,
                const void *const *inputs, void *const *outputs) override {
    const Membership m =
        index < membership_.size() ? membership_[index] : Membership();
    // A run's instruction of no group runs now: it is independent of the
    // members whose launches wait.
    if (m.batch >= 0 && m.group == kSingle && deferredBatch_ == m.batch)
      return launchOne(index, inputs, outputs);
    if (m.batch < 0 || m.group == kSingle) {
      if (Status status = launchDeferred(); !status)
        return status;
      return launchOne(index, inputs, outputs);
    }
    // A group member: kept until the batch's last member is launched.
    if (deferredBatch_ != m.batch) {
      if (Status status = launchDeferred(); !status)
        return status;
      deferredBatch_ = m.batch;
      deferred_.assign(batches_[size_t(m.batch)].groups.size(), {});
    }
    GroupMember member;
    member.inputs.assign(inputs, inputs + instruction.inputs.size());
    member.outputs.assign(outputs, outputs + instruction.outputs.size());
    member.elements = instruction.outputs[0].elements();
    deferred_[m.group].push_back({index, std::move(member)});
    if (index == batches_[size_t(m.batch)].last)
      return launchDeferred();
    return Status::ok();
  }

  Status synchronize(size_t &failed) override {
    // Launch errors are reported after the stream has drained and the flag
    // is clear, so that the next run starts on an idle device.
    keepError(launchDeferred());
    Status kept = std::exchange(deferredError_, Status::ok());
    size_t unused = failed;
    Status status = drain(kept.isOk() ? failed : unused);
    return kept.isOk() ? status : kept;
  }

  /// Waits for the stream; reads and clears the kernels' error flag.
  Status drain(size_t &failed) {
    cudaSetDevice(device_);
    // The flag comes back with the step (pinned memory, same stream).
    if (cudaError_t error =
            cudaMemcpyAsync(hostError_, context_.error, sizeof(DeviceError),
                            cudaMemcpyDeviceToHost, compute_))
      return cudaFailure("reading the kernels' error flag", error);
    if (cudaError_t error = cudaStreamSynchronize(compute_))
      return cudaFailure("the step", error);
    if (hostError_->code == DeviceError::None)
      return Status::ok();
    DeviceError found = *hostError_;
    if (Status status = clearError(); !status)
      return status;
    failed = size_t(found.instruction);
    // The CPU backend's words for the same errors.
    if (found.code == DeviceError::IndexOutOfRange)
      return Status::error("index " + std::to_string(found.value) +
                           " at position " + std::to_string(found.position) +
                           " is outside [-" + std::to_string(found.bound) +
                           ", " + std::to_string(found.bound) + ")");
    if (found.code == DeviceError::LabelOutOfRange)
      return Status::error("label " + std::to_string(found.value) +
                           " of sample " + std::to_string(found.position) +
                           " is outside [0, " + std::to_string(found.bound) +
                           ")");
    return Status::error("a kernel reported error code " +
                         std::to_string(found.code));
  }

  void orderCommunication(Communicator &comm) override {
    keepError(launchDeferred());
    comm.orderAfter(compute_);
  }

  // Deferred members need not launch first: none of them touches what the
  // awaited operation does (the executor would have waited at its turn),
  // so the wait only orders them later.
  bool waitOnDevice(CommEvent &event) override {
    return event.waitOnStream(compute_);
  }

  void startProfile(size_t instructions) override {
    cudaSetDevice(device_);
    while (starts_.size() < instructions) {
      cudaEvent_t start = nullptr, end = nullptr;
      cudaEventCreate(&start);
      cudaEventCreate(&end);
      starts_.push_back(start);
      ends_.push_back(end);
    }
    recorded_.assign(starts_.size(), false);
    shared_.clear();
  }

  std::vector<double> instructionSeconds() override {
    std::vector<double> seconds(recorded_.size(), 0.0);
    for (size_t i = 0; i < recorded_.size(); ++i) {
      float ms = 0;
      if (recorded_[i] &&
          cudaEventElapsedTime(&ms, starts_[i], ends_[i]) == cudaSuccess)
        seconds[i] = ms * 1e-3;
    }
    // A group's time, shared by its members in proportion to their sizes.
    for (const SharedTime &shared : shared_) {
      const double total = seconds[shared.recorded];
      double elements = 0;
      for (const auto &[index, count] : shared.members)
        elements += double(count);
      for (const auto &[index, count] : shared.members)
        seconds[index] = total * double(count) / elements;
    }
    shared_.clear();
    // Only the run that asked is timed.
    for (cudaEvent_t event : starts_)
      cudaEventDestroy(event);
    for (cudaEvent_t event : ends_)
      cudaEventDestroy(event);
    starts_.clear();
    ends_.clear();
    recorded_.clear();
    return seconds;
  }

  uint64_t measureArena() override { return 0; }

  // Thread-local capture: other thread ranks of the process may allocate
  // or synchronize meanwhile; only this thread's calls must be capturable.
  Status beginCapture() override {
    if (Status status = launchDeferred(); !status)
      return status;
    cudaSetDevice(device_);
    if (cudaError_t error =
            cudaStreamBeginCapture(compute_, cudaStreamCaptureModeThreadLocal))
      return cudaFailure("starting to capture a CUDA graph", error);
    capturing_ = true;
    return Status::ok();
  }

  Status endCapture(bool keep) override {
    Status deferred = launchDeferred();
    keep = keep && deferred.isOk();
    cudaSetDevice(device_);
    cudaGraph_t graph = nullptr;
    cudaError_t error = cudaStreamEndCapture(compute_, &graph);
    capturing_ = false;
    // A refused call during the capture is reported by the call and again
    // here; neither is the device's (sticky) error.
    cudaGetLastError();
    if (!error && keep)
      error = cudaGraphInstantiate(&graphExec_, graph, 0);
    if (graph)
      cudaGraphDestroy(graph);
    if (error) {
      cudaGetLastError();
      graphExec_ = nullptr;
      return cudaFailure("capturing a step as a CUDA graph", error);
    }
    return deferred;
  }

  Status replay() override {
    cudaSetDevice(device_);
    if (!graphExec_)
      return Status::error("no CUDA graph was captured");
    if (cudaError_t error = cudaGraphLaunch(graphExec_, compute_))
      return cudaFailure("launching the step's CUDA graph", error);
    return Status::ok();
  }

private:
  /// Enqueues kernel instruction `index`, timed when profiling.
  Status launchOne(size_t index, const void *const *inputs,
                   void *const *outputs) {
    // The current device is per host thread; whoever calls may have another.
    cudaSetDevice(device_);
    context_.instruction = int32_t(index);
    // Tuning waits for the device, which a capture cannot: a kernel first
    // launched in a capture keeps its algorithm for good, so that replays
    // and kernel-by-kernel runs compute alike. It is not part of the
    // instruction's time.
    if (tuneMatmuls_ && index < tuneOffered_.size() && !tuneOffered_[index]) {
      tuneOffered_[index] = true;
      if (!capturing_)
        if (Status status =
                kernels_[index]->tune(context_, inputs, outputs, tuning_);
            !status)
          return status.withContext("tuning");
    }
    bool timed = index < starts_.size();
    if (timed)
      cudaEventRecord(starts_[index], compute_);
    Status status = kernels_[index]->launch(context_, inputs, outputs);
    if (timed) {
      cudaEventRecord(ends_[index], compute_);
      recorded_[index] = true;
    }
    return checkLaunch(status);
  }

  /// Launch-configuration errors are reported here; faults only at the
  /// next synchronization.
  static Status checkLaunch(Status status) {
    if (!status)
      return status;
    if (cudaError_t error = cudaPeekAtLastError())
      return cudaFailure("launching the kernel", error);
    return Status::ok();
  }

  /// Launches the deferred members of the current batch: each group's as
  /// one (a group with one deferred member, when something interrupted the
  /// batch, as its own kernel).
  Status launchDeferred() {
    if (deferredBatch_ < 0)
      return Status::ok();
    const size_t batch = size_t(deferredBatch_);
    deferredBatch_ = -1;
    std::vector<std::vector<Deferred>> deferred = std::move(deferred_);
    deferred_.clear();
    for (size_t g = 0; g < deferred.size(); ++g) {
      std::vector<Deferred> &members = deferred[g];
      if (members.empty())
        continue;
      if (members.size() == 1) {
        GroupMember &member = members[0].member;
        if (Status status = launchOne(members[0].index, member.inputs.data(),
                                      member.outputs.data());
            !status)
          return status;
        continue;
      }
      cudaSetDevice(device_);
      const size_t first = members[0].index;
      context_.instruction = int32_t(first);
      std::vector<GroupMember> operands;
      for (Deferred &d : members)
        operands.push_back(std::move(d.member));
      bool timed = first < starts_.size();
      if (timed)
        cudaEventRecord(starts_[first], compute_);
      Status status = groupKernels_[batch][g]->launch(context_, operands);
      if (timed) {
        cudaEventRecord(ends_[first], compute_);
        recorded_[first] = true;
        SharedTime shared{first, {}};
        for (size_t k = 0; k < members.size(); ++k)
          shared.members.push_back({members[k].index, operands[k].elements});
        shared_.push_back(std::move(shared));
      }
      if (Status checked = checkLaunch(status); !checked)
        return checked.withContext(
            "the group of " + std::to_string(members.size()) +
            " elementwise instructions from instruction " +
            std::to_string(first));
    }
    return Status::ok();
  }

  /// Errors of calls that cannot return one, for the next synchronize.
  void keepError(Status status) {
    if (!status && deferredError_.isOk())
      deferredError_ = std::move(status);
  }

  Status clearError() {
    if (cudaError_t error =
            cudaMemsetAsync(context_.error, 0, sizeof(DeviceError), compute_))
      return cudaFailure("clearing the kernels' error flag", error);
    return Status::ok();
  }

  int device_ = 0;
  cudaStream_t compute_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  LaunchContext context_;
  DeviceError *hostError_ = nullptr;
  std::vector<std::unique_ptr<CUDAKernel>> kernels_;
  std::vector<void *> blocks_;
  std::vector<cudaEvent_t> starts_, ends_;
  std::vector<bool> recorded_;
  /// The step's launches, once captured (CUDAOptions::graphs).
  cudaGraphExec_t graphExec_ = nullptr;

  /// CUDAOptions::tuneMatmuls; whether a CUDA graph is being captured
  /// (nothing is tuned then); what tuning found.
  bool tuneMatmuls_ = false, capturing_ = false;
  MatmulTuning tuning_;
  /// CUDAOptions::tuningFile, the context it must have been made in,
  /// why it was not used and why it could not be written (empty when
  /// neither).
  std::string tuningFile_, tuningContext_, tuningWarning_, saveWarning_;
  /// tuning_.problems + tuning_.refusedFromFile when the file was last
  /// written (-1: it must be written).
  int64_t savedChanges_ = 0;
  /// Per instruction: whether its kernel was offered tuning already.
  std::vector<bool> tuneOffered_;
  /// LaunchContext::tuningScratch's block.
  void *tuningScratch_ = nullptr;

  /// Makes the tuning scratch at least `bytes` (when kernels are created).
  Status growTuningScratch(uint64_t bytes) {
    if (bytes <= context_.tuningScratchBytes)
      return Status::ok();
    if (tuningScratch_)
      cudaFree(tuningScratch_);
    tuningScratch_ = nullptr;
    context_.tuningScratch = nullptr;
    context_.tuningScratchBytes = 0;
    if (cudaError_t error = cudaMalloc(&tuningScratch_, bytes))
      return cudaFailure(
          "allocating " + mebibytes(bytes) + " for --tune-matmuls", error);
    context_.tuningScratch = tuningScratch_;
    context_.tuningScratchBytes = bytes;
    return Status::ok();
  }

  // Elementwise groups (CUDAOptions::groupElementwise).
  bool groupElementwise_ = true;
  std::vector<ElementwiseBatch> batches_;
  /// Membership::group of a run's instruction that is in no group.
  static constexpr uint32_t kSingle = ~0u;
  struct Membership {
    int32_t batch = -1;
    uint32_t group = 0;
  };
  /// Per instruction: its batch and group, if any.
  std::vector<Membership> membership_;
  /// Per batch, per group.
  std::vector<std::vector<std::unique_ptr<CUDAKernelGroup>>> groupKernels_;
  /// The batch whose members' launches wait (-1: none), per group.
  struct Deferred {
    size_t index;
    GroupMember member;
  };
  int32_t deferredBatch_ = -1;
  std::vector<std::vector<Deferred>> deferred_;
  Status deferredError_ = Status::ok();
  /// Profiling: a group launch timed on `recorded`'s events, for `members`
  /// (instruction, elements) to share.
  struct SharedTime {
    size_t recorded;
    std::vector<std::pair<size_t, int64_t>> members;
  };
  std::vector<SharedTime> shared_;
  /// For epilogueSummary: how many matmuls chose each epilogue path
  /// (MatmulKernel::epilogueChoice).
  std::map<std::string, int64_t> epilogueChoices_;
  /// For groupSummary: the members of all groups, and the launches a step
  /// makes for them.
  size_t groupedKernels_ = 0, groupLaunches_ = 0;
};

} // namespace

bool loomrt::haveCUDA() { return true; }

int loomrt::cudaDeviceCount(std::string *why) {
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    cudaGetLastError(); // not sticky: no device is not a broken context
    if (why) {
      int runtime = 0;
      cudaRuntimeGetVersion(&runtime);
      std::string cuda = std::to_string(runtime / 1000) + "." +
                         std::to_string(runtime % 1000 / 10);
      *why = error == cudaErrorNoDevice ? std::string("no CUDA device")
             : error == cudaErrorInsufficientDriver
                 ? "no NVIDIA driver that runs CUDA " + cuda +
                       " (no GPU on this machine?)"
                 : std::string("no usable CUDA device (") +
                       cudaGetErrorString(error) + ")";
    }
    return 0;
  }
  if (count == 0 && why)
    *why = "no CUDA device";
  return count;
}

std::vector<std::string> loomrt::describeCUDADevices() {
  std::vector<std::string> lines;
  int count = cudaDeviceCount();
  for (int device = 0; device < count; ++device) {
    cudaDeviceProp properties;
    if (cudaGetDeviceProperties(&properties, device) != cudaSuccess)
      continue;
    char line[512];
    std::snprintf(line, sizeof line,
                  "GPU %d: %s, %.1f GiB, compute capability %d.%d", device,
                  properties.name,
                  double(properties.totalGlobalMem) / double(1ull << 30),
                  properties.major, properties.minor);
    lines.push_back(line);
  }
  return lines;
}

StatusOr<std::unique_ptr<Backend>>
loomrt::createCUDABackend(const ExecutorOptions &options) {
  auto backend = std::make_unique<CUDABackend>();
  if (Status status = backend->init(options); !status)
    return status;
  return std::unique_ptr<Backend>(std::move(backend));
}
