//===- bench_collectives.cpp - Bus bandwidth of Loom's collectives --------===//
//
//   loom-bench-collectives --engine threads [--ranks N] [--max-bytes B]
//   mpirun -np N loom-bench-collectives --engine mpi [--max-bytes B]
//
// Issue 6 asks how close each engine's all-reduce and all-gather come to
// what the machine could do, so every figure is printed next to a reference
// measured by the same code on the same buffers: the threads engine against
// memcpy (N threads each copying the bytes a rank moves: the memory
// bandwidth that bounds any in-process collective), and Loom's MPI engine
// against OpenMPI's own MPI_Allreduce / MPI_Allgather on MPI_COMM_WORLD
// (what Loom's nonblocking calls and polling waits add to MPI).
//
// Bus bandwidth as in nccl-tests, so that figures compare across rank
// counts: all-reduce bytes / t * 2(N-1)/N, all-gather gathered bytes / t *
// (N-1)/N. Each figure is the slowest rank's mean over an adaptive number
// of calls. Every operation's Status is checked and every size's result
// verified, so a broken engine cannot produce a fast, wrong figure.
//
//===----------------------------------------------------------------------===//

#include "loom/Runtime/Communicator.h"

#ifdef LOOM_BENCH_HAVE_MPI
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

using namespace loomrt;

namespace {

using Clock = std::chrono::steady_clock;

enum class Engine { Threads, MPI };

struct Options {
  Engine engine = Engine::Threads;
  int ranks = 2;
  uint64_t minBytes = 1 << 10;
  uint64_t maxBytes = uint64_t(256) << 20;
  /// Timed seconds per figure (after the warm-up).
  double seconds = 0.2;
};

[[noreturn]] void die(Communicator *comm, const std::string &message) {
  std::fprintf(stderr, "loom-bench-collectives: error: %s\n", message.c_str());
  std::fflush(stderr);
  // Under MPI this ends the whole job (MPI_Abort); under threads it wakes the
  // other ranks, and the process exits either way.
  if (comm)
    comm->abort(message);
  std::_Exit(1);
}

void check(Communicator &comm, const Status &status) {
  if (!status)
    die(&comm, status.message());
}

/// The max over ranks of `value`; also a barrier. Bookkeeping outside the
/// timed loops, so it goes through the engine under test in both modes.
double maxOverRanks(Communicator &comm, double value) {
  check(comm,
        comm.allReduce(&value, &value, 1, DType::F64, ReduceOp::Max)->wait());
  return value;
}

/// The mean seconds per call of `call` on the slowest rank. The call count
/// derives from the warm-up's max over ranks, so it is the same on every
/// rank (collectives must match).
template <typename Call>
double timeCalls(Communicator &comm, const Options &options, uint64_t bytes,
                 Call call) {
  bool large = bytes >= (uint64_t(64) << 20);
  int warmup = large ? 1 : 2;
  maxOverRanks(comm, 0);
  auto start = Clock::now();
  for (int i = 0; i < warmup; ++i)
    call();
  std::chrono::duration<double> took = Clock::now() - start;
  double first = maxOverRanks(comm, took.count() / warmup);
  int calls = std::clamp(int(options.seconds / std::max(first, 1e-9)),
                         large ? 2 : 3, 100000);
  maxOverRanks(comm, 0);
  start = Clock::now();
  for (int i = 0; i < calls; ++i)
    call();
  took = Clock::now() - start;
  return maxOverRanks(comm, took.count() / calls);
}

/// Rank r's element i: small integers, so f32 sums are exact.
float pattern(int rank, int64_t i) { return float(rank + 1 + i % 64); }

/// The all-reduce sum (`gather` false) or the all-gather of pattern() on
/// every rank: aborts on the first wrong element.
void verify(Communicator &comm, const char *what, const float *recv,
            int64_t count, bool gather) {
  int n = comm.size();
  int64_t total = gather ? count * n : count;
  for (int64_t i = 0; i < total; ++i) {
    float expected = gather ? pattern(int(i / count), i % count)
                            : float(n * (n + 1) / 2 + n * (i % 64));
    if (recv[i] != expected)
      die(&comm, std::string(what) + " of " + std::to_string(count) +
                     " elements is wrong on rank " +
                     std::to_string(comm.rank()) + " at element " +
                     std::to_string(i) + ": " + std::to_string(recv[i]) +
                     " instead of " + std::to_string(expected));
  }
}

/// Copies `bytes` from `from` to `to` (both `size` bytes), wrapping around:
/// the memcpy reference moves as many bytes as a rank of the collective.
void copyWrapping(void *to, const void *from, uint64_t size, uint64_t bytes) {
  for (uint64_t done = 0; done < bytes; done += size)
    std::memcpy(to, from, size_t(std::min(size, bytes - done)));
}

std::string sizeName(uint64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB"};
  int unit = 0;
  while (bytes >= 1024 && bytes % 1024 == 0 && unit < 3) {
    bytes /= 1024;
    ++unit;
  }
  return std::to_string(bytes) + " " + units[unit];
}

/// Ratios span 1e-5 to 1e3: three significant digits, or four decimals
/// below 1 (never an exponent, which would break the columns).
std::string ratioName(double ratio) {
  char text[32];
  std::snprintf(text, sizeof(text),
                ratio >= 100 ? "%.0f"
                : ratio >= 1 ? "%.3g"
                             : "%.4f",
                ratio);
  return text;
}

void printHeader(const Options &options, int n) {
  const char *ref = options.engine == Engine::Threads ? "memcpy" : "OpenMPI";
  if (options.engine == Engine::Threads)
    std::printf("threads engine, %d ranks (threads); reference: memcpy of the "
                "same bytes per rank by %d threads at once\n",
                n, n);
  else
    std::printf("MPI engine, %d ranks (processes); reference: OpenMPI's "
                "MPI_Allreduce / MPI_Allgather, same buffers and counts\n",
                n);
  std::printf("size: all_reduce = f32 sum buffer per rank; all_gather = "
              "gathered output (each rank sends size/%d)\n",
              n);
  std::printf("busbw in GB/s (1e9 B/s): all_reduce size/t*2(N-1)/N, "
              "all_gather size/t*(N-1)/N; ratio = loom / %s\n\n",
              ref);
  std::printf("%9s | %28s | %28s\n", "", "all_reduce busbw (GB/s)",
              "all_gather busbw (GB/s)");
  std::printf("%9s | %9s %9s %8s | %9s %9s %8s\n", "size", "loom", ref, "ratio",
              "loom", ref, "ratio");
  std::printf("----------+------------------------------+--------------------"
              "----------\n");
  std::fflush(stdout);
}

/// One rank's whole run; rank 0 prints the table.
void runRank(Communicator &comm, const Options &options) {
  int n = comm.size(), rank = comm.rank();
  if (rank == 0)
    printHeader(options, n);
  for (uint64_t size = options.minBytes; size <= options.maxBytes; size *= 4) {
    // One pair of buffers per size, filled (first-touched) by their rank.
    int64_t elements = int64_t(size / sizeof(float));
    std::unique_ptr<float[]> a(new float[size_t(elements)]);
    std::unique_ptr<float[]> b(new float[size_t(elements)]);
    for (int64_t i = 0; i < elements; ++i)
      a[size_t(i)] = pattern(rank, i);
    double figures[2][2]; // [all_reduce, all_gather][loom, reference]
    for (int gather = 0; gather < 2; ++gather) {
      const char *what = gather ? "all_gather" : "all_reduce";
      // All-gather: each rank sends `count` elements, gathers size bytes.
      int64_t count = gather ? elements / n : elements;
      uint64_t bytes = uint64_t(gather ? count * n : count) * sizeof(float);
      double busBytes = gather ? double(bytes) * (n - 1) / n
                               : double(bytes) * 2 * (n - 1) / n;
      // Cleared, so that verify() cannot pass on a previous result.
      std::fill(b.get(), b.get() + elements, 0.0f);
      double loom = timeCalls(comm, options, bytes, [&] {
        if (gather)
          check(comm,
                comm.allGather(a.get(), b.get(), count, DType::F32)->wait());
        else
          check(comm, comm.allReduce(a.get(), b.get(), count, DType::F32,
                                     ReduceOp::Sum)
                          ->wait());
      });
      verify(comm, what, b.get(), count, gather);
      std::fill(b.get(), b.get() + elements, 0.0f);
      double reference;
      if (options.engine == Engine::Threads) {
        reference = timeCalls(comm, options, bytes, [&] {
          copyWrapping(b.get(), a.get(), size, uint64_t(busBytes));
        });
      } else {
#ifdef LOOM_BENCH_HAVE_MPI
        reference = timeCalls(comm, options, bytes, [&] {
          int failed =
              gather ? MPI_Allgather(a.get(), int(count), MPI_FLOAT, b.get(),
                                     int(count), MPI_FLOAT, MPI_COMM_WORLD)
                     : MPI_Allreduce(a.get(), b.get(), int(count), MPI_FLOAT,
                                     MPI_SUM, MPI_COMM_WORLD);
          if (failed != MPI_SUCCESS)
            die(&comm, std::string("MPI's ") + what + " failed");
        });
        verify(comm, what, b.get(), count, gather);
#else
        die(&comm, "built without MPI");
#endif
      }
      figures[gather][0] = busBytes / loom / 1e9;
      figures[gather][1] = busBytes / reference / 1e9;
    }
    if (rank == 0) {
      std::printf("%9s | %9.3f %9.3f %8s | %9.3f %9.3f %8s\n",
                  sizeName(size).c_str(), figures[0][0], figures[0][1],
                  ratioName(figures[0][0] / figures[0][1]).c_str(),
                  figures[1][0], figures[1][1],
                  ratioName(figures[1][0] / figures[1][1]).c_str());
      std::fflush(stdout);
    }
  }
}

bool parseBytes(const char *text, uint64_t &bytes) {
  char *end = nullptr;
  unsigned long long value = std::strtoull(text, &end, 10);
  int shift = 0;
  if (*end == 'K' || *end == 'k')
    shift = 10;
  else if (*end == 'M' || *end == 'm')
    shift = 20;
  else if (*end == 'G' || *end == 'g')
    shift = 30;
  if (shift)
    ++end;
  if (end == text || *end || value == 0)
    return false;
  bytes = uint64_t(value) << shift;
  return true;
}

/// Prints the usage (after `message`, an error, unless null) and exits.
[[noreturn]] void usage(const char *message) {
  std::FILE *out = message ? stderr : stdout;
  if (message)
    std::fprintf(out, "loom-bench-collectives: %s\n", message);
  std::fprintf(out,
               "usage: loom-bench-collectives --engine threads [--ranks N]\n"
               "       mpirun -np N loom-bench-collectives --engine mpi\n"
               "options: --min-bytes B (1K) --max-bytes B (256M; K/M/G "
               "suffixes) --seconds S (0.2 timed per figure)\n"
               "this build: MPI engine %s\n",
#ifdef LOOM_BENCH_HAVE_MPI
               "available"
#else
               "unavailable"
#endif
  );
  std::exit(message ? 2 : 0);
}

} // namespace

int main(int argc, char **argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h")
      usage(nullptr);
    if (i + 1 >= argc)
      usage(("missing value or unknown option: " + arg).c_str());
    const char *value = argv[++i];
    if (arg == "--engine" && std::string(value) == "threads")
      options.engine = Engine::Threads;
    else if (arg == "--engine" && std::string(value) == "mpi")
      options.engine = Engine::MPI;
    else if (arg == "--ranks")
      options.ranks = std::atoi(value);
    else if (arg == "--min-bytes" && parseBytes(value, options.minBytes))
      continue;
    else if (arg == "--max-bytes" && parseBytes(value, options.maxBytes))
      continue;
    else if (arg == "--seconds" && (options.seconds = std::atof(value)) > 0)
      continue;
    else
      usage(("bad option: " + arg + " " + value).c_str());
  }
  // Whole f32 elements, and an all-gather block per rank.
  if (options.minBytes < 64 || options.minBytes % 64)
    usage("--min-bytes must be a multiple of 64");

  if (options.engine == Engine::Threads) {
    if (options.ranks < 2)
      usage("--ranks must be at least 2");
    std::vector<std::shared_ptr<Communicator>> comms =
        createThreadCommunicators(options.ranks);
    std::vector<std::thread> threads;
    for (auto &comm : comms)
      threads.emplace_back([&options, comm] { runRank(*comm, options); });
    for (std::thread &thread : threads)
      thread.join();
    return 0;
  }

#ifndef LOOM_BENCH_HAVE_MPI
  usage("built without MPI: --engine mpi is unavailable");
#else
  if (!haveMPI())
    usage("the runtime was built without MPI");
  StatusOr<std::shared_ptr<Communicator>> comm = createMPICommunicator();
  if (!comm)
    die(nullptr, comm.status().message());
  if ((*comm)->size() < 2)
    die(comm->get(), "--engine mpi needs at least 2 ranks (mpirun -np N)");
  runRank(**comm, options);
  return 0;
#endif
}
