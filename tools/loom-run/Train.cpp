//===- Train.cpp - loom-run --train: the training loop --------------------===//
//
// One plan run is one optimizer step: the plan reads the batch, returns the
// loss and updates its state weights (parameters, optimizer state) in place.
// This file only feeds batches and keeps the books. Decisions (see
// docs/design/training.md): step i reads sample positions [i*B, (i+1)*B)
// modulo the sample count, optionally through a per-epoch permutation; a
// checkpoint is every state weight plus the step count, so a resumed run is
// bit-identical to an uninterrupted one.
//
//===----------------------------------------------------------------------===//

#include "Train.h"
#include "ModelCompiler.h"
#include "RunPlan.h"

#include "loom/Runtime/Executor.h"
#include "loom/Runtime/TensorIO.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <numeric>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

using namespace loom;
using namespace loom::runtime;

namespace {

constexpr const char *kCheckpointMagic = "loom-checkpoint 1";

int fail(const std::string &message) {
  std::fprintf(stderr, "loom-run: error: %s\n", message.c_str());
  return 1;
}

uint64_t splitmix64(uint64_t &state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// Which sample each position of the data stream reads.
class Sampler {
public:
  Sampler(int64_t samples, bool shuffle, uint64_t seed)
      : samples(samples), shuffle(shuffle), seed(seed) {}

  int64_t sampleAt(int64_t position) {
    int64_t epoch = position / samples, offset = position % samples;
    if (!shuffle)
      return offset;
    if (epoch != permutationEpoch) {
      // Fisher-Yates over a splitmix64 stream of (seed, epoch).
      permutation.resize(samples);
      std::iota(permutation.begin(), permutation.end(), 0);
      uint64_t state = seed ^ (uint64_t(epoch) * 0xD1B54A32D192ED03ull);
      for (int64_t i = samples - 1; i > 0; --i)
        std::swap(permutation[i],
                  permutation[splitmix64(state) % uint64_t(i + 1)]);
      permutationEpoch = epoch;
    }
    return permutation[offset];
  }

private:
  int64_t samples;
  bool shuffle;
  uint64_t seed;
  int64_t permutationEpoch = -1;
  std::vector<int64_t> permutation;
};

/// A plan input and the data set tensor that feeds it.
struct Feed {
  std::string name;
  const HostTensor *data;
  TensorRef ref;
};

std::string typeString(DType dtype, const std::vector<int64_t> &shape) {
  return std::string(dtypeName(dtype)) + shapeString(shape);
}

/// The per-sample shape the plan wants, as "[N,...]" for messages.
std::string datasetShape(const TensorRef &ref) {
  std::vector<int64_t> rest(ref.shape.begin() + 1, ref.shape.end());
  std::string inner = shapeString(rest);
  return std::string(dtypeName(ref.dtype)) + "[N" +
         (rest.empty() ? "" : "," + inner.substr(1, inner.size() - 2)) + "]";
}

/// Matches plan inputs to data; checks every tensor's type and sample count.
Status bindFeeds(const RankProgram &program, const Dataset &data,
                 const TrainOptions &options, std::vector<Feed> &feeds,
                 int64_t &samples) {
  size_t nextPositional = 0;
  for (const Binding &input : program.inputs) {
    const HostTensor *tensor = nullptr;
    bool isLabels = input.name == "labels" && options.loss != "none";
    if (isLabels) {
      tensor = data.labels ? &*data.labels : nullptr;
      if (!tensor)
        return Status::error("the " + options.loss +
                             " loss needs labels: pass --labels FILE.npy (" +
                             datasetShape(input.ref) + ")");
    } else {
      for (const auto &[name, value] : data.named)
        if (name == input.name)
          tensor = &value;
      if (!tensor && nextPositional < data.positional.size())
        tensor = &data.positional[nextPositional++];
      if (!tensor)
        return Status::error("input '" + input.name +
                             "' was not given; pass --input " + input.name +
                             "=FILE.npy (" + datasetShape(input.ref) + ")");
    }
    const TensorRef &ref = input.ref;
    bool fits = tensor->dtype == ref.dtype && !ref.shape.empty() &&
                tensor->shape.size() == ref.shape.size() &&
                std::equal(ref.shape.begin() + 1, ref.shape.end(),
                           tensor->shape.begin() + 1) &&
                tensor->shape[0] > 0;
    if (!fits) {
      std::string what = isLabels ? "labels" : "input '" + input.name + "'";
      std::string expected = datasetShape(ref);
      if (isLabels && options.loss == "cross_entropy")
        expected += ": class indices shaped like the logits without their "
                    "last dimension";
      else if (isLabels)
        expected += ": the model output's type";
      return Status::error(
          what + " are " + typeString(tensor->dtype, tensor->shape) +
          " but the " + (isLabels ? options.loss + " loss" : "model") +
          " needs " + expected + " (N samples, any N >= 1)");
    }
    if (ref.shape[0] != options.batchSize)
      return Status::error("the plan's input '" + input.name + "' holds " +
                           std::to_string(ref.shape[0]) +
                           " rows per step, not --batch-size " +
                           std::to_string(options.batchSize));
    if (samples && tensor->shape[0] != samples)
      return Status::error(
          "input '" + input.name + "' has " + std::to_string(tensor->shape[0]) +
          " samples but an earlier one has " + std::to_string(samples) +
          "; every data file needs one row per sample");
    samples = tensor->shape[0];
    feeds.push_back({input.name, tensor, ref});
  }
  if (nextPositional < data.positional.size())
    return Status::error(std::to_string(data.positional.size()) +
                         " input files given but the model takes fewer inputs");
  for (const auto &[name, value] : data.named)
    if (std::none_of(feeds.begin(), feeds.end(),
                     [&](const Feed &feed) { return feed.name == name; }))
      return Status::error("the model has no input '" + name + "'");
  if (data.labels && options.loss == "none")
    return Status::error("--labels given, but the loss 'none' takes none");
  return Status::ok();
}

HostTensor gatherRows(const Feed &feed, const std::vector<int64_t> &rows) {
  HostTensor batch;
  batch.dtype = feed.ref.dtype;
  batch.shape = feed.ref.shape;
  size_t rowBytes = feed.data->data.size() / size_t(feed.data->shape[0]);
  batch.data.resize(rowBytes * rows.size());
  for (size_t i = 0; i < rows.size(); ++i)
    std::memcpy(batch.data.data() + i * rowBytes,
                feed.data->data.data() + size_t(rows[i]) * rowBytes, rowBytes);
  return batch;
}

//===----------------------------------------------------------------------===//
// Checkpoints: DIR/state.ckpt, a text header then the raw state.
//
//   loom-checkpoint 1
//   step <steps done>
//   weights <count>
//   weight <dtype> <shape> <bytes> <name to the end of the line>
//   ...
//   data <bytes>
//   <raw bytes of every weight, in header order>
//===----------------------------------------------------------------------===//

std::vector<size_t> stateWeights(const Plan &plan) {
  std::vector<size_t> ids;
  for (size_t id = 0; id < plan.weights.size(); ++id)
    if (plan.weights[id].state)
      ids.push_back(id);
  return ids;
}

Status writeCheckpoint(const std::string &dir, const Plan &plan,
                       const Executor &executor, int64_t stepsDone) {
  mkdir(dir.c_str(), 0777);
  std::string header = std::string(kCheckpointMagic) + "\nstep " +
                       std::to_string(stepsDone) + "\n";
  std::vector<size_t> ids = stateWeights(plan);
  header += "weights " + std::to_string(ids.size()) + "\n";
  uint64_t total = 0;
  for (size_t id : ids) {
    const Weight &weight = plan.weights[id];
    header += std::string("weight ") + dtypeName(weight.dtype) + " " +
              shapeString(weight.shape) + " " + std::to_string(weight.bytes) +
              " " + weight.name + "\n";
    total += weight.bytes;
  }
  header += "data " + std::to_string(total) + "\n";
  // Written aside and renamed over the old one: a crash never leaves a
  // half-written checkpoint.
  std::string path = dir + "/state.ckpt", temporary = path + ".tmp";
  FILE *file = std::fopen(temporary.c_str(), "wb");
  bool ok = file &&
            std::fwrite(header.data(), 1, header.size(), file) == header.size();
  for (size_t id : ids) {
    HostTensor value = executor.weight(id);
    ok = ok && std::fwrite(value.data.data(), 1, value.data.size(), file) ==
                   value.data.size();
  }
  if (file && std::fclose(file) != 0)
    ok = false;
  if (!ok || std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::string reason = std::strerror(errno);
    std::remove(temporary.c_str());
    return Status::error("cannot write checkpoint " + path + ": " + reason);
  }
  return Status::ok();
}

/// Makes DIR (one level, like --checkpoint) and checks that it is a folder
/// this process can write to.
Status makeFolder(const std::string &dir) {
  auto refused = [&](int error) {
    return Status::error("cannot write to folder " + dir + ": " +
                         std::strerror(error));
  };
  if (mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST)
    return refused(errno);
  struct stat info;
  if (stat(dir.c_str(), &info) != 0)
    return refused(errno);
  if (!S_ISDIR(info.st_mode))
    return refused(ENOTDIR);
  if (access(dir.c_str(), W_OK) != 0)
    return refused(errno);
  return Status::ok();
}

/// Writes every state weight to DIR/<name>.npy (bf16 widened to f32).
StatusOr<size_t> writeStateWeights(const std::string &dir, const Plan &plan,
                                   const Executor &executor) {
  std::vector<size_t> ids = stateWeights(plan);
  for (size_t id : ids) {
    std::string path = dir + "/" + npyFileName(plan.weights[id].name);
    if (Status status = writeNpyFile(path, executor.weight(id)); !status)
      return status;
  }
  return ids.size();
}

/// Loads DIR/state.ckpt into the executor's state; returns the steps done.
StatusOr<int64_t> readCheckpoint(const std::string &dir, const Plan &plan,
                                 Executor &executor) {
  std::string path = dir + "/state.ckpt";
  StatusOr<std::string> bytes = readFile(path);
  if (!bytes)
    return bytes.status();
  const std::string &text = *bytes;
  size_t at = 0;
  auto line = [&](std::string &out) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos)
      return false;
    out = text.substr(at, end - at);
    at = end + 1;
    return true;
  };
  auto corrupt = [&](const std::string &what) {
    return Status::error(path + ": not a loom checkpoint (" + what + ")");
  };
  std::string current;
  if (!line(current) || current != kCheckpointMagic)
    return corrupt("bad magic");
  long long stepsDone = -1, count = -1, dataBytes = -1;
  if (!line(current) ||
      std::sscanf(current.c_str(), "step %lld", &stepsDone) != 1 ||
      stepsDone < 0)
    return corrupt("bad step line");
  if (!line(current) ||
      std::sscanf(current.c_str(), "weights %lld", &count) != 1 || count < 0)
    return corrupt("bad weights line");
  struct Entry {
    std::string dtype, shape, name;
    uint64_t bytes;
  };
  std::vector<Entry> entries;
  for (long long i = 0; i < count; ++i) {
    if (!line(current))
      return corrupt("truncated header");
    std::istringstream fields(current);
    std::string keyword;
    Entry entry;
    fields >> keyword >> entry.dtype >> entry.shape >> entry.bytes;
    if (keyword != "weight" || !fields)
      return corrupt("bad weight line '" + current + "'");
    std::getline(fields >> std::ws, entry.name);
    entries.push_back(entry);
  }
  if (!line(current) ||
      std::sscanf(current.c_str(), "data %lld", &dataBytes) != 1 ||
      uint64_t(dataBytes) != text.size() - at)
    return corrupt("bad or truncated data section");

  // The checkpoint must hold exactly this plan's state.
  std::vector<size_t> ids = stateWeights(plan);
  std::map<std::string, size_t> byName;
  for (size_t id : ids)
    byName[plan.weights[id].name] = id;
  std::string mismatch;
  for (const Entry &entry : entries) {
    auto it = byName.find(entry.name);
    if (it == byName.end()) {
      mismatch = "it holds '" + entry.name + "', which this model lacks";
      break;
    }
    const Weight &weight = plan.weights[it->second];
    std::string expected = shapeString(weight.shape);
    if (entry.dtype != dtypeName(weight.dtype) || entry.shape != expected) {
      mismatch = "'" + entry.name + "' is " + entry.dtype + entry.shape +
                 " there but " + dtypeName(weight.dtype) + expected + " here";
      break;
    }
  }
  if (mismatch.empty() && entries.size() != ids.size())
    mismatch = "it holds " + std::to_string(entries.size()) +
               " state tensors, this model and optimizer " +
               std::to_string(ids.size());
  if (!mismatch.empty())
    return Status::error(
        "checkpoint " + dir +
        " was written for another model or optimizer: " + mismatch);
  // All checked: now load.
  for (const Entry &entry : entries) {
    size_t id = byName[entry.name];
    HostTensor value;
    value.dtype = plan.weights[id].dtype;
    value.shape = plan.weights[id].shape;
    value.data.assign(text.begin() + at, text.begin() + at + entry.bytes);
    at += entry.bytes;
    if (Status status = executor.setWeight(id, value); !status)
      return status;
  }
  return int64_t(stepsDone);
}

//===----------------------------------------------------------------------===//
// Progress
//===----------------------------------------------------------------------===//

class Progress {
public:
  Progress(int64_t first, int64_t steps)
      : first(first), steps(steps), terminal(isatty(STDERR_FILENO)) {}

  void report(int64_t step, double loss, double samplesPerSecond) {
    int64_t done = step + 1;
    if (terminal) {
      constexpr int kWidth = 30;
      int filled = int(kWidth * done / steps);
      std::string bar(filled, '=');
      if (filled < kWidth)
        bar += '>' + std::string(kWidth - filled - 1, ' ');
      std::fprintf(stderr, "\r[%s] %lld/%lld  loss %.4f  %.1f samples/s",
                   bar.c_str(), (long long)done, (long long)steps, loss,
                   samplesPerSecond);
      if (done == steps)
        std::fputc('\n', stderr);
      std::fflush(stderr);
      return;
    }
    // Plain lines: every step of short runs, about 50 lines of long ones.
    int64_t every = std::max<int64_t>(1, (steps - first) / 50);
    if (step == first || done == steps || (step - first) % every == 0)
      std::printf("step %lld/%lld  loss %.6f  %.1f samples/s\n",
                  (long long)done, (long long)steps, loss, samplesPerSecond);
    std::fflush(stdout);
  }

  void finishEarly() {
    if (terminal)
      std::fputc('\n', stderr);
  }

private:
  int64_t first, steps;
  bool terminal;
};

} // namespace

int loom::runTraining(std::shared_ptr<const Plan> plan, const Dataset &data,
                      const TrainOptions &options, RunReport &report) {
  StatusOr<std::unique_ptr<Executor>> created =
      Executor::create(plan, 0, nullptr, options.executor);
  if (!created)
    return fail(options.modelPath + ": " + created.status().message());
  Executor &executor = **created;
  const RankProgram &program = executor.program();
  size_t lossIndex = program.outputs.size();
  for (size_t i = 0; i < program.outputs.size(); ++i)
    if (program.outputs[i].name == "loss")
      lossIndex = i;
  if (lossIndex == program.outputs.size() ||
      program.outputs[lossIndex].ref.elements() != 1 ||
      (program.outputs[lossIndex].ref.dtype != DType::F32 &&
       program.outputs[lossIndex].ref.dtype != DType::F64))
    return fail(options.modelPath +
                ": not a training plan (it has no scalar f32/f64 output "
                "'loss')");
  if (stateWeights(*plan).empty())
    return fail(options.modelPath + ": the plan updates no weights");

  std::vector<Feed> feeds;
  int64_t samples = 0;
  if (Status status = bindFeeds(program, data, options, feeds, samples);
      !status)
    return fail(status.message());

  int64_t first = 0;
  if (!options.resumeDir.empty()) {
    StatusOr<int64_t> resumed =
        readCheckpoint(options.resumeDir, *plan, executor);
    if (!resumed)
      return fail(resumed.status().message());
    first = *resumed;
    if (first >= options.steps)
      return fail("checkpoint " + options.resumeDir + " is at step " +
                  std::to_string(first) + ", not before --steps " +
                  std::to_string(options.steps) + "; nothing to do");
    std::printf("resumed from %s after step %lld\n", options.resumeDir.c_str(),
                (long long)first);
  }

  // Found unwritable now rather than after the steps.
  if (!options.saveWeightsDir.empty())
    if (Status status = makeFolder(options.saveWeightsDir); !status)
      return fail("--save-weights: " + status.message());

  FILE *metrics = nullptr;
  if (!options.metricsPath.empty()) {
    metrics = std::fopen(options.metricsPath.c_str(), first ? "a" : "w");
    if (!metrics)
      return fail("cannot write " + options.metricsPath + ": " +
                  std::strerror(errno));
  }

  Sampler sampler(samples, options.shuffle, options.seed);
  Progress progress(first, options.steps);
  std::vector<int64_t> rows(options.batchSize);
  auto fatal = [&](const std::string &message) {
    progress.finishEarly();
    if (metrics)
      std::fclose(metrics);
    return fail(message);
  };
  for (int64_t step = first; step < options.steps; ++step) {
    auto start = std::chrono::steady_clock::now();
    for (int64_t j = 0; j < options.batchSize; ++j)
      rows[j] = sampler.sampleAt(step * options.batchSize + j);
    for (const Feed &feed : feeds)
      if (Status status = executor.setInput(feed.name, gatherRows(feed, rows));
          !status)
        return fatal(status.message());
    bool profile = options.profileLastStep && step + 1 == options.steps;
    if (Status status = executor.run(profile); !status)
      return fatal("step " + std::to_string(step) + ": " + status.message());
    HostTensor lossTensor = executor.output(lossIndex);
    double loss =
        lossTensor.dtype == DType::F32
            ? double(*reinterpret_cast<const float *>(lossTensor.data.data()))
            : *reinterpret_cast<const double *>(lossTensor.data.data());
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (!std::isfinite(loss))
      return fatal("step " + std::to_string(step) + ": the loss is " +
                   (std::isnan(loss) ? "NaN" : "infinite") +
                   "; training stopped (try a lower --lr or "
                   "--clip-grad-norm). The last checkpoint, if any, is kept; "
                   "the model was not saved");
    double rate = double(options.batchSize) / seconds;
    if (metrics) {
      std::fprintf(metrics,
                   "{\"step\": %lld, \"loss\": %.9g, \"step_ms\": %.3f, "
                   "\"samples_per_s\": %.2f}\n",
                   (long long)step, loss, seconds * 1e3, rate);
      std::fflush(metrics);
    }
    progress.report(step, loss, rate);
    bool last = step + 1 == options.steps;
    if (!options.checkpointDir.empty() &&
        (last || (options.checkpointEvery > 0 &&
                  (step + 1) % options.checkpointEvery == 0)))
      if (Status status =
              writeCheckpoint(options.checkpointDir, *plan, executor, step + 1);
          !status)
        return fatal(status.message());
  }
  if (metrics)
    std::fclose(metrics);
  report = executor.report();
  if (!report.cudaGraphs.empty())
    std::fprintf(stderr, "loom-run: CUDA graphs: %s\n",
                 report.cudaGraphs.c_str());
  if (!report.launchGroups.empty())
    std::fprintf(stderr, "loom-run: launch groups: %s\n",
                 report.launchGroups.c_str());
  if (!report.matmulEpilogues.empty())
    std::fprintf(stderr, "loom-run: matmul epilogues: %s\n",
                 report.matmulEpilogues.c_str());
  if (!report.matmulTuning.empty())
    std::fprintf(stderr, "loom-run: matmul tuning: %s\n",
                 report.matmulTuning.c_str());

  if (!options.saveWeightsDir.empty()) {
    StatusOr<size_t> written =
        writeStateWeights(options.saveWeightsDir, *plan, executor);
    if (!written)
      return fail(written.status().message());
    std::printf("saved %zu state weights to %s\n", *written,
                options.saveWeightsDir.c_str());
  }
  if (!options.savePath.empty()) {
    std::map<std::string, HostTensor> values;
    for (size_t id : stateWeights(*plan))
      values[plan->weights[id].name] = executor.weight(id);
    StatusOr<size_t> saved =
        saveTrainedModel(options.modelPath, options.savePath, values);
    if (!saved)
      return fail(saved.status().message());
    std::printf("saved %s (%zu trained initializers)\n",
                options.savePath.c_str(), *saved);
  }
  return 0;
}
