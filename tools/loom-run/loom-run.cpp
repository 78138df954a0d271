//===- loom-run.cpp - Compile and run models on the Loom runtime ----------===//
//
//   loom-run MODEL [--input NAME=FILE | FILE]... [--output-dir DIR]
//            [--emit-plan FILE] [--report] [--dim NAME=SIZE]...
//            [--iterations N] [--warmup N] [--compile-only [--no-weights]]
//
// MODEL is an ONNX model (.onnx, .onnxtext), a loom module (.mlir) or a plan
// file. Plain C++ on the runtime: in a runtime-only build it runs plans, and
// compiling models is linked in (ModelCompiler.cpp) when MLIR is available.
// Launching ranks, the training loop and checkpoints are the runtime's
// session library (loom/Runtime/Session); this file parses flags and reads
// the data.
//
//===----------------------------------------------------------------------===//

#include "Calibrate.h"
#include "ModelCompiler.h"
#include "Planner.h"
#include "RunPlan.h"

#include "loom/Runtime/Executor.h"
#include "loom/Runtime/Session/Report.h"
#include "loom/Runtime/Session/Trainer.h"
#include "loom/Runtime/TensorIO.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

using namespace loomrun;
using namespace loomrt;

namespace {

const char *kUsage = R"(usage: loom-run MODEL [options] [INPUT_FILE...]

Compiles MODEL (.onnx, .onnxtext, .mlir) to a runtime plan, or loads a plan
file, and runs it on the CPU backend or a GPU.

options:
  --input NAME=FILE   bind graph input NAME to FILE (.npy or ONNX TensorProto .pb);
                      a bare INPUT_FILE binds the next graph input in order
  --output-dir DIR    write every output to DIR/<output name>.npy (bytes of a
                      name other than letters, digits, . _ - written %XX)
  --emit-plan FILE    write the compiled plan to FILE (runs only if inputs are given;
                      with --train, the training-step plan, then trains)
  --emit-mlir FILE    write the module before lowering to FILE (with --train:
                      what loom-opt --loom-training-pipeline gives)
  --compile-only      compile MODEL (with --train: the training step, --tp
                      and all) and exit without running it: prints the time
                      of each stage and pass (MLIR's execution time report)
                      on stdout; the verifier checks the lowered module once
                      instead of after every pass; --emit-plan writes the
                      plan (docs/design/passes.md)
  --no-weights        with --compile-only: import the ONNX model's shapes
                      only, as loom-translate --no-weights does: no weight
                      byte is read, and compiling stops at the lowered
                      module, since a plan holds the weights' values (times
                      the compiler on models too big to hold, e.g. a 175B GPT;
                      with --report-json, a plan of shapes only is built to
                      report what each rank would hold)
  --report            print planned vs measured peak memory and time per kernel,
                      per node path (layers folded) and the slowest instructions
                      (with --train: of the last step)
  --explain           print every collective of the compiled step in order: its
                      kind, ONNX node, the value's global type and sharding
                      before -> after, the annotation it comes from, the
                      bytes each rank sends (ring-counted) and the time on
                      the link below; then totals per kind and per step
                      (loom-explain-sharding; docs/design/passes.md)
  --link-gbps X       --explain's link bandwidth, GB/s (default 100)
  --link-latency-us X --explain's link latency per step, us (default 5)
  --dim NAME=SIZE     size of a symbolic ONNX dimension (else read off the inputs)
  --function NAME     the function of a .mlir module to run
  --precision P       f32 (default) or bf16: matrix products in bf16 (f32
                      accumulation), everything else f32 (with --train too:
                      f32 master weights and optimizer)
  --unfused-attention keep attention as the model spells it (matmul, softmax,
                      matmul) instead of one fused kernel (loom-fuse-attention)
  --iterations N      run N times and report the mean time
  --warmup N          first run N untimed times (default 0)
  --help              this text

devices (docs/design/cuda-backend.md):
  --device cpu|cuda   run on the CPU backend (default, the reference) or the
                      CUDA backend (one GPU per process; --ranks N threads
                      share it, each with its own streams and arena)
  --gpu N             the GPU of --device cuda (default 0; under mpirun each
                      rank takes its local rank's GPU)
  --allow-tf32        let f32 GEMMs use TF32 tensor cores (as PyTorch's
                      allow_tf32); f32 stays exact by default
  --cuda-graphs       record the first run's launches as a CUDA graph and
                      replay it in every run (one launch per step); plans
                      that communicate, and --report runs, launch kernel by
                      kernel; a step that cannot be recorded says why on
                      stderr and runs without
  --no-elementwise-groups
                      launch every elementwise kernel on its own (by
                      default consecutive independent ones that run one
                      program, such as an optimizer's updates, are one
                      launch; stderr says how many)
  --tune-matmuls      time each matmul with several of cuBLASLt's
                      algorithms before its first launch and keep the
                      fastest (the first step runs without --cuda-graphs;
                      results may differ from untuned ones in the last
                      bits); stderr says what it found
  --tuning-file FILE  --tune-matmuls, keeping its choices in FILE: a later
                      run with the same FILE times only the matmuls it
                      lacks, and computes the same bytes (a FILE made with
                      another cuBLASLt or GPU is made again, a damaged one
                      stops the run); {rank} in FILE becomes the rank
                      (needed with several ranks)
  --list-devices      print the devices this build can run on, and exit
  --parallel auto     with --train: choose the layout (dp, tp, pp, ZeRO,
                      sequence parallelism, microbatches, schedule) for
                      --ranks N with the planner (docs/design/planner.md),
                      print its report, and train with it; the machine is
                      calibrated first unless --cluster FILE describes it
  --parallel FILE     train with the layout of a `loom-plan --json` file
  --calibrate FILE    measure this machine with --ranks N (or mpirun's) ranks
                      busy at once on --device: GEMM rates by size and
                      precision, memory bandwidth, a kernel's fixed cost and
                      the all-reduce link; write them as a cluster file for
                      loom-plan (docs/design/planner.md), and exit

ranks (plans with several ranks; docs/design/communication.md):
  --ranks N           run the N ranks as threads of this process; under
                      `mpirun -np N loom-run ...` each process runs one rank
  --comm-timeout S    fail any communication that waits longer than S seconds
                      (default 60), naming the rank and operation
  --check-collectives compare every collective's arguments across the ranks
                      first (MPI: a debug mode; threads always check)
  `{rank}` in an input file name is replaced by the rank; --output-dir gets one
  directory per rank (DIR/rank<R>/); with --train every rank trains (its
  inputs read their rows of each step's batch)

training (--train; docs/design/training.md):
  --train             train MODEL: each step runs forward, loss, backward and
                      one optimizer update; --input files hold the whole data set
  --labels FILE       labels of the whole data set (first dimension = samples)
  --loss KIND         cross_entropy (default), mse, or none (output 0 is the loss)
  --batch-size B      samples per step (default 1; all ranks together); step
                      i uses samples [i*B, (i+1)*B) modulo the sample count
  --steps N           steps to train (default 1; 0 with --emit-plan: only
                      write the training plan, e.g. for another machine)
  --shuffle SEED      a new seeded permutation of the samples every epoch
  --grad-accum K      split each batch into K microbatches (B % K == 0)
  --optimizer NAME    adamw (default) or sgd, as torch.optim.AdamW / SGD
  --lr X              learning rate (adamw default 1e-3; sgd needs one)
  --momentum X        sgd momentum (default 0)
  --dampening X       sgd dampening (default 0)
  --nesterov          sgd Nesterov momentum
  --betas B1,B2       adamw betas (default 0.9,0.999)
  --eps X             adamw epsilon (default 1e-8)
  --weight-decay X    default: sgd 0, adamw 1e-2
  --clip-grad-norm X  clip the gradients' global 2-norm to X
  --grad-precision P  f32 (default) or bf16 (with --precision bf16):
                      gradients kept, accumulated and reduced over dp in
                      bf16, widened for the f32 update
  --freeze REGEX      do not train parameters whose name matches REGEX
  --padding-idx REGEX=ROW
                      embedding lookups of the parameters REGEX matches
                      pass no gradient to row ROW, as PyTorch's
                      nn.Embedding(padding_idx=ROW), which ONNX exports
                      drop (repeatable)
  --tp N              tensor parallelism over N ranks (Megatron's layout,
                      derived by sharding propagation; run with --ranks N
                      or mpirun -np N; docs/design/sharding.md)
  --dp N              data parallelism over N ranks: each reads its rows of
                      the global batch (--batch-size), gradients are summed
                      over them (default: the ranks (--ranks N or mpirun's)
                      over --tp; mesh <dp, tp>, tp innermost)
  --zero K            ZeRO stage over dp: 1 shards the optimizer states (the
                      update runs on each rank's shard: reduce-scatter of the
                      gradients after the backward pass, all-gather of the
                      parameters); 2 also the gradients (each reduced and
                      scattered as soon as it is produced); 3 also the
                      parameters (gathered before each op that reads them)
  --bucket-mb MB      with --dp and no --zero: all-reduce the gradients in
                      buckets of up to MB MiB (default 25, PyTorch DDP's),
                      each posted as soon as the backward pass has produced
                      its last gradient, so that it overlaps the rest of the
                      backward pass; 0: one all-reduce per gradient
  --zero-shard-group K
                      hybrid sharding (FSDP's HSDP): ZeRO shards within
                      groups of K adjacent dp ranks and the groups replicate
                      (gradients reduced and scattered in the group, then
                      all-reduced across groups); K divides dp
  --recompute MODE    activation recompute: none (default); selective: an
                      attention that is not fused computes its scores and
                      probabilities again in the backward pass (a fused one
                      never stores them); or full: the forward's values
                      between the cut points (each sublayer's) are computed
                      again in the backward pass instead of kept, trading
                      compute for memory; training is unchanged, bit for bit
  --sequence-parallel with --tp: Megatron's sequence parallelism (the layer
                      norms' regions split on the sequence; reduce-scatter
                      and all-gather pairs instead of all-reduces)
  --pp P              pipeline parallelism over P ranks: the step cut into
                      P stages where the model is narrowest and the stages'
                      costs even, one program per rank in the schedule's
                      order (docs/design/pipeline.md); --ranks P, or P x dp
                      x tp with --dp/--tp (3D: each stage on dp x tp ranks)
  --microbatches M    with --pp: the batch split in M microbatches, whose
                      gradients accumulate (default: P)
  --schedule S        with --pp: 1f1b (default), gpipe, interleaved (with
                      --virtual-stages V) or zb-h1 (zero bubble: the
                      backward split into input and weight gradients)
  --virtual-stages V  with --schedule interleaved: stages per rank
  --schedule-file F   with --pp: a schedule of one's own, a line per rank
                      (`rank R: F0.0 F0.1 B0.0 ...`), proved before it runs
  --stage-cuts N,N    with --pp: cut after these ONNX nodes instead
  --stage-memory-cap-mb MB
                      with --pp: cut so that each stage's weights,
                      gradients, AdamW moments and 1F1B's in-flight
                      activations stay under MB MiB (an error when no cut
                      does)
  --shard REGEX=SHARDING[:PRIORITY]
                      annotate the parameters whose whole name REGEX
                      matches, e.g. 'h\..*\.mlp\.c_fc\.weight=[{tp},{}]'
                      (repeatable; priority 0 first, --tp's are 1)
  --shardings FILE    the same annotations from a JSON file
  --metrics FILE      one JSON object per step: step, loss, step_ms, samples_per_s
  --report-json FILE  after the last step, per rank: param_bytes, grad_bytes,
                      optimizer_bytes (what the rank holds), planned_peak_bytes,
                      measured_peak_bytes and comm_bytes (bytes sent per step
                      by collective kind, ring-counted; docs/design/training.md);
                      with --compile-only, the planned figures (sizes a
                      model and layout without running: measured peak 0,
                      comm_bytes counted from the plan) and a table
  --trace FILE.json   the last step of every rank as a Chrome/Perfetto trace
                      (chrome://tracing, ui.perfetto.dev): per rank a compute
                      track (kernels) and a communication track (collectives,
                      from posting to completion), named by kernel and ONNX
                      node
  --verify            then train the single-device step (the model compiled
                      without --tp/--shard, one rank, the same data, steps and
                      seed) and print the largest relative difference of the
                      losses and of every parameter; fails beyond
                      --verify-rtol X (default 1e-4)
  --save OUT.onnx     write MODEL with its trained initializers
  --save-weights DIR  write the trained parameters and the optimizer state
                      to DIR/<name>.npy (runtime-only builds too)
  --checkpoint DIR    save the training state to DIR after the last step and
                      every --checkpoint-every K steps
  --resume DIR        continue from the checkpoint in DIR up to --steps
)";

struct Options {
  /// The model, its input files and how to run it (also for --train, which
  /// reads the model, inputs and report from here).
  RunOptions run;
  std::string emitPlan;
  ModelCompileOptions compile;
  TrainOptions train;
  std::string labelsPath;
  /// Training flags seen without --train, for the error.
  std::string trainingFlag;
  /// --verify and --verify-rtol.
  bool verify = false;
  double verifyRtol = 1e-4;
  /// --compile-only: compile, print the time of each pass, and exit.
  bool compileOnly = false;
  /// --calibrate FILE: measure this machine into a cluster file, and exit.
  std::string calibratePath;
  /// --parallel auto|FILE.json: the layout the planner chooses (with
  /// --cluster FILE, or this machine calibrated), or a loom-plan --json
  /// file's choice.
  std::string parallel;
  std::string clusterPath;
  /// Whether --steps was given.
  bool stepsGiven = false;
  /// Whether --dp was given (else it is the ranks over --tp).
  bool dpGiven = false;
};

int fail(const std::string &message) {
  std::fprintf(stderr, "loom-run: %s\n", message.c_str());
  return 1;
}

bool parseDouble(const std::string &text, double &value) {
  if (text.empty())
    return false;
  char *end = nullptr;
  errno = 0;
  value = std::strtod(text.c_str(), &end);
  return !errno && !*end && std::isfinite(value);
}

bool parseInt(const std::string &text, int64_t &value) {
  if (text.empty())
    return false;
  char *end = nullptr;
  errno = 0;
  long long parsed = std::strtoll(text.c_str(), &end, 10);
  if (errno || *end)
    return false;
  value = parsed;
  return true;
}

/// Handles the training flags: true when `flag` is one (with `error` set
/// when its value is bad).
template <typename ValueFn>
bool parseTrainingFlag(const std::string &flag, ValueFn &value,
                       Options &options, std::string &error) {
  TrainCompileOptions &compile = options.compile.train;
  TrainOptions &train = options.train;
  if (flag == "--train") {
    compile.enabled = true;
    return true;
  }
  if (flag == "--nesterov") {
    compile.nesterov = true;
    options.trainingFlag = flag;
    return true;
  }
  if (flag == "--sequence-parallel") {
    compile.sequenceParallel = true;
    options.trainingFlag = flag;
    return true;
  }
  if (flag == "--verify") {
    options.verify = true;
    options.trainingFlag = flag;
    return true;
  }
  static const char *const kValued[] = {"--labels",
                                        "--loss",
                                        "--batch-size",
                                        "--steps",
                                        "--shuffle",
                                        "--grad-accum",
                                        "--optimizer",
                                        "--lr",
                                        "--momentum",
                                        "--dampening",
                                        "--betas",
                                        "--eps",
                                        "--weight-decay",
                                        "--clip-grad-norm",
                                        "--grad-precision",
                                        "--freeze",
                                        "--padding-idx",
                                        "--tp",
                                        "--zero",
                                        "--zero-shard-group",
                                        "--bucket-mb",
                                        "--trace",
                                        "--dp",
                                        "--pp",
                                        "--microbatches",
                                        "--schedule",
                                        "--recompute",
                                        "--virtual-stages",
                                        "--schedule-file",
                                        "--stage-cuts",
                                        "--stage-memory-cap-mb",
                                        "--shard",
                                        "--shardings",
                                        "--metrics",
                                        "--save",
                                        "--save-weights",
                                        "--checkpoint",
                                        "--checkpoint-every",
                                        "--resume",
                                        "--report-json",
                                        "--verify-rtol"};
  if (std::find(std::begin(kValued), std::end(kValued), flag) ==
      std::end(kValued))
    return false;
  options.trainingFlag = flag;
  std::string text;
  if (!value(text)) {
    error = flag + " needs a value";
    return true;
  }
  auto number = [&](double &out, double low) {
    if (!parseDouble(text, out) || out < low)
      error = flag +
              " expects a number >= " + std::to_string(low).substr(0, 3) +
              ", got '" + text + "'";
  };
  auto count = [&](int64_t &out, int64_t low) {
    if (!parseInt(text, out) || out < low)
      error = flag + " expects an integer >= " + std::to_string(low) +
              ", got '" + text + "'";
  };
  if (flag == "--labels") {
    options.labelsPath = text;
  } else if (flag == "--loss") {
    if (text != "cross_entropy" && text != "mse" && text != "none")
      error = "--loss expects cross_entropy, mse or none, got '" + text + "'";
    compile.loss = train.loss = text;
  } else if (flag == "--batch-size") {
    count(train.batchSize, 1);
  } else if (flag == "--steps") {
    count(train.steps, 0);
    options.stepsGiven = true;
  } else if (flag == "--shuffle") {
    int64_t seed = 0;
    count(seed, 0);
    train.shuffle = true;
    train.seed = uint64_t(seed);
  } else if (flag == "--grad-accum") {
    int64_t accum = 1;
    count(accum, 1);
    compile.gradAccum = int(std::min<int64_t>(accum, 1 << 20));
  } else if (flag == "--optimizer") {
    if (text != "sgd" && text != "adamw")
      error = "--optimizer expects sgd or adamw, got '" + text + "'";
    compile.optimizer = text;
  } else if (flag == "--lr") {
    number(compile.lr, 0);
  } else if (flag == "--momentum") {
    number(compile.momentum, 0);
  } else if (flag == "--dampening") {
    number(compile.dampening, 0);
  } else if (flag == "--eps") {
    number(compile.eps, 0);
  } else if (flag == "--weight-decay") {
    number(compile.weightDecay, 0);
  } else if (flag == "--grad-precision") {
    if (text != "f32" && text != "bf16")
      error = "--grad-precision expects f32 or bf16, got '" + text + "'";
    compile.gradPrecision = text;
  } else if (flag == "--clip-grad-norm") {
    number(compile.clipGradNorm, 0);
    if (error.empty() && compile.clipGradNorm == 0)
      error = "--clip-grad-norm expects a positive norm";
  } else if (flag == "--betas") {
    size_t comma = text.find(',');
    if (comma == std::string::npos ||
        !parseDouble(text.substr(0, comma), compile.beta1) ||
        !parseDouble(text.substr(comma + 1), compile.beta2) ||
        !(compile.beta1 >= 0 && compile.beta1 < 1) ||
        !(compile.beta2 >= 0 && compile.beta2 < 1))
      error = "--betas expects B1,B2 in [0, 1), got '" + text + "'";
  } else if (flag == "--freeze") {
    compile.freeze = text;
  } else if (flag == "--padding-idx") {
    size_t equals = text.rfind('=');
    int64_t row = 0;
    if (equals == std::string::npos || equals == 0 ||
        !parseInt(text.substr(equals + 1), row))
      error = "--padding-idx expects REGEX=ROW, got '" + text + "'";
    else
      compile.paddingIdx.emplace_back(text.substr(0, equals), row);
  } else if (flag == "--tp") {
    int64_t tp = 1;
    count(tp, 1);
    compile.tp = int(std::min<int64_t>(tp, 4096));
  } else if (flag == "--dp") {
    int64_t dp = 1;
    count(dp, 1);
    compile.dp = int(std::min<int64_t>(dp, 4096));
    options.dpGiven = true;
  } else if (flag == "--pp") {
    int64_t pp = 1;
    count(pp, 1);
    compile.pp = int(std::min<int64_t>(pp, 4096));
  } else if (flag == "--microbatches") {
    int64_t microbatches = 1;
    count(microbatches, 1);
    compile.microbatches = int(std::min<int64_t>(microbatches, 1 << 20));
  } else if (flag == "--recompute") {
    if (text != "none" && text != "selective" && text != "full")
      error = "--recompute " + text +
              ": none; selective (the attention cores that are not fused "
              "recompute their scores and probabilities in the backward); "
              "or full (each segment between the cut points but the last "
              "recomputes its forward in the backward)";
    compile.recompute = text;
  } else if (flag == "--schedule") {
    if (text != "gpipe" && text != "1f1b" && text != "interleaved" &&
        text != "zb-h1")
      error = "--schedule " + text +
              ": the schedules are gpipe, 1f1b, interleaved and zb-h1 (or "
              "--schedule-file FILE)";
    compile.schedule = text;
  } else if (flag == "--virtual-stages") {
    int64_t stages = 1;
    count(stages, 1);
    compile.virtualStages = int(std::min<int64_t>(stages, 64));
  } else if (flag == "--schedule-file") {
    compile.scheduleFile = text;
  } else if (flag == "--stage-memory-cap-mb") {
    char *end = nullptr;
    double mb = std::strtod(text.c_str(), &end);
    if (text.empty() || *end || !(mb >= 0) || mb > 1e9)
      error = "--stage-memory-cap-mb expects a size in MiB (0: no cap), "
              "got '" +
              text + "'";
    compile.stageMemoryCapMB = mb;
  } else if (flag == "--stage-cuts") {
    for (size_t start = 0; start <= text.size();) {
      size_t comma = std::min(text.find(',', start), text.size());
      compile.stageCuts.push_back(text.substr(start, comma - start));
      start = comma + 1;
    }
  } else if (flag == "--zero") {
    int64_t stage = 0;
    count(stage, 0);
    if (error.empty() && stage > 3)
      error = "--zero " + text +
              ": ZeRO's stages are 1 (optimizer states), 2 (and gradients) "
              "and 3 (and parameters)";
    compile.zero = int(stage);
  } else if (flag == "--bucket-mb") {
    char *end = nullptr;
    double mb = std::strtod(text.c_str(), &end);
    if (text.empty() || *end || !(mb >= 0) || mb > 1e6)
      error = "--bucket-mb expects a size in MiB (0: no buckets), got '" +
              text + "'";
    compile.bucketMB = mb;
  } else if (flag == "--zero-shard-group") {
    int64_t group = 0;
    count(group, 1);
    compile.zeroShardGroup = int(std::min<int64_t>(group, 4096));
  } else if (flag == "--shard") {
    compile.shard.push_back(text);
  } else if (flag == "--shardings") {
    compile.shardingsFile = text;
  } else if (flag == "--metrics") {
    train.metricsPath = text;
  } else if (flag == "--save") {
    train.savePath = text;
  } else if (flag == "--save-weights") {
    train.saveWeightsDir = text;
  } else if (flag == "--checkpoint") {
    train.checkpointDir = text;
  } else if (flag == "--checkpoint-every") {
    count(train.checkpointEvery, 1);
  } else if (flag == "--resume") {
    train.resumeDir = text;
  } else if (flag == "--report-json") {
    train.reportJsonPath = text;
  } else if (flag == "--trace") {
    train.tracePath = text;
  } else if (flag == "--verify-rtol") {
    number(options.verifyRtol, 0);
  }
  return true;
}

/// --list-devices: what --device can be, and why CUDA cannot where it
/// cannot.
void listDevices() {
  std::printf("cpu: the CPU backend\n");
  std::string why;
  if (cudaDeviceCount(&why) == 0) {
    std::printf("cuda: unavailable: %s\n", why.c_str());
    return;
  }
  for (const std::string &line : describeCUDADevices())
    std::printf("cuda: %s\n", line.c_str());
}

/// The pipeline flags against each other and the ranks; "" when fine.
/// The ranks of the run: --ranks N, or mpirun's world size (0: neither).
int worldRanks(const LaunchOptions &launch) {
  int world = launch.threadRanks;
  if (world == 0 && launchedByMPI())
    if (const char *size = std::getenv("OMPI_COMM_WORLD_SIZE"))
      world = std::atoi(size);
  return world;
}

/// The cores pipeline ranks share, for the predicted schedule: this
/// machine's when all `world` ranks run here on the CPU (threads, or every
/// process of mpirun's world on this host), else 0 (one each).
int sharedCores(const LaunchOptions &launch, int world) {
  const char *local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  bool here = launch.threadRanks > 1 ||
              (launchedByMPI() && local && std::atoi(local) == world);
  if (!here || launch.executor.device != Device::CPU)
    return 0;
  return int(std::max(1u, std::thread::hardware_concurrency()));
}

std::string checkPipelineFlags(Options &options, int world) {
  TrainCompileOptions &train = options.compile.train;
  bool pipelineFlag = train.microbatches > 0 || train.virtualStages > 1 ||
                      train.schedule != "1f1b" || !train.scheduleFile.empty() ||
                      !train.stageCuts.empty() || train.stageMemoryCapMB > 0;
  if (train.pp <= 1) {
    if (pipelineFlag)
      return "--microbatches, --schedule, --virtual-stages, --schedule-file, "
             "--stage-cuts and --stage-memory-cap-mb shape a pipeline: they "
             "need --pp 2 or more";
    return "";
  }
  // Each stage runs on dp x tp ranks (3D: pp outermost, tp innermost).
  int needed = train.pp * train.dp * train.tp;
  if (world != 0 && world != needed)
    return "--pp " + std::to_string(train.pp) + " x --dp " +
           std::to_string(train.dp) + " x --tp " + std::to_string(train.tp) +
           " needs " + std::to_string(needed) + " ranks, not " +
           std::to_string(world);
  if (train.microbatches > 0 && train.gradAccum > 1 &&
      train.microbatches != train.gradAccum)
    return "--microbatches " + std::to_string(train.microbatches) +
           " and --grad-accum " + std::to_string(train.gradAccum) +
           " both split the batch: give one";
  if (train.microbatches == 0)
    train.microbatches = train.gradAccum > 1 ? train.gradAccum : train.pp;
  train.gradAccum = train.microbatches;
  if (train.virtualStages > 1 && train.schedule != "interleaved" &&
      train.scheduleFile.empty())
    return "--virtual-stages " + std::to_string(train.virtualStages) +
           " places several stages on each rank: it needs --schedule "
           "interleaved (or a --schedule-file)";
  if (options.train.batchSize % train.microbatches != 0)
    return "--batch-size " + std::to_string(options.train.batchSize) +
           " is not a multiple of --microbatches " +
           std::to_string(train.microbatches);
  return "";
}

/// Parses argv; an error message on failure, "" on success.
std::string parseOptions(int argc, char **argv, Options &options) {
  LaunchOptions &launch = options.run.launch;
  ExecutorOptions &executor = launch.executor;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](std::string &out) -> bool {
      size_t eq = arg.find('=');
      if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
        out = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
        return true;
      }
      if (i + 1 >= argc)
        return false;
      out = argv[++i];
      return true;
    };
    std::string flag = arg.substr(0, arg.find('='));
    std::string text;
    if (flag == "--help" || flag == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (flag == "--list-devices") {
      listDevices();
      std::exit(0);
    }
    std::string trainError;
    if (parseTrainingFlag(flag, value, options, trainError)) {
      if (!trainError.empty())
        return trainError;
      continue;
    }
    if (flag == "--report") {
      options.run.report = true;
    } else if (flag == "--calibrate" || flag == "--parallel" ||
               flag == "--cluster") {
      if (!value(text))
        return flag + " needs a value";
      (flag == "--calibrate"  ? options.calibratePath
       : flag == "--parallel" ? options.parallel
                              : options.clusterPath) = text;
    } else if (flag == "--compile-only") {
      options.compileOnly = true;
    } else if (flag == "--no-weights") {
      options.compile.withWeights = false;
    } else if (flag == "--explain") {
      options.compile.explain = true;
    } else if (flag == "--link-gbps" || flag == "--link-latency-us") {
      if (!value(text))
        return flag + " needs a value";
      double number;
      bool latency = flag == "--link-latency-us";
      if (!parseDouble(text, number) || number < 0 || (!latency && number == 0))
        return flag +
               (latency ? " expects microseconds >= 0"
                        : " expects a bandwidth > 0 (GB/s)") +
               ", got '" + text + "'";
      (latency ? options.compile.linkLatencyUs : options.compile.linkGbps) =
          number;
    } else if (flag == "--unfused-attention") {
      options.compile.fuseAttention = false;
    } else if (flag == "--allow-tf32") {
      executor.cuda.allowTF32 = true;
    } else if (flag == "--cuda-graphs") {
      executor.cuda.graphs = true;
    } else if (flag == "--no-elementwise-groups") {
      executor.cuda.groupElementwise = false;
    } else if (flag == "--tune-matmuls") {
      executor.cuda.tuneMatmuls = true;
    } else if (flag == "--tuning-file") {
      if (!value(text))
        return flag + " needs a value";
      executor.cuda.tuningFile = std::string(text);
    } else if (flag == "--device" || flag == "--gpu") {
      if (!value(text))
        return flag + " needs a value";
      if (flag == "--device") {
        if (!parseDevice(text, executor.device))
          return "--device expects cpu or cuda, got '" + text + "'";
      } else {
        int64_t gpu;
        if (!parseInt(text, gpu) || gpu < 0 || gpu > 1024)
          return "--gpu expects a GPU number >= 0, got '" + text + "'";
        executor.cuda.gpu = int(gpu);
      }
    } else if (flag == "--check-collectives") {
      launch.comm.checkCollectives = true;
    } else if (flag == "--ranks" || flag == "--comm-timeout" ||
               flag == "--test-kill-rank") {
      if (!value(text))
        return flag + " needs a value";
      if (flag == "--ranks") {
        int64_t count;
        if (!parseInt(text, count) || count < 1 || count > 4096)
          return "--ranks expects a rank count in [1, 4096], got '" + text +
                 "'";
        launch.threadRanks = int(count);
      } else if (flag == "--comm-timeout") {
        double seconds;
        if (!parseDouble(text, seconds) || seconds <= 0 || seconds > 1e6)
          return "--comm-timeout expects seconds > 0, got '" + text + "'";
        launch.comm.timeout =
            std::chrono::milliseconds(int64_t(std::ceil(seconds * 1000)));
      } else {
        // R[:K], a test hook: rank R dies before its instruction K.
        size_t colon = text.find(':');
        int64_t rank, at = 0;
        if (!parseInt(text.substr(0, colon), rank) || rank < 0 ||
            (colon != std::string::npos &&
             (!parseInt(text.substr(colon + 1), at) || at < 0)))
          return "--test-kill-rank expects RANK[:INSTRUCTION], got '" + text +
                 "'";
        launch.killRank = int(std::min<int64_t>(rank, 1 << 30));
        launch.killAt = at;
      }
    } else if (flag == "--input" || flag == "--output-dir" ||
               flag == "--emit-plan" || flag == "--emit-mlir" ||
               flag == "--dim" || flag == "--function" ||
               flag == "--iterations" || flag == "--warmup" ||
               flag == "--precision") {
      if (!value(text))
        return flag + " needs a value";
      if (flag == "--input") {
        size_t eq = text.find('=');
        if (eq == std::string::npos || eq == 0)
          return "--input expects NAME=FILE, got '" + text + "'";
        options.run.namedInputs.push_back(
            {text.substr(0, eq), text.substr(eq + 1)});
      } else if (flag == "--output-dir") {
        options.run.outputDir = text;
      } else if (flag == "--emit-plan") {
        options.emitPlan = text;
      } else if (flag == "--emit-mlir") {
        options.compile.emitMLIR = text;
      } else if (flag == "--function") {
        options.compile.functionName = text;
      } else if (flag == "--precision") {
        if (text != "f32" && text != "bf16")
          return "--precision expects f32 or bf16, got '" + text + "'";
        options.compile.precision = text;
      } else if (flag == "--iterations") {
        int64_t count;
        if (!parseInt(text, count) || count < 1 || count > 1000000)
          return "--iterations expects a positive count, got '" + text + "'";
        options.run.iterations = int(count);
      } else if (flag == "--warmup") {
        int64_t count;
        if (!parseInt(text, count) || count < 0 || count > 1000000)
          return "--warmup expects a count >= 0, got '" + text + "'";
        options.run.warmup = int(count);
      } else {
        size_t eq = text.find('=');
        int64_t size;
        if (eq == std::string::npos || eq == 0 ||
            !parseInt(text.substr(eq + 1), size) || size < 0)
          return "--dim expects NAME=SIZE with SIZE >= 0, got '" + text + "'";
        options.compile.dims[text.substr(0, eq)] = size;
      }
    } else if (arg.size() > 1 && arg[0] == '-') {
      return "unknown option '" + arg + "' (see --help)";
    } else if (options.run.model.empty()) {
      options.run.model = arg;
    } else {
      options.run.positionalInputs.push_back(arg);
    }
  }
  if (!options.calibratePath.empty()) {
    if (!options.run.model.empty() || options.compile.train.enabled ||
        options.compileOnly)
      return "--calibrate measures the machine and takes no model, "
             "--train or --compile-only";
    return "";
  }
  if (options.run.model.empty())
    return "no model given (see --help)";
  if (!options.parallel.empty()) {
    const TrainCompileOptions &t = options.compile.train;
    if (!t.enabled)
      return "--parallel chooses the layout of a training step; add --train";
    if (t.tp != 1 || options.dpGiven || t.pp != 1 || t.zero != 0 ||
        t.sequenceParallel || t.microbatches != 0 || t.gradAccum != 1 ||
        t.recompute != "none")
      return "--parallel chooses the layout (dp, tp, pp, zero, sequence "
             "parallelism, microbatches, recompute); drop --dp, --tp, --pp, "
             "--zero, --sequence-parallel, --microbatches, --grad-accum and "
             "--recompute";
    if (!options.run.positionalInputs.empty())
      return "--parallel needs the inputs by name (--input NAME=FILE)";
  }
  if (!options.clusterPath.empty() && options.parallel != "auto")
    return "--cluster describes the machine for --parallel auto";
  const TrainCompileOptions &train = options.compile.train;
  if (!options.compile.withWeights && !options.compileOnly) {
    if (train.enabled && options.train.steps > 0)
      return "--no-weights imports the model's shapes only, so there are "
             "no weights to train" +
             (options.stepsGiven
                  ? " (--steps " + std::to_string(options.train.steps) + ")"
                  : std::string()) +
             "; with --compile-only it compiles the step and exits";
    return "--no-weights imports the model's shapes only, and a plan holds "
           "the weights' values; it needs --compile-only";
  }
  if (options.compileOnly) {
    if (options.stepsGiven && options.train.steps > 0)
      return "--compile-only compiles the step and exits without "
             "training; drop --steps " +
             std::to_string(options.train.steps);
    if (!options.compile.withWeights && !options.emitPlan.empty())
      return "--emit-plan writes a plan, which holds the weights' values; "
             "--no-weights imports the shapes only (--emit-mlir writes the "
             "module)";
    if (!options.run.outputDir.empty() || options.run.report ||
        options.verify || !options.train.metricsPath.empty() ||
        !options.train.tracePath.empty() || !options.train.savePath.empty() ||
        !options.train.saveWeightsDir.empty() ||
        !options.train.checkpointDir.empty() ||
        !options.train.resumeDir.empty())
      return "--compile-only compiles and exits: --output-dir, --report, "
             "--verify, --metrics, --trace, --save, --save-weights, "
             "--checkpoint and --resume need a run (--report-json writes "
             "the planned figures)";
  }
  if (!train.enabled && !options.trainingFlag.empty())
    return options.trainingFlag + " is a training option; add --train";
  if (train.enabled) {
    // --dp defaults to the ranks that --tp leaves: --ranks N, or mpirun's
    // world size.
    int world = worldRanks(launch);
    if (!options.dpGiven && world > train.tp * train.pp &&
        world % (train.tp * train.pp) == 0)
      options.compile.train.dp = world / (train.tp * train.pp);
    if (std::string problem = checkPipelineFlags(options, world);
        !problem.empty())
      return problem;
    // Pipeline ranks that share this machine's cores: the predicted
    // schedule takes it into account.
    if (train.pp > 1)
      options.compile.train.sharedCores = sharedCores(launch, world);
    if (train.zero > 0 && train.dp < 2)
      return "--zero " + std::to_string(train.zero) +
             " shards over the data-parallel ranks: it needs --dp 2 or more "
             "(or --ranks over --tp)";
    if (train.gradPrecision != "f32" && options.compile.precision != "bf16")
      return "--grad-precision " + train.gradPrecision +
             " keeps the gradients of bf16 GEMMs in bf16: it needs "
             "--precision bf16";
    if (train.zeroShardGroup > 0 && train.zero == 0)
      return "--zero-shard-group " + std::to_string(train.zeroShardGroup) +
             " groups the ranks ZeRO shards over: it needs --zero 1, 2 or 3";
    if (train.zeroShardGroup > 0 && train.dp % train.zeroShardGroup != 0)
      return "--zero-shard-group " + std::to_string(train.zeroShardGroup) +
             " must divide the " + std::to_string(train.dp) +
             " data-parallel ranks (dp = " + std::to_string(train.dp) +
             "): ZeRO shards within groups of that many, replicated across "
             "the groups";
    // (A default dp is checked where it applies: compiling a model, not
    // running a plan.)
    if (options.dpGiven && options.train.batchSize % train.dp != 0)
      return "--batch-size " + std::to_string(options.train.batchSize) +
             " is the global batch, which --dp " + std::to_string(train.dp) +
             " must divide (each dp rank reads its own rows)";
    if (options.train.batchSize % train.gradAccum != 0)
      return "--batch-size " + std::to_string(options.train.batchSize) +
             " is not a multiple of --grad-accum " +
             std::to_string(train.gradAccum);
    if (train.optimizer == "sgd" && train.lr < 0)
      return "--optimizer sgd needs --lr (torch.optim.SGD has no default)";
    if (!options.run.outputDir.empty() || options.run.iterations != 1 ||
        options.run.warmup != 0)
      return "--output-dir, --iterations and --warmup are for inference "
             "runs, not --train";
    // Refused now rather than after the last step.
    if (!options.train.savePath.empty() && !haveModelCompiler())
      return "--save writes an ONNX model, which this loom-run (built "
             "without the compiler) cannot; --save-weights DIR writes the "
             "trained weights as .npy files";
    const std::string &model = options.run.model;
    if (!options.train.savePath.empty() &&
        (model.size() < 5 || model.compare(model.size() - 5, 5, ".onnx")))
      return "--save writes MODEL with its trained initializers, so MODEL "
             "must be a binary .onnx model, not " +
             model +
             "; --save-weights DIR writes the trained weights as "
             ".npy files";
    if (options.train.steps == 0 && options.emitPlan.empty() &&
        options.compile.emitMLIR.empty() && !options.compile.explain &&
        !options.compileOnly)
      return "--steps 0 trains nothing; it is for writing the training "
             "plan with --emit-plan (or its module with --emit-mlir, or "
             "--explain)";
    if (options.verify) {
      if (!options.train.resumeDir.empty())
        return "--verify trains both runs from the start; it cannot "
               "--resume";
      if (launchedByMPI())
        return "--verify runs the ranks as threads of one process "
               "(--ranks N), not under mpirun";
      options.train.keepState = true;
    }
    options.train.profileLastStep = options.run.report;
    options.train.launch = launch;
    options.train.launch.model = model;
    if (!options.train.savePath.empty())
      options.train.saveModel =
          [model, out = options.train.savePath](
              const std::map<std::string, HostTensor> &values) {
            return saveTrainedModel(model, out, values);
          };
  }
  return "";
}

/// Loads MODEL when it is a plan file, else compiles it; null (after
/// printing why) on failure.
std::shared_ptr<Plan> loadOrCompile(const Options &options) {
  StatusOr<std::string> bytes = readFile(options.run.model);
  if (!bytes) {
    fail(bytes.status().message());
    return nullptr;
  }
  if (looksLikePlan(*bytes)) {
    if (options.compile.explain || options.verify) {
      fail(std::string(options.compile.explain ? "--explain" : "--verify") +
           " compiles the model; " + options.run.model +
           " is a plan (pass the .onnx or .mlir model)");
      return nullptr;
    }
    if (options.compile.precision != "f32") {
      fail("--precision " + options.compile.precision +
           " applies when "
           "compiling a model; " +
           options.run.model + " is a plan");
      return nullptr;
    }
    StatusOr<Plan> parsed = parsePlan(*bytes, options.run.model);
    if (!parsed) {
      fail(parsed.status().message());
      return nullptr;
    }
    return std::make_shared<Plan>(std::move(*parsed));
  }
  *bytes = std::string();
  StatusOr<Plan> compiled = compileModel(options.run.model, options.compile);
  if (!compiled) {
    std::fprintf(stderr, "%s\n", compiled.status().message().c_str());
    return nullptr;
  }
  return std::make_shared<Plan>(std::move(*compiled));
}

/// Writes `plan` to `path`; false (after printing why) on failure.
bool emitPlan(const Plan &plan, const std::string &path) {
  std::string text = writePlan(plan);
  FILE *file = std::fopen(path.c_str(), "wb");
  bool written =
      file && std::fwrite(text.data(), 1, text.size(), file) == text.size();
  if (file && std::fclose(file) != 0)
    written = false;
  if (!written)
    fail("cannot write " + path + ": " + std::strerror(errno));
  return written;
}

/// The elements of a float tensor as doubles; false for other dtypes.
bool toDoubles(const HostTensor &tensor, std::vector<double> &values) {
  values.resize(size_t(tensor.elements()));
  const uint8_t *data = tensor.data.data();
  for (size_t i = 0; i < values.size(); ++i) {
    if (tensor.dtype == DType::F32) {
      float value;
      std::memcpy(&value, data + 4 * i, 4);
      values[i] = value;
    } else if (tensor.dtype == DType::F64) {
      std::memcpy(&values[i], data + 8 * i, 8);
    } else if (tensor.dtype == DType::BF16) {
      uint32_t bits = uint32_t(data[2 * i]) | uint32_t(data[2 * i + 1]) << 8;
      bits <<= 16;
      float value;
      std::memcpy(&value, &bits, 4);
      values[i] = value;
    } else {
      return false;
    }
  }
  return true;
}

/// The largest |a - b| / max|b| over the elements (0 for two zero
/// tensors); -1 when the tensors cannot be compared.
double relativeDifference(const HostTensor &a, const HostTensor &b) {
  std::vector<double> p, q;
  if (a.shape != b.shape || a.dtype != b.dtype || !toDoubles(a, p) ||
      !toDoubles(b, q))
    return -1;
  double largest = 0, difference = 0;
  for (size_t i = 0; i < q.size(); ++i) {
    largest = std::max(largest, std::fabs(q[i]));
    difference = std::max(difference, std::fabs(p[i] - q[i]));
  }
  if (difference == 0)
    return 0;
  return largest > 0 ? difference / largest : INFINITY;
}

/// --verify: trains the single-device step of the same model (compiled
/// without --tp and --shard, one rank) on the same data, steps and seed,
/// and compares its losses and trained parameters with `parallel`'s.
int verify(const Options &options, const Dataset &data,
           const TrainResult &parallel) {
  ModelCompileOptions single = options.compile;
  single.train.tp = 1;
  single.train.dp = 1;
  single.train.zero = 0;
  single.train.zeroShardGroup = 0;
  // One device accumulates the pipeline's microbatches (gradAccum).
  single.train.pp = 1;
  single.train.microbatches = 0;
  single.train.stageCuts.clear();
  single.train.scheduleFile.clear();
  single.train.shard.clear();
  single.train.shardingsFile.clear();
  single.emitMLIR.clear();
  single.explain = false;
  StatusOr<Plan> compiled = compileModel(options.run.model, single);
  if (!compiled)
    return fail("--verify: " + compiled.status().message());
  if (compiled->ranks.size() != 1)
    return fail("--verify: the model without --tp and --shard compiles to " +
                std::to_string(compiled->ranks.size()) +
                " ranks, not the single-device step");
  TrainOptions reference = options.train;
  reference.launch.threadRanks = 0;
  reference.launch.killRank = -1;
  reference.metricsPath.clear();
  reference.savePath.clear();
  reference.saveModel = nullptr;
  reference.saveWeightsDir.clear();
  reference.checkpointDir.clear();
  reference.checkpointEvery = 0;
  reference.reportJsonPath.clear();
  reference.tracePath.clear();
  reference.profileLastStep = false;
  reference.quiet = true;
  reference.keepState = true;
  TrainResult one;
  auto shared = std::make_shared<Plan>(std::move(*compiled));
  if (int status = runTraining(shared, data, reference, one); status != 0)
    return fail("--verify: the single-device run failed");

  if (one.losses.size() != parallel.losses.size())
    return fail("--verify: the single-device run took " +
                std::to_string(one.losses.size()) + " steps, this one " +
                std::to_string(parallel.losses.size()));
  double lossDifference = 0;
  for (size_t step = 0; step < one.losses.size(); ++step) {
    double a = parallel.losses[step], b = one.losses[step];
    double difference = a == b ? 0 : std::fabs(a - b) / std::fabs(b);
    lossDifference = std::max(lossDifference, difference);
  }
  // The trained parameters: state that is neither optimizer state nor a
  // bf16 copy, by the plan's names.
  double paramDifference = 0;
  std::string worst;
  size_t compared = 0;
  std::set<std::string> names;
  for (const Weight &weight : shared->weights)
    if (weight.state && weight.castOf < 0 &&
        weight.name.rfind("optimizer.", 0) != 0)
      names.insert(weight.name);
  for (const std::string &name : names) {
    auto ours = parallel.state.find(name);
    auto theirs = one.state.find(name);
    if (ours == parallel.state.end() || theirs == one.state.end())
      return fail("--verify: parameter '" + name +
                  "' is not trained by both runs");
    double difference = relativeDifference(ours->second, theirs->second);
    if (difference < 0)
      return fail("--verify: parameter '" + name + "' is " +
                  dtypeName(ours->second.dtype) +
                  shapeString(ours->second.shape) + " here but " +
                  dtypeName(theirs->second.dtype) +
                  shapeString(theirs->second.shape) + " on one device");
    ++compared;
    if (worst.empty() || difference > paramDifference) {
      paramDifference = difference;
      worst = name;
    }
  }
  std::printf("verify: %zu losses agree within %.1e (max relative "
              "difference); %zu parameters within %.1e (worst: %s)\n",
              one.losses.size(), lossDifference, compared, paramDifference,
              worst.c_str());
  std::fflush(stdout);
  if (lossDifference > options.verifyRtol ||
      paramDifference > options.verifyRtol) {
    char limit[32];
    std::snprintf(limit, sizeof(limit), "%g", options.verifyRtol);
    return fail(std::string("--verify: the run differs from the "
                            "single-device run by more than --verify-rtol ") +
                limit);
  }
  return 0;
}

/// --compile-only --report-json FILE: what each rank of `plan` holds and
/// plans (the planned peak; the bytes its collectives would send per step,
/// counted from the plan as a run counts them; nothing measured), written
/// as a run writes it and printed as a table.
bool reportPlanned(const Plan &plan, const std::string &path) {
  std::vector<RankUsage> usages;
  for (size_t rank = 0; rank < plan.ranks.size(); ++rank) {
    RunReport planned;
    for (const auto &[kind, bytes] : plannedCommBytes(plan, int(rank)))
      planned.commBytesSent[kind] = bytes;
    usages.push_back(rankUsage(plan, int(rank), planned));
  }
  FILE *file = std::fopen(path.c_str(), "w");
  std::string text = formatReportJson(usages);
  if (!file || std::fwrite(text.data(), 1, text.size(), file) != text.size() ||
      std::fclose(file) != 0) {
    std::fprintf(stderr, "loom-run: cannot write %s: %s\n", path.c_str(),
                 std::strerror(errno));
    return false;
  }
  // One unit for the table: the largest that keeps the biggest peak >= 1.
  uint64_t largest = 0;
  for (const RankUsage &usage : usages)
    largest = std::max(largest, usage.plannedPeakBytes);
  int shift = largest >= (1ull << 30) ? 30 : largest >= (1ull << 20) ? 20 : 10;
  const char *unit = shift == 30 ? "GiB" : shift == 20 ? "MiB" : "KiB";
  auto gib = [&](uint64_t bytes) {
    return double(bytes) / double(1ull << shift);
  };
  std::printf("planned per rank (%s; --report-json %s):\n"
              "  %-12s %10s %10s %10s %10s %12s\n",
              unit, path.c_str(), "ranks", "params", "gradients", "optimizer",
              "peak", "sent/step");
  // Ranks with the same figures share a line.
  for (size_t first = 0; first < usages.size();) {
    auto row = [&](const RankUsage &usage) {
      uint64_t sent = 0;
      for (const auto &[kind, bytes] : usage.commBytes)
        sent += bytes;
      return std::vector<uint64_t>{usage.paramBytes, usage.gradBytes,
                                   usage.optimizerBytes, usage.plannedPeakBytes,
                                   sent};
    };
    size_t last = first;
    while (last + 1 < usages.size() &&
           row(usages[last + 1]) == row(usages[first]))
      ++last;
    std::vector<uint64_t> figures = row(usages[first]);
    std::string ranks =
        last == first ? std::to_string(first)
                      : std::to_string(first) + "-" + std::to_string(last);
    std::printf("  %-12s %10.3f %10.3f %10.3f %10.3f %12.3f\n", ranks.c_str(),
                gib(figures[0]), gib(figures[1]), gib(figures[2]),
                gib(figures[3]), gib(figures[4]));
    first = last + 1;
  }
  return true;
}

/// --compile-only: compiles MODEL (with --train, the training step for
/// one microbatch), prints the time of each stage and pass, writes
/// --emit-plan when there is a plan, and exits. Input files, if given, are
/// read for their shapes only.
int compileOnlyRun(Options &options) {
  StatusOr<std::string> bytes = readFile(options.run.model);
  if (!bytes)
    return fail(bytes.status().message());
  if (looksLikePlan(*bytes))
    return fail("--compile-only compiles the model; " + options.run.model +
                " is a plan (pass the .onnx or .mlir model)");
  *bytes = std::string();
  int64_t microbatch =
      options.train.batchSize / options.compile.train.gradAccum;
  auto shape = [&](std::vector<int64_t> shape) {
    if (options.compile.train.enabled && !shape.empty())
      shape[0] = microbatch;
    return shape;
  };
  for (const auto &[name, path] : options.run.namedInputs) {
    StatusOr<HostTensor> tensor = readTensorFile(substituteRank(path, 0));
    if (!tensor)
      return fail(tensor.status().message());
    options.compile.inputShapes[name] = shape(tensor->shape);
  }
  for (const std::string &path : options.run.positionalInputs) {
    StatusOr<HostTensor> tensor = readTensorFile(substituteRank(path, 0));
    if (!tensor)
      return fail(tensor.status().message());
    options.compile.positionalInputShapes.push_back(shape(tensor->shape));
  }
  auto started = std::chrono::steady_clock::now();
  const std::string &reportPath = options.train.reportJsonPath;
  options.compile.planShapes = !reportPath.empty();
  StatusOr<CompileOnlyResult> compiled =
      compileOnly(options.run.model, options.compile);
  if (!compiled) {
    std::fprintf(stderr, "%s\n", compiled.status().message().c_str());
    return 1;
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started)
          .count();
  if (compiled->plan && !options.emitPlan.empty() &&
      !emitPlan(*compiled->plan, options.emitPlan))
    return 1;
  if (!reportPath.empty()) {
    const Plan *plan = compiled->plan     ? &*compiled->plan
                       : compiled->shapes ? &*compiled->shapes
                                          : nullptr;
    if (plan && !reportPlanned(*plan, reportPath))
      return 1;
  }
  std::string what = compiled->function.empty() ? std::string("the model")
                                                : "@" + compiled->function;
  std::string ranks = std::to_string(compiled->ranks) +
                      (compiled->ranks == 1 ? " rank" : " ranks");
  if (compiled->plan) {
    uint64_t bytes = compiled->plan->data.size();
    std::printf("compile-only: compiled %s for %s in %.2f s; the plan holds "
                "%zu weights (%llu bytes)%s\n",
                what.c_str(), ranks.c_str(), seconds,
                compiled->plan->weights.size(), (unsigned long long)bytes,
                options.emitPlan.empty()
                    ? ""
                    : (", written to " + options.emitPlan).c_str());
  } else {
    std::printf("compile-only: compiled %s for %s in %.2f s, shapes only "
                "(--no-weights: no weight was read; %s)\n",
                what.c_str(), ranks.c_str(), seconds,
                compiled->shapes ? "the plan was built without the weights' "
                                   "values, for --report-json"
                                 : "the plan, which holds the weights, was "
                                   "not built");
  }
  return 0;
}

/// Reads the data set, compiles the training step for one microbatch of
/// it, and trains.
/// --parallel: sets the training step's layout to the planner's choice
/// (auto: planned for this machine, calibrated unless --cluster names a
/// description) or to a loom-plan --json file's, and prints it.
int chooseLayout(Options &options) {
  LaunchOptions &launch = options.run.launch;
  int ranks = std::max(1, worldRanks(launch));
  Layout layout;
  if (options.parallel == "auto") {
    PlanRequest request;
    request.modelPath = options.run.model;
    request.clusterPath = options.clusterPath;
    if (request.clusterPath.empty()) {
      if (launchedByMPI())
        return fail("--parallel auto under mpirun needs --cluster FILE (a "
                    "`loom-run --calibrate` of the machine)");
      request.clusterPath =
          "/tmp/loom-cluster-" + std::to_string(::getpid()) + ".json";
      std::printf("== calibrating this machine for %d rank%s "
                  "(loom-run --calibrate)\n",
                  ranks, ranks == 1 ? "" : "s");
      if (int status = calibrate(request.clusterPath, ranks, launch))
        return status;
    }
    request.globalBatch = options.train.batchSize;
    request.dims = options.compile.dims;
    request.precision = options.compile.precision;
    request.train = options.compile.train;
    request.devices = ranks;
    for (const auto &[name, path] : options.run.namedInputs) {
      StatusOr<HostTensor> tensor = readTensorFile(path);
      if (!tensor)
        return fail(tensor.status().message());
      request.inputShapes[name] = tensor->shape;
    }
    StatusOr<PlanResult> result = planLayout(request);
    if (options.clusterPath.empty())
      std::remove(request.clusterPath.c_str());
    if (!result)
      return fail(result.status().message());
    std::printf("== loom-plan (--parallel auto)\n%s\n",
                formatPlanReport(request, *result).c_str());
    if (!result->choice())
      return fail("--parallel auto: no layout of " + std::to_string(ranks) +
                  " ranks fits");
    layout = result->choice()->layout;
  } else {
    StatusOr<Layout> planned = readPlannedLayout(options.parallel);
    if (!planned)
      return fail(planned.status().message());
    layout = *planned;
    std::printf("layout from %s: %s\n", options.parallel.c_str(),
                layout.str().c_str());
  }
  if (layout.devices() != ranks)
    return fail("the layout " + layout.str() + " runs on " +
                std::to_string(layout.devices()) + " ranks, not " +
                std::to_string(ranks));
  if (layout.microbatchSize * layout.dp * layout.microbatches !=
      options.train.batchSize)
    return fail("the layout " + layout.str() + " is for a batch of " +
                std::to_string(layout.microbatchSize * layout.dp *
                               layout.microbatches) +
                " rows, not --batch-size " +
                std::to_string(options.train.batchSize));
  applyLayout(layout, options.compile.train);
  if (layout.pp > 1)
    options.compile.train.sharedCores = sharedCores(launch, ranks);
  return 0;
}

int train(Options &options) {
  if (!options.parallel.empty())
    if (int status = chooseLayout(options))
      return status;
  Dataset data;
  int64_t microbatch =
      options.train.batchSize / options.compile.train.gradAccum;
  auto stepShape = [&](std::vector<int64_t> shape) {
    if (!shape.empty())
      shape[0] = microbatch;
    return shape;
  };
  for (const auto &[name, path] : options.run.namedInputs) {
    StatusOr<HostTensor> tensor = readTensorFile(path);
    if (!tensor)
      return fail(tensor.status().message());
    options.compile.inputShapes[name] = stepShape(tensor->shape);
    data.named.push_back({name, std::move(*tensor)});
  }
  for (const std::string &path : options.run.positionalInputs) {
    StatusOr<HostTensor> tensor = readTensorFile(path);
    if (!tensor)
      return fail(tensor.status().message());
    options.compile.positionalInputShapes.push_back(stepShape(tensor->shape));
    data.positional.push_back(std::move(*tensor));
    data.positionalPaths.push_back(path);
  }
  if (!options.labelsPath.empty()) {
    StatusOr<HostTensor> labels = readTensorFile(options.labelsPath);
    if (!labels)
      return fail(labels.status().message());
    data.labels = std::move(*labels);
  }
  std::shared_ptr<Plan> plan = loadOrCompile(options);
  if (!plan)
    return 1;
  if (!options.emitPlan.empty() && !emitPlan(*plan, options.emitPlan))
    return 1;
  if (options.train.steps == 0) {
    std::string written = options.emitPlan;
    if (!options.compile.emitMLIR.empty())
      written += (written.empty() ? "" : " and ") + options.compile.emitMLIR;
    // --explain alone has printed its report.
    if (!written.empty())
      std::printf("wrote %s (--steps 0: nothing trained)\n", written.c_str());
    return 0;
  }
  TrainResult result;
  int status = runTraining(plan, data, options.train, result);
  if (status == 0 && options.run.report)
    for (const RankReport &report : result.reports) {
      if (plan->ranks.size() > 1)
        std::printf("rank %d: report\n", report.rank);
      printReport(report.report, 1);
    }
  if (status == 0 && options.verify)
    status = verify(options, data, result);
  return status;
}

} // namespace

int main(int argc, char **argv) {
  Options options;
  std::string error = parseOptions(argc, argv, options);
  if (!error.empty())
    return fail(error);
  if (!options.calibratePath.empty()) {
    return calibrate(options.calibratePath,
                     std::max(1, worldRanks(options.run.launch)),
                     options.run.launch);
  }
  if (options.compileOnly)
    return compileOnlyRun(options);
  if (options.compile.train.enabled)
    return train(options);

  // Inputs are read first: their shapes fix the model's symbolic dims.
  size_t givenInputs = 0;
  // Rank 0's files stand for every rank's (`{rank}` in a path).
  for (const auto &[name, path] : options.run.namedInputs) {
    StatusOr<HostTensor> tensor = readTensorFile(substituteRank(path, 0));
    if (!tensor)
      return fail(tensor.status().message());
    options.compile.inputShapes[name] = tensor->shape;
    ++givenInputs;
  }
  for (const std::string &path : options.run.positionalInputs) {
    StatusOr<HostTensor> tensor = readTensorFile(substituteRank(path, 0));
    if (!tensor)
      return fail(tensor.status().message());
    options.compile.positionalInputShapes.push_back(tensor->shape);
    ++givenInputs;
  }

  std::shared_ptr<Plan> plan = loadOrCompile(options);
  if (!plan)
    return 1;

  if (!options.emitPlan.empty()) {
    if (!emitPlan(*plan, options.emitPlan))
      return 1;
    bool wantsRun =
        givenInputs > 0 || !options.run.outputDir.empty() || options.run.report;
    if (!wantsRun)
      return 0;
  }

  return runPlan(plan, options.run);
}
