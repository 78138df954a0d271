//===- Calibrate.cpp - loom-run --calibrate -------------------------------===//
//
// Each measurement is a one-instruction-kind plan (R copies of a matmul, an
// elementwise add, or an all-reduce) built in memory, run by every rank at
// once; its time is the slowest rank's wall time per instruction, the best
// of three runs. The fits:
//   - GEMMs: the peak of a precision is its best measured rate; the half
//     dimension h of `rate(d) = peak d / (d + h)` is the median of
//     d (peak / rate(d) - 1) over the other sizes;
//   - memory: bytes moved by a large add per second; the kernel overhead
//     is the time of an add of one element;
//   - the link: least squares of `t = a + b * bytes sent` over all-reduce
//     sizes; latency a / (2 (n - 1)) per step, bandwidth 1 / b; the same
//     for all-gathers and reduce-scatters (a / (n - 1) per step), each
//     kind's own link (`by_kind`);
//   - kernels by kind (CPU): attention's rate and the cross-entropy's
//     bandwidth over the work loomrt::estimateInstructionWork counts, and
//     each elementwise operation's time per element.
// On a GPU the GEMMs (squares and rectangles) and the kinds (each at
// several sizes) are fitted by least squares to the cost model's own form,
// the launch overhead included (CalibrationFits.h): a GEMM's peak and half
// dimension, a kind's rate and its latency on top of the launch.
//
//===----------------------------------------------------------------------===//

#include "Calibrate.h"
#include "CalibrationFits.h"

#include "loom/Analysis/LinkModel.h"
#include "loom/Runtime/Device.h"
#include "loom/Runtime/Executor.h"
#include "loom/Runtime/InstructionWork.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <unistd.h>

using namespace loomrt;

namespace {

TensorRef arena(uint64_t offset, DType dtype, std::vector<int64_t> shape) {
  TensorRef ref;
  ref.offset = offset;
  ref.dtype = dtype;
  ref.shape = std::move(shape);
  return ref;
}

uint64_t align(uint64_t bytes) { return (bytes + 255) / 256 * 256; }

/// A plan whose `ranks` ranks each run `inst` `repeats` times in an arena
/// of `arenaBytes`.
Plan repeatedPlan(int ranks, const Instruction &inst, uint64_t arenaBytes,
                  int repeats) {
  Plan plan;
  for (int r = 0; r < ranks; ++r) {
    RankProgram &program = plan.ranks.emplace_back();
    program.rank = r;
    program.arenaBytes = arenaBytes;
    program.instructions.assign(size_t(repeats), inst);
  }
  return plan;
}

/// `repeats` matmuls of [m, k] x [k, n] in `dtype`.
Plan gemmPlan(int ranks, int64_t m, int64_t k, int64_t n, DType dtype,
              int repeats) {
  uint64_t a = align(uint64_t(m * k) * dtypeSize(dtype));
  uint64_t b = align(uint64_t(k * n) * dtypeSize(dtype));
  uint64_t c = align(uint64_t(m * n) * dtypeSize(dtype));
  Instruction inst;
  inst.kernel = "matmul";
  inst.inputs = {arena(0, dtype, {m, k}), arena(a, dtype, {k, n})};
  inst.outputs = {arena(a + b, dtype, {m, n})};
  return repeatedPlan(ranks, inst, a + b + c, repeats);
}

/// `repeats` elementwise adds of `elements` floats.
Plan addPlan(int ranks, int64_t elements, int repeats) {
  uint64_t bytes = align(uint64_t(elements) * 4);
  Instruction inst;
  inst.kernel = "elementwise";
  inst.inputs = {arena(0, DType::F32, {elements}),
                 arena(bytes, DType::F32, {elements})};
  inst.outputs = {arena(2 * bytes, DType::F32, {elements})};
  ProgramOp add;
  add.op = "add";
  add.operands = {0, 1};
  inst.program = {add};
  inst.yields = {2};
  return repeatedPlan(ranks, inst, 3 * bytes, repeats);
}

/// `repeats` collectives of `kind` (all_reduce, all_gather or
/// reduce_scatter) over every rank, of `elements` floats in all (a
/// multiple of the ranks): the all-reduce's input and output, the
/// all-gather's output, the reduce-scatter's input.
Plan collectivePlan(loomcost::CollectiveKind kind, int ranks, int64_t elements,
                    int repeats) {
  std::vector<int> all;
  for (int r = 0; r < ranks; ++r)
    all.push_back(r);
  int64_t in =
      kind == loomcost::CollectiveKind::AllGather ? elements / ranks : elements;
  int64_t out = kind == loomcost::CollectiveKind::ReduceScatter
                    ? elements / ranks
                    : elements;
  Instruction inst;
  inst.kind = Instruction::Kind::Collective;
  inst.kernel = loomcost::kindName(kind);
  inst.inputs = {arena(0, DType::F32, {in})};
  inst.outputs = {arena(align(uint64_t(in) * 4), DType::F32, {out})};
  inst.attrs["group"] = int64_t(0);
  if (kind != loomcost::CollectiveKind::AllGather)
    inst.attrs["op"] = std::string("sum");
  Plan plan = repeatedPlan(
      ranks, inst, align(uint64_t(in) * 4) + align(uint64_t(out) * 4), repeats);
  plan.groups = {all};
  return plan;
}

/// The link a kind's measurements (bytes each rank sends, seconds) fit by
/// least squares of `t = a + b * bytes`: bandwidth 1 / b, latency a per
/// ring step.
loomcost::LinkModel::KindLink
fitLink(const std::vector<std::pair<double, double>> &points,
        loomcost::CollectiveKind kind, int ranks) {
  double sx = 0, sy = 0, sxx = 0, sxy = 0, k = double(points.size());
  for (const auto &[x, y] : points) {
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  double slope = (k * sxy - sx * sy) / std::max(1e-30, k * sxx - sx * sx);
  double intercept = (sy - slope * sx) / k;
  loomcost::LinkModel::KindLink link;
  link.gigabytesPerSecond = (slope > 0 ? 1.0 / slope : 1e12) / 1e9;
  link.latencyMicroseconds =
      std::max(0.0, intercept) / double(loomcost::ringSteps(kind, ranks)) * 1e6;
  return link;
}

/// One kernel instruction calibration times by kind, with the arena and
/// the weights it needs: what the cost model counts its work from, and the
/// plan that runs it.
struct KernelProbe {
  Instruction inst;
  uint64_t arenaBytes = 0;
  std::vector<Weight> weights;
  std::vector<uint8_t> data;

  /// `ranks` ranks each running the instruction `repeats` times.
  Plan plan(int ranks, int repeats) const {
    Plan plan = repeatedPlan(ranks, inst, arenaBytes, repeats);
    plan.weights = weights;
    plan.data = data;
    return plan;
  }
};

/// The shapes kernels are calibrated by kind at: a CPU's are the example
/// GPT's, a GPU's GPT-2-small's (at a CPU's sizes a GPU kernel measures its
/// launch, not its rate), with the attention in the precision a GPU trains
/// in.
struct ProbeShapes {
  int64_t batch, seq, heads, headDim;
  DType attention;
  int64_t entropyRows, classes;
  int64_t normRows, width;

  static ProbeShapes forDevice(bool gpu) {
    if (gpu && tiny())
      return {8, 32, 2, 32, DType::BF16, 256, 256, 256, 64};
    if (gpu)
      return {8, 1024, 12, 64, DType::BF16, 8192, 8192, 8192, 768};
    return {2, 128, 4, 64, DType::F32, 512, 8192, 1024, 768};
  }

  /// LOOM_CALIBRATE_TINY=1: a GPU's calibration at shapes small enough for
  /// the host CUDA emulator, so that the test suite runs the GPU path (its
  /// probes, fits and file) without a GPU. The figures mean nothing.
  static bool tiny() {
    const char *value = std::getenv("LOOM_CALIBRATE_TINY");
    return value && std::string(value) == "1";
  }
};

/// An attention (or its backward) of GPT's shape: qkv packed,
/// sequence-major [batch, seq, 3, heads, dim], causal (the mask a weight:
/// true above the diagonal), in `shapes.attention` (its log-sum-exp f32).
KernelProbe attentionProbe(bool backward, const ProbeShapes &shapes) {
  const int64_t b = shapes.batch, s = shapes.seq, h = shapes.heads,
                d = shapes.headDim;
  const DType dtype = shapes.attention;
  const uint64_t size = dtypeSize(dtype);
  KernelProbe probe;
  Weight mask;
  mask.name = "causal_mask";
  mask.dtype = DType::I1;
  mask.shape = {1, 1, s, s};
  mask.bytes = uint64_t(s * s);
  probe.weights = {mask};
  probe.data.assign(size_t(s * s), 0);
  for (int64_t i = 0; i < s; ++i)
    for (int64_t j = i + 1; j < s; ++j)
      probe.data[size_t(i * s + j)] = 1;
  TensorRef maskRef;
  maskRef.space = TensorRef::Space::Weight;
  maskRef.dtype = DType::I1;
  maskRef.shape = mask.shape;
  std::vector<int64_t> qkv = {b, s, 3, h, d}, out = {b, s, h, d},
                       lse = {b, s, h};
  uint64_t qkvBytes = align(uint64_t(numElements(qkv)) * size);
  uint64_t outBytes = align(uint64_t(numElements(out)) * size);
  uint64_t lseBytes = align(uint64_t(numElements(lse)) * 4);
  Instruction &inst = probe.inst;
  inst.attrs["packed_qkv"] = int64_t(1);
  inst.attrs["seq_major"] = int64_t(1);
  inst.attrs["scale"] = 1.0 / std::sqrt(double(d));
  if (!backward) {
    inst.kernel = "attention";
    inst.inputs = {arena(0, dtype, qkv), maskRef};
    inst.outputs = {arena(qkvBytes, dtype, out),
                    arena(qkvBytes + outBytes, DType::F32, lse)};
    probe.arenaBytes = qkvBytes + outBytes + lseBytes;
    return probe;
  }
  // qkv, dout, lse, out, mask -> dqkv.
  inst.kernel = "attention_backward";
  uint64_t at = qkvBytes;
  TensorRef dout = arena(at, dtype, out);
  at += outBytes;
  TensorRef lseRef = arena(at, DType::F32, lse);
  at += lseBytes;
  TensorRef outRef = arena(at, dtype, out);
  at += outBytes;
  inst.inputs = {arena(0, dtype, qkv), dout, lseRef, outRef, maskRef};
  inst.outputs = {arena(at, dtype, qkv)};
  probe.arenaBytes = at + qkvBytes;
  return probe;
}

/// A cross-entropy with its gradient (the training step's form: logits,
/// labels, scale -> loss, dlogits), f32: its exp and log per logit make it
/// several times slower than its bytes on a CPU.
KernelProbe crossEntropyProbe(const ProbeShapes &shapes) {
  const int64_t rows = shapes.entropyRows, classes = shapes.classes;
  uint64_t logits = align(uint64_t(rows * classes) * 4);
  KernelProbe probe;
  // The labels are a weight of zeros (class 0 for every row): an arena's
  // bytes are whatever the device's memory held, and a label out of range
  // is an error.
  Weight labels;
  labels.name = "labels";
  labels.dtype = DType::I64;
  labels.shape = {rows};
  labels.bytes = uint64_t(rows) * 8;
  probe.weights = {labels};
  probe.data.assign(size_t(labels.bytes), 0);
  TensorRef labelsRef;
  labelsRef.space = TensorRef::Space::Weight;
  labelsRef.dtype = DType::I64;
  labelsRef.shape = labels.shape;
  Instruction &inst = probe.inst;
  inst.kernel = "cross_entropy";
  inst.attrs["reduction"] = std::string("mean");
  inst.inputs = {arena(0, DType::F32, {rows, classes}), labelsRef,
                 arena(logits, DType::F32, {})};
  inst.outputs = {arena(logits + 256, DType::F32, {}),
                  arena(logits + 512, DType::F32, {rows, classes})};
  probe.arenaBytes = 2 * logits + 512;
  return probe;
}

/// A layer norm (or its backward) over the last dimension, f32 (a GPT's
/// width): two passes over each row, with its statistics (the backward's in
/// f64), so its rate is not a copy's.
KernelProbe layerNormProbe(bool backward, const ProbeShapes &shapes) {
  const int64_t rows = shapes.normRows, width = shapes.width;
  uint64_t x = align(uint64_t(rows * width) * 4), vector = align(width * 4);
  KernelProbe probe;
  Instruction &inst = probe.inst;
  inst.attrs["axis"] = int64_t(1);
  inst.attrs["epsilon"] = 1e-5;
  TensorRef input = arena(0, DType::F32, {rows, width});
  TensorRef scale = arena(x, DType::F32, {width});
  if (!backward) {
    // X, scale, bias -> Y.
    inst.kernel = "layer_norm";
    inst.inputs = {input, scale, arena(x + vector, DType::F32, {width})};
    inst.outputs = {arena(x + 2 * vector, DType::F32, {rows, width})};
    probe.arenaBytes = 2 * x + 2 * vector;
    return probe;
  }
  // X, scale, dY -> dX, dscale, dbias.
  inst.kernel = "layer_norm_backward";
  uint64_t at = x + vector;
  inst.inputs = {input, scale, arena(at, DType::F32, {rows, width})};
  at += x;
  inst.outputs = {arena(at, DType::F32, {rows, width}),
                  arena(at + x, DType::F32, {width}),
                  arena(at + x + vector, DType::F32, {width})};
  probe.arenaBytes = at + x + 2 * vector;
  return probe;
}

/// `repeats` elementwise kernels over `elements` f32 values (few enough to
/// stay in cache) whose program chains `chain` of `op` (x op x for a
/// binary one): compute-bound, so the time per element and operation is
/// what `op` costs.
Plan elementOpPlan(int ranks, const std::string &op, bool binary,
                   int64_t elements, int chain, int repeats) {
  uint64_t bytes = align(uint64_t(elements) * 4);
  Instruction inst;
  inst.kernel = "elementwise";
  inst.inputs = {arena(0, DType::F32, {elements})};
  inst.outputs = {arena(bytes, DType::F32, {elements})};
  for (int i = 0; i < chain; ++i) {
    ProgramOp step;
    step.op = op;
    step.operands = binary ? std::vector<int>{i, i} : std::vector<int>{i};
    inst.program.push_back(step);
  }
  inst.yields = {chain};
  return repeatedPlan(ranks, inst, 2 * bytes, repeats);
}

/// Operations timed per element, and whether they take two operands.
const std::pair<const char *, bool> kElementOps[] = {
    {"add", true},      {"mul", true},         {"div", true},
    {"max", true},      {"pow", true},         {"neg", false},
    {"sqrt", false},    {"rsqrt", false},      {"exp", false},
    {"log", false},     {"erf", false},        {"tanh", false},
    {"sigmoid", false}, {"reciprocal", false}, {"gelu", false},
    {"abs", false},     {"relu", false}};

class Calibrator {
public:
  Calibrator(RankContext &context) : context(context) {}

  /// Seconds per instruction of the plan `make(repeats)` builds, every
  /// rank running it at once: the slowest rank's, after a warm-up run,
  /// with repeats grown until a run takes `target` seconds.
  StatusOr<double> time(const std::function<Plan(int)> &make, int repeats,
                        double target = 0.1) {
    if (ProbeShapes::tiny())
      target = std::min(target, 0.005);
    for (;;) {
      auto plan = std::make_shared<const Plan>(make(repeats));
      StatusOr<std::unique_ptr<Executor>> executor =
          Executor::create(plan, context.rank, context.world, context.executor);
      if (!executor)
        return executor.status();
      if (Status status = (*executor)->run(); !status)
        return status;
      // The best of three runs: a shared machine's transient slowdowns
      // are not what the kernels cost.
      double best = 0;
      for (int attempt = 0; attempt < 3; ++attempt) {
        if (Status status = barrier(context); !status)
          return status;
        auto start = std::chrono::steady_clock::now();
        if (Status status = (*executor)->run(); !status)
          return status;
        double seconds = std::chrono::duration<double>(
                             std::chrono::steady_clock::now() - start)
                             .count();
        double slowest = seconds;
        if (context.size > 1 && context.host) {
          if (Status status = context.host
                                  ->allReduce(&seconds, &slowest, 1, DType::F64,
                                              ReduceOp::Max)
                                  ->wait();
              !status)
            return status;
        }
        best = attempt == 0 ? slowest : std::min(best, slowest);
        // Every rank sees the same slowest time, so all grow alike.
        if (slowest < target && repeats < (1 << 16))
          break;
      }
      if (best >= target || repeats >= (1 << 16))
        return best / repeats;
      double slowest = best;
      repeats = int(std::min<double>(
          1 << 16, repeats * std::max(2.0, 1.5 * target / slowest)));
    }
  }

private:
  RankContext &context;
};

double median(std::vector<double> values) {
  if (values.empty())
    return 0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

std::string number(double value) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.6g", value);
  return text;
}

} // namespace

int loomrun::calibrate(const std::string &outPath, int ranks,
                       const LaunchOptions &launch) {
  bool gpu = launch.executor.device == Device::CUDA;
  std::vector<int64_t> sizes =
      gpu && ProbeShapes::tiny() ? std::vector<int64_t>{16, 32, 64}
      : gpu ? std::vector<int64_t>{256, 1024, 2048, 4096, 8192}
            : std::vector<int64_t>{32, 64, 128, 256, 512, 1024};
  // Rates by precision and size (the record), and every GEMM's time by
  // precision (the fit).
  std::map<std::string, std::map<int64_t, double>> gemm;
  std::map<std::string, std::vector<TimedGemm>> gemmTimes;
  double bandwidth = 0, overhead = 0, latency = 0, linkBandwidth = 0;
  // By kind: bytes each rank sent, seconds.
  std::map<loomcost::CollectiveKind, std::vector<std::pair<double, double>>>
      collectives;
  std::map<std::string, std::vector<TimedWork>> flopTimes, byteTimes;
  std::map<std::string, std::vector<TimedAttention>> attentionTimes;
  std::map<std::string, double> elementNs, shapeRates, shapeBandwidths;
  std::mutex lock;
  int plannedRanks = ranks;
  StatusOr<LaunchResult> launched =
      launchRanks(plannedRanks, launch, [&](RankContext &context) -> Status {
        Calibrator calibrator(context);
        int n = context.size;
        for (DType dtype : {DType::F32, DType::BF16})
          for (int64_t d : sizes) {
            StatusOr<double> seconds = calibrator.time(
                [&](int repeats) {
                  return gemmPlan(n, d, d, d, dtype, repeats);
                },
                1);
            if (!seconds)
              return seconds.status();
            std::lock_guard<std::mutex> guard(lock);
            gemm[dtypeName(dtype)][d] = 2.0 * double(d * d * d) / *seconds;
            if (context.rank == 0)
              gemmTimes[dtypeName(dtype)].push_back({d, d, d, *seconds});
          }
        int64_t large =
            gpu ? (ProbeShapes::tiny() ? int64_t(1) << 12 : int64_t(1) << 26)
                : (int64_t(1) << 23);
        StatusOr<double> add = calibrator.time(
            [&](int repeats) { return addPlan(n, large, repeats); }, 1);
        if (!add)
          return add.status();
        StatusOr<double> tiny = calibrator.time(
            [&](int repeats) { return addPlan(n, 1, repeats); }, 64, 0.05);
        if (!tiny)
          return tiny.status();
        // Kernels by kind: attention's GEMM-like rate (its FLOPs as the
        // cost model counts them), the cross-entropy's and layer norms'
        // bandwidths, and each elementwise operation's time per element.
        // On a GPU each kind is timed at several sizes, for the latency of
        // a kernel with few thread blocks (an attention over one sequence
        // is 3x slower per FLOP than over eight on an H200), and the
        // elementwise operations, bound by the memory's bandwidth there,
        // are not timed one by one.
        std::map<std::string, std::vector<TimedWork>> flopKinds, byteKinds;
        std::map<std::string, std::vector<TimedAttention>> attentionKinds;
        std::map<std::string, double> ns, byShape, byShapeBytes;
        ProbeShapes shapes = ProbeShapes::forDevice(gpu);
        std::vector<int64_t> batches = {shapes.batch}, rows = {1};
        // Attention's shapes: on a GPU, GPT-2's at 1 to 8 sequences; on a
        // CPU, batches, sequences, heads and head dimensions varied apart,
        // because the CPU kernel's time follows its scores and its query
        // rows' elements, not its FLOPs (the example GPT's attention, at a
        // head dimension of 32 and 64 positions, ran at half the rate
        // measured at 64 and 128).
        std::vector<std::array<int64_t, 4>> attentionShapes;
        if (gpu) {
          batches = {1, 2, 4, shapes.batch};
          rows = {8, 1};
          for (int64_t batch : batches)
            attentionShapes.push_back(
                {batch, shapes.seq, shapes.heads, shapes.headDim});
        } else {
          attentionShapes = {{2, 128, 4, 64}, {8, 64, 4, 32},  {2, 128, 4, 32},
                             {4, 64, 4, 64},  {2, 256, 4, 64}, {16, 32, 4, 32},
                             {8, 64, 8, 16},  {2, 128, 4, 128}};
        }
        auto timeProbe = [&](const KernelProbe &probe,
                             const std::string &size) -> Status {
          StatusOr<double> seconds = calibrator.time(
              [&](int repeats) { return probe.plan(n, repeats); }, 1);
          if (!seconds)
            return seconds.status();
          InstructionWork work = estimateInstructionWork(probe.inst);
          bool flops = work.gemmFlops > 0;
          (flops ? flopKinds : byteKinds)[probe.inst.kernel].push_back(
              {flops ? work.gemmFlops : work.bytes, *seconds});
          if (work.scores > 0)
            attentionKinds[probe.inst.kernel].push_back(
                {work.gemmFlops, work.scores, work.rowElements, *seconds});
          if (gpu)
            (flops ? byShape : byShapeBytes)[probe.inst.kernel + " " + size] =
                (flops ? work.gemmFlops : work.bytes) / *seconds;
          return Status::ok();
        };
        for (auto [batch, seq, heads, headDim] : attentionShapes)
          for (bool backward : {false, true}) {
            ProbeShapes sized = shapes;
            sized.batch = batch;
            sized.seq = seq;
            sized.heads = heads;
            sized.headDim = headDim;
            if (Status status = timeProbe(attentionProbe(backward, sized),
                                          "batch " + std::to_string(batch));
                !status)
              return status;
          }
        for (int64_t divisor : rows) {
          ProbeShapes sized = shapes;
          sized.entropyRows /= divisor;
          sized.normRows /= divisor;
          for (const KernelProbe &probe :
               {crossEntropyProbe(sized), layerNormProbe(false, sized),
                layerNormProbe(true, sized)})
            if (Status status = timeProbe(
                    probe, "rows " + std::to_string(
                                         probe.inst.inputs.front().shape[0]));
                !status)
              return status;
        }
        // On a GPU, rectangular bf16 GEMMs beside the square ones: its
        // rate depends on more than the smallest dimension.
        std::vector<int64_t> gemmRows = {512, 2048, 8192};
        std::vector<std::pair<int64_t, int64_t>> gemmWidths = {
            {1024, 1024}, {4096, 4096}, {768, 3072}, {3072, 768}};
        if (ProbeShapes::tiny()) {
          gemmRows = {16, 64};
          gemmWidths = {{32, 32}, {16, 64}};
        }
        if (gpu)
          for (int64_t m : gemmRows)
            for (auto [k, nn] : gemmWidths) {
              StatusOr<double> seconds = calibrator.time(
                  [&](int repeats) {
                    return gemmPlan(n, m, k, nn, DType::BF16, repeats);
                  },
                  1);
              if (!seconds)
                return seconds.status();
              byShape["matmul bf16 " + std::to_string(m) + "x" +
                      std::to_string(k) + "x" + std::to_string(nn)] =
                  2.0 * double(m * k * nn) / *seconds;
              std::lock_guard<std::mutex> guard(lock);
              if (context.rank == 0)
                gemmTimes["bf16"].push_back({m, k, nn, *seconds});
            }
        if (!gpu) {
          const int64_t elements = 1 << 12;
          const int chain = 16;
          for (const auto &[op, binary] : kElementOps) {
            StatusOr<double> seconds = calibrator.time(
                [&](int repeats) {
                  return elementOpPlan(n, op, binary, elements, chain, repeats);
                },
                16, 0.02);
            if (!seconds)
              return seconds.status();
            ns[op] = *seconds / double(elements * chain) * 1e9;
          }
        }
        // Each kind the compiler emits on its own, by size: the bytes each
        // rank sends and the seconds.
        std::map<loomcost::CollectiveKind,
                 std::vector<std::pair<double, double>>>
            measured;
        if (n > 1)
          for (loomcost::CollectiveKind kind :
               {loomcost::CollectiveKind::AllReduce,
                loomcost::CollectiveKind::AllGather,
                loomcost::CollectiveKind::ReduceScatter})
            for (int64_t size : {1 << 10, 1 << 14, 1 << 18, 1 << 21}) {
              int64_t elements = size / n * n;
              StatusOr<double> seconds = calibrator.time(
                  [&](int repeats) {
                    return collectivePlan(kind, n, elements, repeats);
                  },
                  1);
              if (!seconds)
                return seconds.status();
              measured[kind].push_back({double(loomcost::ringBytesSent(
                                            kind, uint64_t(elements) * 4, n)),
                                        *seconds});
            }
        std::lock_guard<std::mutex> guard(lock);
        if (context.rank == 0) {
          bandwidth = 3.0 * double(large) * 4 / *add;
          overhead = *tiny;
          collectives = measured;
          flopTimes = flopKinds;
          attentionTimes = attentionKinds;
          byteTimes = byteKinds;
          elementNs = ns;
          shapeRates = byShape;
          shapeBandwidths = byShapeBytes;
        }
        return Status::ok();
      });
  if (!launched)
    return std::fprintf(stderr, "%s\n", launched.status().message().c_str()), 1;
  for (const RankOutcome &outcome : launched->outcomes)
    if (!outcome.status) {
      std::fprintf(stderr, "rank %d: %s\n", outcome.rank,
                   outcome.status.message().c_str());
      return 1;
    }
  if (launched->processPerRank && launched->outcomes.front().rank != 0)
    return 0;

  // Fits. On a GPU, least squares of the cost model's own form
  // (CalibrationFits.h) over every GEMM, square and rectangular, the launch
  // overhead included: kernels launched back to back overlap their
  // launches, and the largest size's few percent of noise must not become
  // a half dimension. On a CPU, the best rate is the peak and the half
  // dimension the median over the other sizes: small GEMMs run in cache
  // there, faster than large ones, which the model's form cannot follow.
  std::map<std::string, double> peak, halfDim;
  for (const auto &[precision, rates] : gemm) {
    if (gpu) {
      GemmFit fit = fitGemm(gemmTimes[precision], overhead);
      peak[precision] = fit.peak;
      halfDim[precision] = fit.halfDim;
      continue;
    }
    double best = 0;
    for (const auto &[d, rate] : rates)
      best = std::max(best, rate);
    std::vector<double> halves;
    for (const auto &[d, rate] : rates)
      if (rate < best)
        halves.push_back(double(d) * (best / rate - 1));
    peak[precision] = best;
    halfDim[precision] = median(halves);
  }
  // The file has one half dimension: that of the precision the device is
  // clearly fastest in, which is the one it trains in (bf16 on a GPU's
  // tensor cores; f32 on a CPU, whose bf16 GEMMs run in f32 at the same
  // rate give or take the noise).
  std::string fastest = "f32";
  for (const auto &[precision, rate] : peak)
    if (rate > 1.5 * peak[fastest])
      fastest = precision;
  // Kinds: a CPU's one size gives the rate (its launch is next to
  // nothing); a GPU's sizes the rate and the latency on top of the launch.
  std::map<std::string, double> kernelRates, kernelBandwidths, kernelLatencies,
      kernelScores, kernelRowElements;
  auto fitKinds =
      [&](const std::map<std::string, std::vector<TimedWork>> &times,
          std::map<std::string, double> &rates) {
        for (const auto &[kernel, points] : times) {
          if (!gpu) {
            // Attention's rate and costs per score and row element from
            // its shapes; any other kind's one size.
            auto timed = attentionTimes.find(kernel);
            if (timed != attentionTimes.end() && timed->second.size() >= 2) {
              AttentionFit fit = fitAttention(timed->second);
              if (fit.rate > 0)
                rates[kernel] = fit.rate;
              if (fit.secondsPerScore > 0)
                kernelScores[kernel] = fit.secondsPerScore;
              if (fit.secondsPerRowElement > 0)
                kernelRowElements[kernel] = fit.secondsPerRowElement;
              continue;
            }
            rates[kernel] = points.front().work / points.front().seconds;
            continue;
          }
          AffineFit fit = fitAffine(points, overhead);
          rates[kernel] = fit.rate;
          if (fit.latency > 0)
            kernelLatencies[kernel] = fit.latency;
        }
      };
  fitKinds(flopTimes, kernelRates);
  fitKinds(byteTimes, kernelBandwidths);
  std::map<loomcost::CollectiveKind, loomcost::LinkModel::KindLink> links;
  for (const auto &[kind, points] : collectives)
    if (points.size() >= 2)
      links[kind] = fitLink(points, kind, ranks);
  if (auto it = links.find(loomcost::CollectiveKind::AllReduce);
      it != links.end()) {
    linkBandwidth = it->second.gigabytesPerSecond * 1e9;
    latency = it->second.latencyMicroseconds * 1e-6;
  }
  double memoryBytes =
      double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGESIZE));
  if (gpu) {
    // The first GPU's memory, from the runtime's description of it.
    std::vector<std::string> gpus = describeCUDADevices();
    if (!gpus.empty()) {
      double gib = 0;
      if (std::sscanf(gpus.front().c_str(), "%*[^,], %lf GiB", &gib) == 1)
        memoryBytes = gib * double(1ull << 30) * ranks;
    }
  }
  char host[256] = "this machine";
  gethostname(host, sizeof(host) - 1);
  std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof(date), "%Y-%m-%d", std::gmtime(&now));

  std::ostringstream json;
  json << "{\n  \"name\": \"" << host << ", calibrated by loom-run "
       << "--calibrate on " << date << " (" << (gpu ? "cuda" : "cpu") << ", "
       << ranks << (ranks == 1 ? " rank" : " ranks") << ")\",\n"
       << "  \"nodes\": 1,\n  \"devices_per_node\": " << ranks << ",\n"
       << "  \"device\": {\"memory_gib\": "
       << number(memoryBytes / ranks / double(1ull << 30))
       << ", \"peak_tflops\": {\"f32\": " << number(peak["f32"] / 1e12)
       << ", \"bf16\": " << number(peak["bf16"] / 1e12) << "},\n"
       << "             \"memory_gbytes_per_s\": " << number(bandwidth / 1e9)
       << ", \"gemm_efficiency\": 1, \"gemm_half_dim\": "
       << number(halfDim[fastest]) << ",\n"
       << "             \"memory_efficiency\": 1, \"kernel_overhead_us\": "
       << number(overhead * 1e6);
  // `"key": {"name": value * scale, ...}` on a line of its own, indented
  // under the object it belongs to.
  auto table = [&](const char *indent, const char *key,
                   const std::map<std::string, double> &values, double scale) {
    if (values.empty())
      return;
    json << ",\n" << indent << "\"" << key << "\": {";
    bool first = true;
    for (const auto &[name, value] : values) {
      json << (first ? "" : ", ") << "\"" << name
           << "\": " << number(value * scale);
      first = false;
    }
    json << "}";
  };
  const char *device = "             ", *measured = "               ";
  table(device, "kernel_tflops", kernelRates, 1e-12);
  table(device, "kernel_gbytes_per_s", kernelBandwidths, 1e-9);
  table(device, "kernel_latency_us", kernelLatencies, 1e6);
  table(device, "kernel_ns_per_score", kernelScores, 1e9);
  table(device, "kernel_ns_per_row_element", kernelRowElements, 1e9);
  // An operation whose cost is below the clock's grain costs nothing.
  table(device, "elementwise_ns", elementNs, 1);
  json << "},\n"
       << "  \"intra_node\": {\"gbytes_per_s\": "
       << number(ranks > 1 ? linkBandwidth / 1e9 : 100)
       << ", \"latency_us\": " << number(latency * 1e6);
  // The other kinds' own links (the all-reduce's is the link's).
  bool firstKind = true;
  for (const auto &[kind, link] : links) {
    if (kind == loomcost::CollectiveKind::AllReduce)
      continue;
    json << (firstKind ? ",\n                 \"by_kind\": {" : ", ") << "\""
         << loomcost::kindName(kind)
         << "\": {\"gbytes_per_s\": " << number(link.gigabytesPerSecond)
         << ", \"latency_us\": " << number(link.latencyMicroseconds) << "}";
    firstKind = false;
  }
  json << (firstKind ? "" : "}") << "},\n"
       << "  \"measured\": {\"gemm_tflops\": {";
  bool first = true;
  for (const auto &[precision, rates] : gemm) {
    json << (first ? "" : ", ") << "\"" << precision << "\": {";
    bool firstSize = true;
    for (const auto &[d, rate] : rates) {
      json << (firstSize ? "" : ", ") << "\"" << d
           << "\": " << number(rate / 1e12);
      firstSize = false;
    }
    json << "}";
    first = false;
  }
  json << "}";
  table(measured, "tflops_by_shape", shapeRates, 1e-12);
  table(measured, "gbytes_per_s_by_shape", shapeBandwidths, 1e-9);
  for (const auto &[kind, points] : collectives) {
    json << ",\n               \"" << loomcost::kindName(kind)
         << "_seconds_by_bytes_sent\": {";
    first = true;
    for (const auto &[bytes, seconds] : points) {
      json << (first ? "" : ", ") << "\"" << uint64_t(bytes)
           << "\": " << number(seconds);
      first = false;
    }
    json << "}";
  }
  json << "}\n}\n";
  std::ofstream out(outPath);
  out << json.str();
  if (!out) {
    std::fprintf(stderr, "cannot write %s\n", outPath.c_str());
    return 1;
  }
  std::printf("calibrated %d %s rank%s into %s:\n", ranks, gpu ? "cuda" : "cpu",
              ranks == 1 ? "" : "s", outPath.c_str());
  for (const auto &[precision, rates] : gemm) {
    std::printf("  %s GEMM TFLOP/s by size, every rank busy:",
                precision.c_str());
    for (const auto &[d, rate] : rates)
      std::printf(" %lld: %.4g", (long long)d, rate / 1e12);
    std::printf(" (half of the peak at %.0f)\n", halfDim[precision]);
  }
  std::printf("  memory %.3g GB/s, kernel overhead %.3g us\n", bandwidth / 1e9,
              overhead * 1e6);
  std::set<std::string> flopKindsFitted;
  for (const auto *table : {&kernelRates, &kernelScores, &kernelRowElements})
    for (const auto &entry : *table)
      flopKindsFitted.insert(entry.first);
  for (const std::string &kernel : flopKindsFitted) {
    std::vector<std::string> parts;
    auto part = [&](const std::map<std::string, double> &table, double scale,
                    const char *format) {
      if (auto it = table.find(kernel); it != table.end()) {
        char text[64];
        std::snprintf(text, sizeof(text), format, it->second * scale);
        parts.push_back(text);
      }
    };
    part(kernelRates, 1e-12, "%.4g TFLOP/s");
    part(kernelScores, 1e9, "%.3g ns per score");
    part(kernelRowElements, 1e9, "%.3g ns per query-row element");
    std::string line;
    for (size_t i = 0; i < parts.size(); ++i)
      line += (i == 0 ? "" : i + 1 == parts.size() ? " and " : ", ") + parts[i];
    std::printf("  %s: %s\n", kernel.c_str(), line.c_str());
  }
  for (const auto &[kernel, rate] : kernelBandwidths)
    std::printf("  %s: %.4g GB/s\n", kernel.c_str(), rate / 1e9);
  for (const auto &[kernel, seconds] : kernelLatencies)
    std::printf("  %s: %.3g us on top of the launch\n", kernel.c_str(),
                seconds * 1e6);
  for (const auto &[name, rate] : shapeRates)
    std::printf("  measured %s: %.4g TFLOP/s\n", name.c_str(), rate / 1e12);
  for (const auto &[name, rate] : shapeBandwidths)
    std::printf("  measured %s: %.4g GB/s\n", name.c_str(), rate / 1e9);
  if (!elementNs.empty()) {
    std::printf("  elementwise ns per element:");
    for (const auto &[op, value] : elementNs)
      std::printf(" %s %.3g", op.c_str(), value);
    std::printf("\n");
  }
  for (const auto &[kind, link] : links)
    std::printf("  %s link: %.3g GB/s, %.3g us per step\n",
                loomcost::kindName(kind), link.gigabytesPerSecond,
                link.latencyMicroseconds);
  return 0;
}
