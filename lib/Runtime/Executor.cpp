//===- Executor.cpp - Runs one rank of a plan -----------------------------===//
//
// The executor is device-neutral: it resolves every operand to backend
// memory (the arena, or a weight), launches kernels through the Backend and
// orders communication against them. Memory and kernels are the backend's
// (CPU/CPUBackend.cpp, CUDA/CUDABackend.cpp).
//
//===----------------------------------------------------------------------===//

#include "loom/Runtime/Executor.h"
#include "Backend.h"
#include "CollectiveInstructions.h"
#include "OperandSpans.h"
#include "loom/Analysis/LinkModel.h"
#include "loom/Runtime/Communicator.h"
#include "loom/Runtime/TensorIO.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>

using namespace loomrt;

namespace {

std::string describe(const Instruction &instruction, size_t index) {
  std::string text =
      "instruction " + std::to_string(index) + " (" + instruction.kernel;
  if (instruction.line)
    text += ", plan line " + std::to_string(instruction.line);
  if (!instruction.loc.empty())
    text += ", at " + instruction.loc;
  return text + ")";
}

/// Bytes an instruction reads or writes: an arena range, or a whole weight.
Span spanOf(const TensorRef &ref, const Plan &plan) {
  if (ref.space == TensorRef::Space::Weight) {
    // Weights are disjoint in the data section; their offsets order them.
    const Weight &weight = plan.weights[ref.offset];
    return {true, weight.offset,
            weight.offset + std::max<uint64_t>(1, weight.bytes)};
  }
  return {false, ref.offset, ref.offset + std::max<uint64_t>(1, ref.bytes())};
}

/// A communication operation in flight and the bytes it still uses.
struct Pending {
  size_t index;
  std::shared_ptr<CommEvent> event;
  std::vector<Span> reads, writes;
  /// Its entry in the run's trace, or -1.
  int64_t traced = -1;
};

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

uint64_t roundUp(uint64_t bytes, uint64_t alignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

} // namespace

Executor::Executor() = default;

StatusOr<std::unique_ptr<Executor>>
Executor::create(std::shared_ptr<const Plan> plan, int rank,
                 std::shared_ptr<Communicator> world,
                 const ExecutorOptions &options) {
  if (rank < 0 || size_t(rank) >= plan->ranks.size())
    return Status::error("the plan has no rank " + std::to_string(rank) +
                         " (it has " + std::to_string(plan->ranks.size()) +
                         ")");
  std::unique_ptr<Executor> executor(new Executor());
  executor->plan_ = plan;
  executor->program_ = &plan->ranks[rank];
  executor->device_ = options.device;
  executor->graphs_ = options.device == Device::CUDA && options.cuda.graphs;
  executor->tuneFirst_ =
      options.device == Device::CUDA && options.cuda.tunesMatmuls();
  if (options.device == Device::CUDA) {
    StatusOr<std::unique_ptr<Backend>> backend = createCUDABackend(options);
    if (!backend)
      return backend.status();
    executor->backend_ = std::move(*backend);
  } else {
    executor->backend_ = createCPUBackend();
  }
  Backend &backend = *executor->backend_;
  const RankProgram &program = *executor->program_;
  bool communicates = false;
  backend.preparePlan(program.instructions);
  for (size_t index = 0; index < program.instructions.size(); ++index) {
    const Instruction &instruction = program.instructions[index];
    if (instruction.kind == Instruction::Kind::Collective) {
      communicates = true;
      Status status = checkCollective(*plan, rank, instruction);
      if (!status)
        return status.withContext(describe(instruction, index));
      continue;
    }
    if (Status status = backend.prepare(index, instruction); !status)
      return status.withContext(describe(instruction, index));
  }

  executor->report_.launchGroups = backend.groupSummary();
  executor->report_.matmulEpilogues = backend.epilogueSummary();

  // Communication is posted and waited for by the host between launches,
  // which one recorded graph cannot do.
  if (communicates && executor->graphs_) {
    executor->graphs_ = false;
    executor->report_.cudaGraphs =
        "off: the rank communicates (its collectives are posted by the host)";
  }
  if (communicates) {
    int ranks = int(plan->ranks.size());
    if (!world)
      return Status::error(
          "rank " + std::to_string(rank) + " of the plan communicates with " +
          std::to_string(ranks - 1) + " other rank(s): run it with --ranks " +
          std::to_string(ranks) + " or under mpirun -np " +
          std::to_string(ranks));
    if (world->size() != ranks || world->rank() != rank)
      return Status::error("the plan has " + std::to_string(ranks) +
                           " ranks, but this is rank " +
                           std::to_string(world->rank()) + " of " +
                           std::to_string(world->size()));
    if (world->onDevice() != (options.device == Device::CUDA))
      return Status::error(
          std::string("the communicator moves ") +
          (world->onDevice() ? "device" : "host") + " buffers, but rank " +
          std::to_string(rank) + " runs on the " + backend.name() +
          (world->onDevice() ? "" : " (wrap it with wrapForDevice)"));
    // In group-id order on every rank: the lowest group not yet made has
    // all its members asking for it, so engines where making a group is
    // collective cannot deadlock.
    executor->groups_.resize(plan->groups.size());
    for (size_t id = 0; id < plan->groups.size(); ++id) {
      const std::vector<int> &members = plan->groups[id];
      if (!std::binary_search(members.begin(), members.end(), rank))
        continue;
      StatusOr<std::shared_ptr<Communicator>> group = world->group(members);
      if (!group)
        return group.status().withContext("making group " + std::to_string(id));
      executor->groups_[id] = *group;
    }
    executor->world_ = std::move(world);
  }

  StatusOr<uint8_t *> arena = backend.allocateArena(program.arenaBytes);
  if (!arena)
    return arena.status();
  executor->arena_ = *arena;

  // A rank holds only the weights its program uses (rankHeldWeights), so
  // that tensor parallelism divides the parameters' memory. State weights
  // are copied out of the (shared, immutable) plan so that several
  // executors of one plan train independently; read-only weights are used
  // in place where the backend addresses host memory. bf16 copies
  // (`cast_of`) are derived from their sources below, into memory of their
  // own.
  executor->held_ = rankHeldWeights(*plan, rank);
  const std::vector<bool> &held = executor->held_;
  std::vector<uint64_t> offsets(plan->weights.size(), 0);
  uint64_t ownBytes = 0;
  bool copyAll = !backend.addressesHostMemory();
  auto owned = [&](const Weight &weight) {
    return weight.state || copyAll || weight.castOf >= 0;
  };
  for (size_t id = 0; id < plan->weights.size(); ++id)
    if (held[id] && owned(plan->weights[id])) {
      offsets[id] = ownBytes;
      ownBytes += roundUp(plan->weights[id].bytes, kOwnedWeightAlignment);
    }
  uint8_t *own = nullptr;
  if (ownBytes) {
    StatusOr<uint8_t *> block = backend.allocate(ownBytes);
    if (!block)
      return block.status().withContext("allocating the weights");
    own = *block;
  }
  executor->weights_.assign(plan->weights.size(), nullptr);
  uint64_t inPlaceBytes = 0;
  for (size_t id = 0; id < plan->weights.size(); ++id) {
    const Weight &weight = plan->weights[id];
    const uint8_t *data = plan->data.data() + weight.offset;
    if (!held[id])
      continue;
    if (!owned(weight)) {
      executor->weights_[id] = const_cast<uint8_t *>(data);
      inPlaceBytes += weight.bytes;
      continue;
    }
    executor->weights_[id] = own + offsets[id];
    if (Status status =
            backend.upload(executor->weights_[id], data, weight.bytes);
        !status)
      return status.withContext("copying weight '" + weight.name + "'");
  }
  // Whatever wrote the sources' bytes (the compiler, or a tool that filled
  // the plan's weights), their copies match them.
  for (size_t id = 0; id < plan->weights.size(); ++id)
    if (int64_t source = plan->weights[id].castOf; source >= 0 && held[id]) {
      const Weight &from = plan->weights[source];
      HostTensor value;
      value.dtype = from.dtype;
      value.shape = plan->weights[id].shape;
      if (copiesSourceBlock(*plan, plan->weights[id])) {
        const uint8_t *data = plan->data.data() + from.offset;
        value.data.assign(data, data + from.bytes);
      } else {
        value.data = sourceBlockOf(*plan, plan->weights[id]);
      }
      if (Status status = executor->refreshCopy(id, value); !status)
        return status;
    }
  executor->inputSet_.assign(program.inputs.size(), false);
  executor->inputs_.resize(program.inputs.size());

  RunReport &report = executor->report_;
  report.plannedArenaBytes = program.arenaBytes;
  uint64_t page = 4096;
  report.plannedArenaPageBytes = roundUp(program.arenaBytes, page);
  std::vector<bool> counted(plan->weights.size(), false);
  for (const Instruction &instruction : program.instructions)
    for (const auto *refs : {&instruction.inputs, &instruction.outputs})
      for (const TensorRef &ref : *refs)
        if (ref.space == TensorRef::Space::Weight && !counted[ref.offset]) {
          counted[ref.offset] = true;
          report.weightBytes += plan->weights[ref.offset].bytes;
        }
  for (size_t id = 0; id < plan->weights.size(); ++id)
    if (held[id])
      report.heldWeightBytes += plan->weights[id].bytes;
  report.weightAllocationBytes = ownBytes;
  report.inPlaceWeightBytes = inPlaceBytes;
  return executor;
}

Executor::~Executor() = default;

const void *Executor::resolve(const TensorRef &ref) const {
  if (ref.space == TensorRef::Space::Weight)
    return weights_[ref.offset];
  return arena_ + ref.offset;
}

HostTensor Executor::weight(size_t id) const {
  const Weight &weight = plan_->weights.at(id);
  HostTensor tensor;
  tensor.name = weight.name;
  tensor.dtype = weight.dtype;
  tensor.shape = weight.shape;
  tensor.data.resize(weight.bytes);
  // A weight the rank does not hold, or that cannot be read back, is the
  // plan's value.
  if (!held_[id] ||
      !backend_->download(tensor.data.data(), weights_[id], weight.bytes)) {
    const uint8_t *data = plan_->data.data() + weight.offset;
    tensor.data.assign(data, data + weight.bytes);
  }
  return tensor;
}

Status Executor::setWeight(size_t id, const HostTensor &tensor) {
  if (id >= plan_->weights.size())
    return Status::error("the plan has no weight " + std::to_string(id));
  const Weight &weight = plan_->weights[id];
  if (!weight.state)
    return Status::error("weight '" + weight.name +
                         "' is not state and cannot be set");
  if (!held_[id])
    return Status::error(
        "rank " + std::to_string(program_->rank) + " does not hold weight '" +
        weight.name + "'" +
        (weight.isSlice()
             ? " " + sliceString(weight.sliceOffsets, weight.globalShape)
             : std::string()) +
        ": its program does not use it");
  if (tensor.dtype != weight.dtype || tensor.shape != weight.shape ||
      tensor.data.size() != weight.bytes)
    return Status::error("weight '" + weight.name + "' is " +
                         dtypeName(weight.dtype) + shapeString(weight.shape) +
                         ", not " + dtypeName(tensor.dtype) +
                         shapeString(tensor.shape));
  if (Status status =
          backend_->upload(weights_[id], tensor.data.data(), weight.bytes);
      !status)
    return status;
  // (A copy of another block is set by whoever sets the source's other
  // blocks: loading a checkpoint assembles it.)
  for (size_t copy = 0; copy < plan_->weights.size(); ++copy)
    if (plan_->weights[copy].castOf == int64_t(id) && held_[copy] &&
        copiesSourceBlock(*plan_, plan_->weights[copy]))
      if (Status status = refreshCopy(copy, tensor); !status)
        return status;
  return Status::ok();
}

Status Executor::refreshCopy(size_t copy, const HostTensor &source) {
  const Weight &weight = plan_->weights[copy];
  StatusOr<HostTensor> narrow = castTensor(source, weight.dtype);
  if (!narrow)
    return narrow.status().withContext("deriving weight '" + weight.name + "'");
  return backend_->upload(weights_[copy], narrow->data.data(), weight.bytes);
}

Status Executor::setInput(const std::string &name, const HostTensor &tensor) {
  const std::vector<Binding> &inputs = program_->inputs;
  auto it = std::find_if(inputs.begin(), inputs.end(),
                         [&](const Binding &b) { return b.name == name; });
  if (it == inputs.end()) {
    std::string known;
    for (const Binding &binding : inputs)
      known += (known.empty() ? "'" : ", '") + binding.name + "'";
    return Status::error("the model has no input '" + name +
                         "' (its inputs: " + known + ")");
  }
  const TensorRef &ref = it->ref;
  if (tensor.dtype != ref.dtype || tensor.shape != ref.shape)
    return Status::error("input '" + name + "' is " + dtypeName(tensor.dtype) +
                         shapeString(tensor.shape) + " but the model expects " +
                         dtypeName(ref.dtype) + shapeString(ref.shape));
  if (tensor.data.size() != ref.bytes())
    return Status::error("input '" + name + "' holds " +
                         std::to_string(tensor.data.size()) +
                         " bytes, expected " + std::to_string(ref.bytes()));
  inputs_[it - inputs.begin()] = tensor;
  inputSet_[it - inputs.begin()] = true;
  return Status::ok();
}

Status Executor::run(bool profile) {
  for (size_t i = 0; i < inputSet_.size(); ++i)
    if (!inputSet_[i])
      return Status::error("input '" + program_->inputs[i].name +
                           "' was not given");
  using Clock = std::chrono::steady_clock;
  auto start = Clock::now();
  report_.commBytesSent.clear();
  for (size_t i = 0; i < inputs_.size(); ++i)
    if (Status status = backend_->upload(
            const_cast<void *>(resolve(program_->inputs[i].ref)),
            inputs_[i].data.data(), inputs_[i].data.size());
        !status)
      return fail(status.withContext("copying input '" +
                                     program_->inputs[i].name + "'"));
  const std::vector<Instruction> &instructions = program_->instructions;
  std::vector<double> times(profile ? instructions.size() : 0);
  if (profile)
    backend_->startProfile(instructions.size());
  double waitSeconds = 0;
  if (Status status = runOrReplay(times, waitSeconds); !status) {
    // What was enqueued before the failure finishes now, so that its error
    // flag and timings do not leak into the next run.
    size_t ignored = instructions.size();
    (void)backend_->synchronize(ignored);
    if (profile)
      (void)backend_->instructionSeconds();
    return status;
  }
  size_t failed = instructions.size();
  if (Status status = backend_->synchronize(failed); !status)
    return fail(failed < instructions.size()
                    ? status.withContext(describe(instructions[failed], failed))
                    : status);
  report_.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  backend_->saveTuning();
  report_.matmulTuning = backend_->tuningSummary();

  if (!measured_) {
    report_.measuredArenaBytes = backend_->measureArena();
    report_.measuredPeakBytes =
        (report_.measuredArenaBytes ? report_.measuredArenaBytes
                                    : program_->arenaBytes) +
        report_.weightAllocationBytes + report_.inPlaceWeightBytes;
    measured_ = true;
  }
  if (profile) {
    // Kernels are timed by the backend (on the device for CUDA);
    // communication by the time it took to post.
    std::vector<double> kernelTimes = backend_->instructionSeconds();
    for (size_t index = 0; index < instructions.size(); ++index)
      if (instructions[index].kind == Instruction::Kind::Kernel &&
          index < kernelTimes.size())
        times[index] = kernelTimes[index];
  }
  if (profile) {
    report_.instructions.clear();
    std::map<std::string, KernelProfile> byKernel;
    for (size_t index = 0; index < instructions.size(); ++index) {
      const Instruction &instruction = instructions[index];
      report_.instructions.push_back(
          {index, instruction.kernel, instruction.loc, times[index]});
      KernelProfile &kernel = byKernel[instruction.kernel];
      kernel.kernel = instruction.kernel;
      ++kernel.calls;
      kernel.seconds += times[index];
    }
    if (world_) {
      // Time spent blocked on communication that compute did not hide.
      KernelProfile &wait = byKernel["(comm wait)"];
      wait.kernel = "(comm wait)";
      wait.seconds = waitSeconds;
    }
    report_.kernels.clear();
    for (auto &entry : byKernel)
      report_.kernels.push_back(entry.second);
    std::sort(report_.kernels.begin(), report_.kernels.end(),
              [](const KernelProfile &a, const KernelProfile &b) {
                return a.seconds > b.seconds;
              });
  }
  return Status::ok();
}

HostTensor Executor::output(size_t index) const {
  const Binding &binding = program_->outputs[index];
  HostTensor tensor;
  tensor.dtype = binding.ref.dtype;
  tensor.shape = binding.ref.shape;
  tensor.name = binding.name;
  tensor.data.resize(binding.ref.bytes());
  // Every launch has completed when run() returned.
  (void)backend_->download(tensor.data.data(), resolve(binding.ref),
                           binding.ref.bytes());
  return tensor;
}

Status Executor::fail(Status status) {
  if (world_)
    world_->abort(status.message());
  return status;
}

/// With CUDA graphs the first run that may records its launches (nothing
/// runs while they are recorded) and every run replays the recording. A
/// recording that fails (a launch the capture refuses, or an instruction's
/// own error) turns graphs off for the executor, and the run launches kernel
/// by kernel, which reports an instruction's error as usual.
Status Executor::runOrReplay(std::vector<double> &times, double &waitSeconds) {
  const bool replayable = graphs_ && times.empty() && !hook_ && !tuneFirst_;
  tuneFirst_ = false;
  if (!replayable)
    return runInstructions(times, waitSeconds);
  if (!captured_) {
    Status status = backend_->beginCapture();
    if (status) {
      status = runInstructions(times, waitSeconds);
      Status recorded = backend_->endCapture(status.isOk());
      if (status)
        status = recorded;
    }
    if (!status) {
      graphs_ = false;
      report_.cudaGraphs = "off: " + status.message();
      return runInstructions(times, waitSeconds);
    }
    captured_ = true;
    report_.cudaGraphs = "replayed";
  }
  return backend_->replay();
}

/// Kernels run in order; communication is posted and only waited for when
/// a later instruction touches its bytes (reads what it writes, or writes
/// what it reads or writes), so transfers overlap the kernels in between.
/// On a device the wait is the device's where the engine allows it (the
/// compute stream waits for the communication stream), and the host waits
/// for everything at the end, which is where errors and timeouts surface.
Status Executor::runInstructions(std::vector<double> &times,
                                 double &waitSeconds) {
  using Clock = std::chrono::steady_clock;
  const std::vector<Instruction> &instructions = program_->instructions;
  bool profile = !times.empty();
  std::vector<const void *> inputs;
  std::vector<void *> outputs;
  std::vector<Span> reads, writes;
  // In flight and not yet ordered before later work; ordered on the device
  // but not yet known to have succeeded.
  std::vector<Pending> pending, ordered;
  // However the run ends, nothing may still be moving the arena's bytes
  // when it returns (an engine with a progress thread would otherwise
  // write into buffers freed or reused after a failure): what is in flight
  // finishes, or fails, first.
  struct Drain {
    std::vector<Pending> &pending, &ordered;
    ~Drain() {
      for (std::vector<Pending> *ops : {&ordered, &pending})
        for (Pending &op : *ops)
          (void)op.event->wait();
    }
  } drain{pending, ordered};
  std::vector<TraceEvent> &trace = report_.trace;
  trace.clear();
  auto wait = [&](Pending &op) -> Status {
    auto before = Clock::now();
    Status status = op.event->wait();
    waitSeconds += std::chrono::duration<double>(Clock::now() - before).count();
    if (op.traced >= 0) {
      int64_t done = op.event->completedAtNs();
      trace[size_t(op.traced)].endNs = done >= 0 ? done : nowNs();
    }
    if (!status)
      return status.withContext(describe(instructions[op.index], op.index));
    return Status::ok();
  };
  for (size_t index = 0; index < instructions.size(); ++index) {
    const Instruction &instruction = instructions[index];
    if (hook_)
      if (Status status = hook_(index); !status)
        return status;
    inputs.clear();
    outputs.clear();
    reads.clear();
    writes.clear();
    for (const TensorRef &ref : instruction.inputs) {
      inputs.push_back(resolve(ref));
      reads.push_back(spanOf(ref, *plan_));
    }
    for (const TensorRef &ref : instruction.outputs) {
      outputs.push_back(const_cast<void *>(resolve(ref)));
      writes.push_back(spanOf(ref, *plan_));
    }
    for (size_t i = 0; i < pending.size();) {
      Pending &op = pending[i];
      if (anyOverlap(writes, op.reads) || anyOverlap(writes, op.writes) ||
          anyOverlap(reads, op.writes)) {
        if (backend_->waitOnDevice(*op.event)) {
          ordered.push_back(std::move(op));
        } else if (Status status = wait(op); !status) {
          return status;
        }
        pending.erase(pending.begin() + i);
      } else {
        ++i;
      }
    }
    if (instruction.kind == Instruction::Kind::Collective) {
      auto before = profile ? Clock::now() : Clock::time_point();
      int group = collectiveGroup(instruction);
      Communicator &comm = group < 0 ? *world_ : *groups_[size_t(group)];
      if (needsRootCopy(instruction, comm, inputs.data(), outputs.data()))
        if (Status status = backend_->copy(outputs[0], inputs[0],
                                           instruction.inputs[0].bytes());
            !status)
          return fail(status.withContext(describe(instruction, index)));
      backend_->orderCommunication(comm);
      countSent(instruction, comm);
      int64_t traced = -1;
      if (tracing_) {
        traced = int64_t(trace.size());
        trace.push_back({index, true, nowNs(), 0});
      }
      pending.push_back(
          {index,
           startCollective(instruction, comm, inputs.data(), outputs.data()),
           reads, writes, traced});
      if (profile)
        times[index] =
            std::chrono::duration<double>(Clock::now() - before).count();
      continue;
    }
    // Engines that move their operations only inside their own calls
    // (MPI) get one before each kernel: one call moves all of them, so
    // polling stops at the first event still in flight. (Without it, a
    // GPipe stage's sends under MPI without single-copy transfers reached
    // the next stage one forward late: its step 770 -> 1350 ms at pp 2.)
    for (Pending &op : pending)
      if (!op.event->poll())
        break;
    int64_t launched = tracing_ ? nowNs() : 0;
    if (Status status =
            backend_->launch(index, instruction, inputs.data(), outputs.data());
        !status)
      return fail(status.withContext(describe(instruction, index)));
    if (tracing_)
      trace.push_back({index, false, launched, nowNs()});
  }
  // Outputs are read after the run: everything must have landed.
  for (std::vector<Pending> *ops : {&ordered, &pending}) {
    for (Pending &op : *ops)
      if (Status status = wait(op); !status)
        return status;
    ops->clear();
  }
  return Status::ok();
}

void Executor::countSent(const Instruction &instruction,
                         const Communicator &comm) {
  if (loomcost::parseKind(instruction.kernel))
    report_.commBytesSent[instruction.kernel] +=
        collectiveBytesSent(instruction, comm.size());
}
