//===- Launcher.cpp - Starting the ranks of a plan ------------------------===//
//
// Threads (--ranks N) or one rank per process (mpirun: MPI, or NCCL for
// GPUs). Every rank gets its communicator made ready for its device and its
// own executor options, runs the body, and aborts the others when it fails.
//
//===----------------------------------------------------------------------===//

#include "loom/Runtime/Session/Launcher.h"

#include "loom/Runtime/Executor.h"

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include <omp.h>
#ifdef __linux__
#include <pthread.h>
#include <sched.h>
#endif

using namespace loomrt;

namespace {

/// This process's rank among the ranks mpirun started on its host (Open
/// MPI's or MPICH's variable; 0 when neither is set).
int localRank() {
  for (const char *name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"})
    if (const char *value = std::getenv(name))
      return std::max(0, std::atoi(value));
  return 0;
}

/// What every rank does before its body: a host engine is made to move the
/// buffers of a GPU rank, and each rank keeps its own tuning choices.
Status prepareRank(RankContext &context) {
  if (context.world && context.executor.device == Device::CUDA &&
      !context.world->onDevice()) {
    // Thread ranks share one GPU (NCCL refuses that), and MPI ranks without
    // NCCL: stage through the host.
    StatusOr<std::shared_ptr<Communicator>> wrapped =
        wrapForDevice(context.world, context.executor.cuda.gpu);
    if (!wrapped)
      return wrapped.status();
    context.world = *wrapped;
  }
  // Ranks writing one tuning file would overwrite each other's choices.
  std::string &tuningFile = context.executor.cuda.tuningFile;
  if (context.size > 1 && !tuningFile.empty() &&
      tuningFile.find("{rank}") == std::string::npos)
    return Status::error(
        "--tuning-file: the plan has " + std::to_string(context.size) +
        " ranks; put {rank} in the file's name, so that each keeps its own");
  tuningFile = substituteRank(tuningFile, context.rank);
  return Status::ok();
}

/// Thread ranks each on CPUs of their own, when the process may use enough
/// of them: rank r on the r-th run of omp_get_max_threads() of the CPUs it
/// is allowed (its OpenMP and OpenBLAS teams inherit the set). Unpinned,
/// the scheduler moved two ranks of the example GPT between two cores, and
/// the step waited on whichever rank it had slowed (43.0 and 47.1 ms per
/// step unpinned, 40.6 and 39.6 pinned; docs/design/runtime.md).
/// LOOM_PIN_RANKS=0 leaves the threads to the scheduler. Empty where
/// pinning is off or impossible.
std::vector<std::vector<int>> rankCpus(int ranks) {
  std::vector<std::vector<int>> cpus;
#ifdef __linux__
  if (const char *pin = std::getenv("LOOM_PIN_RANKS");
      pin && std::strcmp(pin, "0") == 0)
    return cpus;
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0)
    return cpus;
  std::vector<int> list;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &allowed))
      list.push_back(cpu);
  const size_t each = size_t(std::max(1, omp_get_max_threads()));
  if (list.size() < size_t(ranks) * each)
    return cpus;
  for (int rank = 0; rank < ranks; ++rank)
    cpus.emplace_back(list.begin() + long(rank * each),
                      list.begin() + long((rank + 1) * each));
#else
  (void)ranks;
#endif
  return cpus;
}

/// Pins the calling thread to `cpus` (nothing when empty).
void pinThread(const std::vector<int> &cpus) {
#ifdef __linux__
  if (cpus.empty())
    return;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus)
    CPU_SET(cpu, &set);
  (void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
#else
  (void)cpus;
#endif
}

/// Runs one rank: prepare, then the body.
Status runRank(RankContext &context, const RankBody &body) {
  if (Status status = prepareRank(context); !status)
    return status;
  return body(context);
}

} // namespace

bool loomrt::launchedByMPI() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE") ||
         std::getenv("PMIX_RANK");
}

std::string loomrt::substituteRank(const std::string &path, int rank) {
  std::string result = path;
  const std::string key = "{rank}";
  for (size_t at = result.find(key); at != std::string::npos;
       at = result.find(key, at))
    result.replace(at, key.size(), std::to_string(rank));
  return result;
}

std::string RankContext::prefix() const {
  return size > 1 ? "rank " + std::to_string(rank) + ": " : "";
}

bool LaunchResult::ok() const {
  return std::all_of(
      outcomes.begin(), outcomes.end(),
      [](const RankOutcome &outcome) { return outcome.status.isOk(); });
}

StatusOr<LaunchResult> loomrt::launchRanks(int ranks,
                                           const LaunchOptions &options,
                                           const RankBody &body) {
  const std::string &model = options.model;
  if (options.threadRanks > 0 && options.threadRanks != ranks)
    return Status::error("--ranks " + std::to_string(options.threadRanks) +
                         ", but " + model + " is a plan for " +
                         std::to_string(ranks) + " rank(s)");

  std::string noGPU;
  if (options.executor.device == Device::CUDA && cudaDeviceCount(&noGPU) == 0)
    return Status::error(model + ": --device cuda: " + noGPU);

  bool mpi = options.threadRanks == 0 && ranks > 1 && launchedByMPI();
  if (ranks > 1 && options.threadRanks == 0 && !mpi)
    return Status::error(
        model + " is a plan for " + std::to_string(ranks) +
        " ranks: run it with --ranks " + std::to_string(ranks) +
        " (threads) or under mpirun -np " + std::to_string(ranks));

  LaunchResult result;
  result.ranks = ranks;
  result.processPerRank = mpi;

  // One process per rank under mpirun.
  if (mpi) {
    // GPUs talk through NCCL where there is one (each rank on the GPU of its
    // local rank); otherwise the MPI engine stages through the host.
    bool nccl = options.executor.device == Device::CUDA && haveNCCL();
    if (nccl && options.plan)
      if (Status status = checkTransferOrder(*options.plan); !status)
        return Status::error(model + ": " + status.message());
    StatusOr<std::shared_ptr<Communicator>> world =
        nccl ? createNCCLCommunicator(options.comm)
             : createMPICommunicator(options.comm);
    if (!world)
      return world.status();
    if ((*world)->size() != ranks)
      return Status::error("mpirun started " +
                           std::to_string((*world)->size()) +
                           " processes, but " + model + " is a plan for " +
                           std::to_string(ranks) + " ranks");
    RankContext context;
    context.rank = (*world)->rank();
    context.size = ranks;
    context.processPerRank = true;
    context.world = *world;
    context.host = *world;
    if (nccl) {
      // NCCL moves device buffers: the host's exchanges go over MPI.
      StatusOr<std::shared_ptr<Communicator>> host =
          createMPICommunicator(options.comm);
      if (!host)
        return host.status();
      context.host = *host;
    }
    context.executor = options.executor;
    if (nccl)
      context.executor.cuda.gpu = -1; // the GPU NCCL made current
    else if (options.executor.device == Device::CUDA)
      context.executor.cuda.gpu = localRank() % cudaDeviceCount();
    Status status = runRank(context, body);
    if (!status)
      (*world)->abort(status.message());
    result.outcomes.push_back({context.rank, status, context.died});
    return result;
  }

  // Threads: every rank in this process.
  // Each with a progress thread, so that collectives overlap the compute
  // (as MPI's and NCCL's do).
  std::vector<std::shared_ptr<Communicator>> comms =
      createThreadCommunicators(ranks, options.comm);
  if (ranks > 1)
    for (std::shared_ptr<Communicator> &comm : comms)
      comm = wrapAsync(comm);
  std::vector<RankContext> contexts(ranks);
  std::vector<Status> statuses(ranks);
  for (int rank = 0; rank < ranks; ++rank) {
    RankContext &context = contexts[rank];
    context.rank = rank;
    context.size = ranks;
    context.world = comms[rank];
    context.host = comms[rank];
    context.executor = options.executor;
  }
  if (ranks == 1) {
    statuses[0] = runRank(contexts[0], body);
  } else {
    std::vector<std::thread> threads;
    std::vector<std::vector<int>> cpus = rankCpus(ranks);
    for (int rank = 0; rank < ranks; ++rank)
      threads.emplace_back([&, rank] {
        if (!cpus.empty())
          pinThread(cpus[size_t(rank)]);
        statuses[rank] = runRank(contexts[rank], body);
        // A failing rank stops the others; a killed one just vanishes.
        if (!statuses[rank] && !contexts[rank].died)
          comms[rank]->abort(statuses[rank].message());
      });
    for (std::thread &thread : threads)
      thread.join();
  }
  for (int rank = 0; rank < ranks; ++rank)
    result.outcomes.push_back({rank, statuses[rank], contexts[rank].died});
  return result;
}

void loomrt::armTestKill(Executor &executor, const LaunchOptions &options,
                         RankContext &context) {
  if (context.rank != options.killRank)
    return;
  int64_t at = options.killAt;
  bool process = context.processPerRank;
  bool *died = &context.died;
  executor.setInstructionHook([at, process, died](size_t index) -> Status {
    if (int64_t(index) != at)
      return Status::ok();
    if (process)
      std::raise(SIGKILL); // A process that dies, as a crash would.
    *died = true;
    return Status::error("killed before instruction " + std::to_string(index) +
                         " (--test-kill-rank)");
  });
}

Status loomrt::barrier(const RankContext &context) {
  if (context.size <= 1 || !context.host)
    return Status::ok();
  int32_t one = 1, sum = 0;
  return context.host->allReduce(&one, &sum, 1, DType::I32, ReduceOp::Sum)
      ->wait();
}
