//===- Trainer.cpp - The training loop ------------------------------------===//
//
// One plan run is one optimizer step: each rank's program reads its rows of
// the batch, and the plan returns the loss and updates its state weights
// (parameters, optimizer state) in place. This file only feeds batches and
// keeps the books. Decisions (see docs/design/training.md): step i reads
// sample positions [i*B, (i+1)*B) modulo the sample count, optionally
// through a per-epoch permutation, and a rank whose input has a batch row
// offset o and b rows reads rows [o, o+b) of them; the loss reported is the
// `loss` output of the lowest rank that has one; a checkpoint is every
// rank's state weights plus the step count, so a resumed run is
// bit-identical to an uninterrupted one; the slices of a sharded tensor stay
// on their ranks except when the trained model is saved, which assembles
// every tensor whole.
//
//===----------------------------------------------------------------------===//

#include "loom/Runtime/Session/Trainer.h"

#include "loom/Runtime/Session/Checkpoint.h"
#include "loom/Runtime/Session/Report.h"
#include "loom/Runtime/Session/Trace.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <numeric>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

using namespace loomrt;

namespace {

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

/// A plan input of a rank and the data set tensor that feeds it.
struct Feed {
  std::string name;
  const HostTensor *data;
  TensorRef ref;
  /// The first row of the step's batch it reads.
  int64_t offset = 0;
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

/// Matches every rank's plan inputs to data; checks every tensor's type and
/// sample count, and that each input's rows lie in the batch. Ranks without
/// inputs get no feeds.
Status bindFeeds(const Plan &plan, const Dataset &data,
                 const TrainOptions &options,
                 std::vector<std::vector<Feed>> &feeds, int64_t &samples) {
  bool multi = plan.ranks.size() > 1;
  feeds.assign(plan.ranks.size(), {});
  size_t usedPositional = 0;
  std::set<std::string> usedNames;
  for (const RankProgram &program : plan.ranks) {
    std::string prefix =
        multi ? "rank " + std::to_string(program.rank) + ": " : "";
    size_t nextPositional = 0;
    for (const Binding &input : program.inputs) {
      const HostTensor *tensor = nullptr;
      bool isLabels = input.name == "labels" && options.loss != "none";
      if (isLabels) {
        tensor = data.labels ? &*data.labels : nullptr;
        if (!tensor)
          return Status::error(prefix + "the " + options.loss +
                               " loss needs labels: pass --labels FILE.npy (" +
                               datasetShape(input.ref) + ")");
      } else {
        for (const auto &[name, value] : data.named)
          if (name == input.name) {
            tensor = &value;
            usedNames.insert(name);
          }
        if (!tensor && nextPositional < data.positional.size())
          tensor = &data.positional[nextPositional++];
        if (!tensor)
          return Status::error(prefix + "input '" + input.name +
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
            prefix + what + " are " + typeString(tensor->dtype, tensor->shape) +
            " but the " + (isLabels ? options.loss + " loss" : "model") +
            " needs " + expected + " (N samples, any N >= 1)");
      }
      int64_t rows = ref.shape[0];
      if (input.batchOffset < 0 && rows != options.batchSize)
        return Status::error(prefix + "the plan's input '" + input.name +
                             "' holds " + std::to_string(rows) +
                             " rows per step, not --batch-size " +
                             std::to_string(options.batchSize));
      if (input.batchOffset >= 0 &&
          input.batchOffset > options.batchSize - rows)
        return Status::error(prefix + "the plan's input '" + input.name +
                             "' reads rows [" +
                             std::to_string(input.batchOffset) + ", " +
                             std::to_string(input.batchOffset + rows) +
                             ") of each step's batch, beyond --batch-size " +
                             std::to_string(options.batchSize));
      if (samples && tensor->shape[0] != samples)
        return Status::error("input '" + input.name + "' has " +
                             std::to_string(tensor->shape[0]) +
                             " samples but an earlier one has " +
                             std::to_string(samples) +
                             "; every data file needs one row per sample");
      samples = tensor->shape[0];
      feeds[program.rank].push_back(
          {input.name, tensor, ref, std::max<int64_t>(input.batchOffset, 0)});
    }
    usedPositional = std::max(usedPositional, nextPositional);
  }
  if (usedPositional < data.positional.size())
    return Status::error(std::to_string(data.positional.size()) +
                         " input files given but the model takes fewer inputs");
  for (const auto &[name, value] : data.named)
    if (!usedNames.count(name))
      return Status::error("the model has no input '" + name + "'");
  if (data.labels && options.loss == "none")
    return Status::error("--labels given, but the loss 'none' takes none");
  return Status::ok();
}

/// The feed's rows of the step's batch: `rows` holds the sample of every
/// row of the global batch.
HostTensor gatherRows(const Feed &feed, const std::vector<int64_t> &rows) {
  HostTensor batch;
  batch.dtype = feed.ref.dtype;
  batch.shape = feed.ref.shape;
  int64_t count = feed.ref.shape[0];
  size_t rowBytes = feed.data->data.size() / size_t(feed.data->shape[0]);
  batch.data.resize(rowBytes * size_t(count));
  for (int64_t i = 0; i < count; ++i)
    std::memcpy(batch.data.data() + size_t(i) * rowBytes,
                feed.data->data.data() +
                    size_t(rows[size_t(feed.offset + i)]) * rowBytes,
                rowBytes);
  return batch;
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

//===----------------------------------------------------------------------===//
// The ranks
//===----------------------------------------------------------------------===//

/// What every rank of a training run shares (read-only while they run, but
/// for each rank's own slot of `reports`).
struct Session {
  std::shared_ptr<const Plan> plan;
  const TrainOptions *options;
  /// Each rank's inputs and the data feeding them.
  std::vector<std::vector<Feed>> feeds;
  int64_t samples = 0;
  /// The rank whose `loss` output is reported, and that output.
  int lossRank = 0;
  size_t lossIndex = 0;
  /// The step to start at, and the checkpoint to start from.
  int64_t first = 0;
  CheckpointIndex resumed;
  std::vector<std::vector<int>> holders;
  /// Per rank, its executor's report after the last step.
  std::vector<RunReport> reports;
  /// The reported loss of every step (written by the loss rank).
  std::vector<double> losses;
  /// With TrainOptions::keepState, every state tensor whole (written by
  /// rank 0).
  std::map<std::string, HostTensor> state;
};

void printReportLines(const RunReport &report, const std::string &prefix) {
  if (!report.cudaGraphs.empty())
    std::fprintf(stderr, "%sloom-run: CUDA graphs: %s\n", prefix.c_str(),
                 report.cudaGraphs.c_str());
  if (!report.launchGroups.empty())
    std::fprintf(stderr, "%sloom-run: launch groups: %s\n", prefix.c_str(),
                 report.launchGroups.c_str());
  if (!report.matmulEpilogues.empty())
    std::fprintf(stderr, "%sloom-run: matmul epilogues: %s\n", prefix.c_str(),
                 report.matmulEpilogues.c_str());
  if (!report.matmulTuning.empty())
    std::fprintf(stderr, "%sloom-run: matmul tuning: %s\n", prefix.c_str(),
                 report.matmulTuning.c_str());
}

/// Writes this rank's file of a checkpoint after `step` steps, and the
/// index once every rank's file is in place (rank 0). Each file is written
/// aside first: the previous checkpoint is replaced only once every rank
/// has written its new file.
Status writeCheckpoint(const RankContext &context, const Session &session,
                       const Executor &executor, int64_t step) {
  const std::string &dir = session.options->checkpointDir;
  mkdir(dir.c_str(), 0777);
  std::string path = dir + "/" + rankCheckpointFile(context.rank);
  std::string temporary = path + ".tmp";
  if (Status status = writeRankCheckpoint(temporary, *session.plan, executor,
                                          context.rank, step);
      !status)
    return status;
  if (Status status = barrier(context); !status) {
    std::remove(temporary.c_str());
    return status;
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::string reason = std::strerror(errno);
    std::remove(temporary.c_str());
    return Status::error("cannot write checkpoint " + path + ": " + reason);
  }
  if (Status status = barrier(context); !status)
    return status;
  if (context.rank != 0)
    return Status::ok();
  return writeFileAtomically(
      dir + "/index",
      formatCheckpointIndex(makeCheckpointIndex(*session.plan, step)));
}

/// The state weights by tensor: each name's weights (one, or the slices
/// of a sharded tensor), names in the order of their first weight.
std::vector<std::vector<size_t>> stateTensors(const Plan &plan) {
  std::vector<std::vector<size_t>> tensors;
  std::map<std::string, size_t> position;
  for (size_t id : stateWeights(plan)) {
    auto [it, inserted] =
        position.try_emplace(plan.weights[id].name, tensors.size());
    if (inserted)
      tensors.emplace_back();
    tensors[it->second].push_back(id);
  }
  return tensors;
}

/// Gathers whole state tensors: the tensor of `ids` (a whole weight or
/// the slices of one) goes to rank `destination(ids)`. Each weight comes
/// from the lowest rank that holds it, over the host communicator (between
/// threads or processes alike), and a rank assembles the slices it
/// receives. `values` receives the tensors this rank is the destination of,
/// by name. Every rank must call it.
Status gatherTensors(
    const RankContext &context, const Session &session,
    const Executor &executor,
    const std::function<int(const std::vector<size_t> &)> &destination,
    std::map<std::string, HostTensor> &values) {
  const Plan &plan = *session.plan;
  // Tensors in flight: deques keep their buffers where they are.
  std::deque<HostTensor> sent, received;
  std::vector<std::pair<size_t, const HostTensor *>> parts;
  std::vector<std::vector<size_t>> tensors = stateTensors(plan);
  std::vector<std::shared_ptr<CommEvent>> events;
  for (const std::vector<size_t> &ids : tensors) {
    int target = destination(ids);
    for (size_t id : ids) {
      const Weight &weight = plan.weights[id];
      int owner = session.holders[id].front();
      if (owner == context.rank && target == context.rank) {
        received.push_back(executor.weight(id));
        parts.push_back({id, &received.back()});
      } else if (owner == context.rank) {
        sent.push_back(executor.weight(id));
        events.push_back(context.host->send(sent.back().data.data(),
                                            weight.bytes, target, int(id)));
      } else if (target == context.rank) {
        HostTensor &value = received.emplace_back();
        value.name = weight.name;
        value.dtype = weight.dtype;
        value.shape = weight.shape;
        value.data.resize(weight.bytes);
        events.push_back(context.host->recv(value.data.data(), weight.bytes,
                                            owner, int(id)));
        parts.push_back({id, &value});
      }
    }
  }
  Status gathered = Status::ok();
  for (const std::shared_ptr<CommEvent> &event : events)
    if (Status status = event->wait(); !status && gathered)
      gathered = status;
  if (!gathered)
    return gathered;
  // Whole weights as they are; slices into their tensor.
  for (const auto &[id, part] : parts) {
    const Weight &weight = plan.weights[id];
    if (!weight.isSlice()) {
      values[weight.name] = *part;
      continue;
    }
    auto [it, inserted] = values.try_emplace(weight.name);
    HostTensor &whole = it->second;
    if (inserted) {
      whole.name = weight.name;
      whole.dtype = weight.dtype;
      whole.shape = weight.globalShape;
      whole.data.resize(uint64_t(numElements(weight.globalShape)) *
                        dtypeSize(weight.dtype));
    }
    insertSlice(whole.data.data(), part->data.data(), dtypeSize(weight.dtype),
                weight.globalShape, weight.sliceOffsets, weight.shape);
  }
  return Status::ok();
}

/// --save-weights: every state tensor, whole, written by the lowest rank
/// that holds a weight of it (the slices of a sharded tensor are gathered
/// there); rank 0 says so once all are written.
Status saveWeights(const RankContext &context, const Session &session,
                   const Executor &executor) {
  const std::string &dir = session.options->saveWeightsDir;
  std::map<std::string, HostTensor> values;
  if (Status status = gatherTensors(
          context, session, executor,
          [&](const std::vector<size_t> &ids) {
            int lowest = session.holders[ids.front()].front();
            for (size_t id : ids)
              lowest = std::min(lowest, session.holders[id].front());
            return lowest;
          },
          values);
      !status)
    return status;
  for (const auto &[name, value] : values)
    if (Status status = writeNpyFile(dir + "/" + npyFileName(name), value);
        !status)
      return status;
  if (Status status = barrier(context); !status)
    return status;
  if (context.rank == 0)
    std::printf("saved %zu state weights to %s\n",
                stateTensors(*session.plan).size(), dir.c_str());
  return Status::ok();
}

/// --save: every state tensor, whole, comes to rank 0, which writes the
/// model.
Status saveModel(const RankContext &context, const Session &session,
                 const Executor &executor) {
  const TrainOptions &options = *session.options;
  std::map<std::string, HostTensor> values;
  if (Status status = gatherTensors(
          context, session, executor,
          [](const std::vector<size_t> &) { return 0; }, values);
      !status)
    return status;
  if (context.rank != 0)
    return Status::ok();
  StatusOr<size_t> saved = options.saveModel(values);
  if (!saved)
    return saved.status();
  std::printf("saved %s (%zu trained initializers)\n", options.savePath.c_str(),
              *saved);
  return Status::ok();
}

/// Every rank's `mine` (the same size on all ranks), in rank order, over
/// the host communicator (between threads or processes alike).
Status allGatherInts(const RankContext &context,
                     const std::vector<int64_t> &mine,
                     std::vector<int64_t> &all) {
  if (context.size == 1 || mine.empty()) {
    all = mine;
    all.resize(mine.size() * size_t(context.size));
    return Status::ok();
  }
  all.resize(mine.size() * size_t(context.size));
  return context.host
      ->allGather(mine.data(), all.data(), int64_t(mine.size()), DType::I64)
      ->wait();
}

/// --report-json: every rank's usage comes to rank 0 (an all-gather over
/// the host communicator, between threads or processes alike), which
/// writes the file.
Status writeUsageReport(const RankContext &context, const Session &session,
                        const Executor &executor) {
  RankUsage usage = rankUsage(*session.plan, context.rank, executor.report());
  usage.bubbleFraction =
      measuredBubble(*session.plan, context.rank, executor.report().trace);
  std::vector<int64_t> mine = packUsage(usage);
  std::vector<int64_t> all;
  if (Status status = allGatherInts(context, mine, all); !status)
    return status;
  if (context.rank != 0)
    return Status::ok();
  std::vector<RankUsage> usages;
  for (int rank = 0; rank < context.size; ++rank)
    usages.push_back(unpackUsage(all.data() + size_t(rank) * mine.size()));
  return writeFileAtomically(session.options->reportJsonPath,
                             formatReportJson(usages));
}

/// --trace: every rank's events of the last step come to rank 0 (two
/// all-gathers over the host communicator: the counts, then the events
/// padded to the largest count), which writes the trace.
Status writeRunTrace(const RankContext &context, const Session &session,
                     const Executor &executor) {
  const std::vector<TraceEvent> &events = executor.report().trace;
  std::vector<int64_t> counts;
  if (Status status = allGatherInts(context, {int64_t(events.size())}, counts);
      !status)
    return status;
  int64_t most = *std::max_element(counts.begin(), counts.end());
  std::vector<int64_t> mine(size_t(most) * 4, 0);
  for (size_t i = 0; i < events.size(); ++i) {
    mine[4 * i] = int64_t(events[i].index);
    mine[4 * i + 1] = events[i].collective;
    mine[4 * i + 2] = events[i].startNs;
    mine[4 * i + 3] = events[i].endNs;
  }
  std::vector<int64_t> all;
  if (Status status = allGatherInts(context, mine, all); !status)
    return status;
  if (context.rank != 0)
    return Status::ok();
  std::vector<std::vector<TraceEvent>> ranks(size_t(context.size));
  for (int rank = 0; rank < context.size; ++rank)
    for (int64_t i = 0; i < counts[size_t(rank)]; ++i) {
      const int64_t *packed = all.data() + size_t(rank) * mine.size() + 4 * i;
      ranks[size_t(rank)].push_back(
          {size_t(packed[0]), packed[1] != 0, packed[2], packed[3]});
    }
  return writeFileAtomically(session.options->tracePath,
                             formatTrace(*session.plan, ranks));
}

/// One rank's whole run: its executor, the steps, the checkpoints and the
/// trained state.
Status trainRank(RankContext &context, Session &session) {
  const TrainOptions &options = *session.options;
  const Plan &plan = *session.plan;
  int rank = context.rank;
  StatusOr<std::unique_ptr<Executor>> created =
      Executor::create(session.plan, rank, context.world, context.executor);
  if (!created)
    return Status::error(options.launch.model + ": " +
                         created.status().message());
  Executor &executor = **created;
  armTestKill(executor, options.launch, context);
  bool reporting = rank == session.lossRank;

  int64_t first = session.first;
  if (!options.resumeDir.empty()) {
    if (Status status = loadRankCheckpoint(options.resumeDir, session.resumed,
                                           plan, rank, executor);
        !status)
      return status;
    if (reporting)
      std::printf("resumed from %s after step %lld\n",
                  options.resumeDir.c_str(), (long long)first);
  }

  std::unique_ptr<FILE, int (*)(FILE *)> metrics(nullptr, std::fclose);
  if (reporting && !options.metricsPath.empty()) {
    metrics.reset(std::fopen(options.metricsPath.c_str(), first ? "a" : "w"));
    if (!metrics)
      return Status::error("cannot write " + options.metricsPath + ": " +
                           std::strerror(errno));
  }

  const std::vector<Feed> &feeds = session.feeds[rank];
  Sampler sampler(std::max<int64_t>(session.samples, 1), options.shuffle,
                  options.seed);
  Progress progress(first, options.steps);
  bool printing = reporting && !options.quiet;
  std::vector<int64_t> rows(options.batchSize);
  auto fatal = [&](Status status) {
    if (printing)
      progress.finishEarly();
    return status;
  };
  for (int64_t step = first; step < options.steps; ++step) {
    auto start = std::chrono::steady_clock::now();
    if (!feeds.empty())
      for (int64_t j = 0; j < options.batchSize; ++j)
        rows[j] = sampler.sampleAt(step * options.batchSize + j);
    for (const Feed &feed : feeds)
      if (Status status = executor.setInput(feed.name, gatherRows(feed, rows));
          !status)
        return fatal(status);
    bool profile = options.profileLastStep && step + 1 == options.steps;
    // The last step is traced for --trace and for --report-json's
    // measured pipeline bubble.
    executor.setTracing(
        (!options.tracePath.empty() || !options.reportJsonPath.empty()) &&
        step + 1 == options.steps);
    if (Status status = executor.run(profile); !status)
      return fatal(Status::error("step " + std::to_string(step) + ": " +
                                 status.message()));
    if (reporting) {
      HostTensor lossTensor = executor.output(session.lossIndex);
      double loss =
          lossTensor.dtype == DType::F32
              ? double(*reinterpret_cast<const float *>(lossTensor.data.data()))
              : *reinterpret_cast<const double *>(lossTensor.data.data());
      double seconds = std::chrono::duration<double>(
                           std::chrono::steady_clock::now() - start)
                           .count();
      if (!std::isfinite(loss))
        return fatal(Status::error(
            "step " + std::to_string(step) + ": the loss is " +
            (std::isnan(loss) ? "NaN" : "infinite") +
            "; training stopped (try a lower --lr or --clip-grad-norm). The "
            "last checkpoint, if any, is kept; the model was not saved"));
      double rate = double(options.batchSize) / seconds;
      if (metrics) {
        std::fprintf(metrics.get(),
                     "{\"step\": %lld, \"loss\": %.9g, \"step_ms\": %.3f, "
                     "\"samples_per_s\": %.2f}\n",
                     (long long)step, loss, seconds * 1e3, rate);
        std::fflush(metrics.get());
      }
      session.losses.push_back(loss);
      if (printing)
        progress.report(step, loss, rate);
    }
    bool last = step + 1 == options.steps;
    if (!options.checkpointDir.empty() &&
        (last || (options.checkpointEvery > 0 &&
                  (step + 1) % options.checkpointEvery == 0)))
      if (Status status = writeCheckpoint(context, session, executor, step + 1);
          !status)
        return fatal(status);
  }
  metrics.reset();
  session.reports[rank] = executor.report();

  // What the backend says about the steps, in rank order.
  for (int other = 0; other < context.size; ++other) {
    if (other == rank)
      printReportLines(session.reports[rank], context.prefix());
    if (Status status = barrier(context); !status)
      return status;
  }
  if (!options.reportJsonPath.empty())
    if (Status status = writeUsageReport(context, session, executor); !status)
      return status;
  if (!options.tracePath.empty())
    if (Status status = writeRunTrace(context, session, executor); !status)
      return status;
  if (!options.saveWeightsDir.empty())
    if (Status status = saveWeights(context, session, executor); !status)
      return status;
  if (!options.savePath.empty() && options.saveModel)
    if (Status status = saveModel(context, session, executor); !status)
      return status;
  if (options.keepState) {
    std::map<std::string, HostTensor> values;
    if (Status status = gatherTensors(
            context, session, executor,
            [](const std::vector<size_t> &) { return 0; }, values);
        !status)
      return status;
    if (context.rank == 0)
      session.state = std::move(values);
  }
  return Status::ok();
}

} // namespace

int loomrt::runTraining(std::shared_ptr<const Plan> plan, const Dataset &data,
                        const TrainOptions &options,
                        std::vector<RankReport> &reports) {
  TrainResult result;
  int status = runTraining(std::move(plan), data, options, result);
  reports = std::move(result.reports);
  return status;
}

int loomrt::runTraining(std::shared_ptr<const Plan> plan, const Dataset &data,
                        const TrainOptions &options, TrainResult &result) {
  const std::string &model = options.launch.model;
  Session session;
  session.plan = plan;
  session.options = &options;

  // The loss is the lowest rank's that has one.
  int lossRank = -1;
  for (const RankProgram &program : plan->ranks) {
    for (size_t i = 0; i < program.outputs.size() && lossRank < 0; ++i)
      if (program.outputs[i].name == "loss") {
        lossRank = program.rank;
        session.lossIndex = i;
      }
    if (lossRank >= 0)
      break;
  }
  const Binding *loss = lossRank < 0
                            ? nullptr
                            : &plan->ranks[lossRank].outputs[session.lossIndex];
  if (!loss || loss->ref.elements() != 1 ||
      (loss->ref.dtype != DType::F32 && loss->ref.dtype != DType::F64))
    return fail(model + ": not a training plan (it has no scalar f32/f64 "
                        "output 'loss')");
  session.lossRank = lossRank;
  if (stateWeights(*plan).empty())
    return fail(model + ": the plan updates no weights");
  session.holders = stateWeightHolders(*plan);

  if (Status status =
          bindFeeds(*plan, data, options, session.feeds, session.samples);
      !status)
    return fail(status.message());

  if (!options.resumeDir.empty()) {
    StatusOr<CheckpointIndex> index = readCheckpointIndex(options.resumeDir);
    if (!index)
      return fail(index.status().message());
    if (Status status =
            checkCheckpointMatches(*index, *plan, options.resumeDir);
        !status)
      return fail(status.message());
    session.resumed = std::move(*index);
    session.first = session.resumed.step;
    if (session.first >= options.steps)
      return fail("checkpoint " + options.resumeDir + " is at step " +
                  std::to_string(session.first) + ", not before --steps " +
                  std::to_string(options.steps) + "; nothing to do");
  }

  // Found unwritable now rather than after the steps.
  if (!options.saveWeightsDir.empty())
    if (Status status = makeFolder(options.saveWeightsDir); !status)
      return fail("--save-weights: " + status.message());

  session.reports.resize(plan->ranks.size());
  LaunchOptions launch = options.launch;
  launch.plan = plan.get();
  StatusOr<LaunchResult> launched =
      launchRanks(int(plan->ranks.size()), launch, [&](RankContext &context) {
        return trainRank(context, session);
      });
  if (!launched)
    return fail(launched.status().message());
  bool multi = launched->ranks > 1;
  for (const RankOutcome &outcome : launched->outcomes)
    if (!outcome.status)
      fail((multi ? "rank " + std::to_string(outcome.rank) + ": " : "") +
           outcome.status.message());
  if (!launched->ok())
    return 1;
  for (const RankOutcome &outcome : launched->outcomes)
    result.reports.push_back({outcome.rank, session.reports[outcome.rank]});
  result.losses = std::move(session.losses);
  result.state = std::move(session.state);
  return 0;
}
