//===- Executor.cpp - Runs one rank of a plan -----------------------------===//
//
// The arena is one anonymous mapping, never touched by the executor itself
// except to copy inputs in and outputs out. That makes the peak memory of a
// step measurable independently of the plan: the pages the kernels touched
// are exactly the resident pages of the mapping (mincore), which must match
// the arena size the compiler planned.
//
//===----------------------------------------------------------------------===//

#include "loom/Runtime/Executor.h"
#include "loom/Runtime/Kernels.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sys/mman.h>
#include <unistd.h>

using namespace loom::runtime;

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

size_t pageSize() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

} // namespace

StatusOr<std::unique_ptr<Executor>>
Executor::create(std::shared_ptr<const Plan> plan, int rank) {
  if (rank < 0 || size_t(rank) >= plan->ranks.size())
    return Status::error("the plan has no rank " + std::to_string(rank) +
                         " (it has " + std::to_string(plan->ranks.size()) +
                         ")");
  std::unique_ptr<Executor> executor(new Executor());
  executor->plan_ = plan;
  executor->program_ = &plan->ranks[rank];
  const RankProgram &program = *executor->program_;
  for (size_t index = 0; index < program.instructions.size(); ++index) {
    const Instruction &instruction = program.instructions[index];
    const KernelInfo *info = lookupCPUKernel(instruction.kernel);
    if (!info)
      return Status::error(describe(instruction, index) +
                           ": the CPU backend has no kernel '" +
                           instruction.kernel + "'");
    Status status = info->check(instruction);
    if (!status)
      return status.withContext(describe(instruction, index));
  }

  size_t page = pageSize();
  size_t mapped =
      std::max<size_t>(page, (program.arenaBytes + page - 1) / page * page);
  void *arena = mmap(nullptr, mapped, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (arena == MAP_FAILED)
    return Status::error("cannot map an arena of " +
                         std::to_string(program.arenaBytes) +
                         " bytes: " + std::strerror(errno));
  // Huge pages would make residency coarser than the plan's buffers.
  madvise(arena, mapped, MADV_NOHUGEPAGE);
  executor->arena_ = static_cast<uint8_t *>(arena);

  // State weights are copied out of the (shared, immutable) plan so that
  // several executors of one plan train independently.
  uint64_t stateBytes = 0;
  executor->stateOffsets_.assign(plan->weights.size(), 0);
  for (size_t id = 0; id < plan->weights.size(); ++id)
    if (plan->weights[id].state) {
      executor->stateOffsets_[id] = stateBytes;
      stateBytes += (plan->weights[id].bytes + 63) / 64 * 64;
    }
  if (stateBytes) {
    executor->state_ =
        static_cast<uint8_t *>(std::aligned_alloc(64, size_t(stateBytes)));
    if (!executor->state_)
      return Status::error("cannot allocate " + std::to_string(stateBytes) +
                           " bytes of trainable state");
    for (size_t id = 0; id < plan->weights.size(); ++id)
      if (plan->weights[id].state)
        std::memcpy(executor->state_ + executor->stateOffsets_[id],
                    plan->data.data() + plan->weights[id].offset,
                    plan->weights[id].bytes);
  }
  executor->arenaMapped_ = mapped;
  executor->inputSet_.assign(program.inputs.size(), false);
  executor->inputs_.resize(program.inputs.size());

  RunReport &report = executor->report_;
  report.plannedArenaBytes = program.arenaBytes;
  report.plannedArenaPageBytes = (program.arenaBytes + page - 1) / page * page;
  std::vector<bool> counted(plan->weights.size(), false);
  for (const Instruction &instruction : program.instructions)
    for (const auto *refs : {&instruction.inputs, &instruction.outputs})
      for (const TensorRef &ref : *refs)
        if (ref.space == TensorRef::Space::Weight && !counted[ref.offset]) {
          counted[ref.offset] = true;
          report.weightBytes += plan->weights[ref.offset].bytes;
        }
  return executor;
}

Executor::~Executor() {
  if (arena_)
    munmap(arena_, arenaMapped_);
  std::free(state_);
}

const void *Executor::resolve(const TensorRef &ref) const {
  if (ref.space == TensorRef::Space::Weight) {
    if (plan_->weights[ref.offset].state)
      return state_ + stateOffsets_[ref.offset];
    return plan_->data.data() + plan_->weights[ref.offset].offset;
  }
  return arena_ + ref.offset;
}

HostTensor Executor::weight(size_t id) const {
  const Weight &weight = plan_->weights.at(id);
  HostTensor tensor;
  tensor.name = weight.name;
  tensor.dtype = weight.dtype;
  tensor.shape = weight.shape;
  const uint8_t *data = weight.state ? state_ + stateOffsets_[id]
                                     : plan_->data.data() + weight.offset;
  tensor.data.assign(data, data + weight.bytes);
  return tensor;
}

Status Executor::setWeight(size_t id, const HostTensor &tensor) {
  if (id >= plan_->weights.size())
    return Status::error("the plan has no weight " + std::to_string(id));
  const Weight &weight = plan_->weights[id];
  if (!weight.state)
    return Status::error("weight '" + weight.name +
                         "' is not state and cannot be set");
  if (tensor.dtype != weight.dtype || tensor.shape != weight.shape ||
      tensor.data.size() != weight.bytes)
    return Status::error("weight '" + weight.name + "' is " +
                         dtypeName(weight.dtype) + shapeString(weight.shape) +
                         ", not " + dtypeName(tensor.dtype) +
                         shapeString(tensor.shape));
  std::memcpy(state_ + stateOffsets_[id], tensor.data.data(), weight.bytes);
  return Status::ok();
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
  for (size_t i = 0; i < inputs_.size(); ++i)
    std::memcpy(const_cast<void *>(resolve(program_->inputs[i].ref)),
                inputs_[i].data.data(), inputs_[i].data.size());
  const std::vector<Instruction> &instructions = program_->instructions;
  std::vector<const void *> inputs;
  std::vector<void *> outputs;
  std::vector<double> times(profile ? instructions.size() : 0);
  std::string error;
  for (size_t index = 0; index < instructions.size(); ++index) {
    const Instruction &instruction = instructions[index];
    inputs.clear();
    outputs.clear();
    for (const TensorRef &ref : instruction.inputs)
      inputs.push_back(resolve(ref));
    for (const TensorRef &ref : instruction.outputs)
      outputs.push_back(const_cast<void *>(resolve(ref)));
    KernelArgs args{instruction, inputs.data(), outputs.data(), &error};
    auto before = profile ? Clock::now() : Clock::time_point();
    lookupCPUKernel(instruction.kernel)->run(args);
    if (profile)
      times[index] =
          std::chrono::duration<double>(Clock::now() - before).count();
    if (!error.empty())
      return Status::error(describe(instruction, index) + ": " + error);
  }
  report_.seconds = std::chrono::duration<double>(Clock::now() - start).count();

  if (!measured_) {
    size_t page = pageSize();
    std::vector<unsigned char> resident(arenaMapped_ / page);
    if (mincore(arena_, arenaMapped_, resident.data()) == 0) {
      report_.measuredArenaBytes = 0;
      for (unsigned char flags : resident)
        if (flags & 1)
          report_.measuredArenaBytes += page;
    }
    measured_ = true;
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
  const uint8_t *data = static_cast<const uint8_t *>(resolve(binding.ref));
  tensor.data.assign(data, data + binding.ref.bytes());
  return tensor;
}
