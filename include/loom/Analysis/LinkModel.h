//===- LinkModel.h - Bytes and time of a collective on a link ---*- C++ -*-===//
//
// The communication half of Loom's cost model: how many bytes each rank of a
// group sends for one collective, counted as a ring algorithm sends them,
// and how long that takes on a link with a latency and a bandwidth. The
// compiler's `loom-explain-sharding` (and the planner to come) estimates
// with it, and the runtime counts what its collectives send with it
// (RunReport::commBytesSent, `loom-run --report-json`), so that the
// prediction and the measurement use one formula.
//
// Plain C++17 and header-only: the runtime, which builds without LLVM/MLIR,
// includes it too.
//
// With S the bytes of the full buffer (the gathered result of an
// all_gather, the unscattered input of a reduce_scatter, the buffer of the
// others) and n the group size, each rank sends
//
//   all_reduce                     2(n-1)/n * S   in 2(n-1) steps
//   all_gather, reduce_scatter      (n-1)/n * S   in  n-1   steps
//   all_to_all                      (n-1)/n * S   in  n-1   steps
//   broadcast (pipelined chain)     (n-1)/n * S   in  n-1   steps (average)
//   send                                    S     in   1    step
//   recv                                    0     in   1    step
//
// (bytes rounded down to whole bytes; nothing for n <= 1). A receive
// sends nothing: its bytes are its sender's. The time is
//
//   seconds = latency * steps + bytes on the link / bandwidth
//
// where the bytes on the link are the bytes sent, except for a receive,
// which waits for the S bytes its sender sends. Bandwidth is a bus
// bandwidth in GB/s (10^9 bytes per second): the figure nccl-tests and
// loom-bench-collectives report (busbw), which divides exactly these bytes
// by the measured time.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_ANALYSIS_LINKMODEL_H
#define LOOM_ANALYSIS_LINKMODEL_H

#include <array>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string_view>

namespace loomcost {

/// The collectives, named as in the runtime's plans (kindName).
enum class CollectiveKind : uint8_t {
  AllReduce,
  AllGather,
  ReduceScatter,
  AllToAll,
  Broadcast,
  Send,
  Recv,
};

/// Every kind, in the order reports list them.
inline constexpr CollectiveKind kCollectiveKinds[] = {
    CollectiveKind::AllReduce,     CollectiveKind::AllGather,
    CollectiveKind::ReduceScatter, CollectiveKind::AllToAll,
    CollectiveKind::Broadcast,     CollectiveKind::Send,
    CollectiveKind::Recv};

/// "all_reduce", "all_gather", "reduce_scatter", "all_to_all",
/// "broadcast", "send", "recv": the plan's instruction names.
inline const char *kindName(CollectiveKind kind) {
  switch (kind) {
  case CollectiveKind::AllReduce:
    return "all_reduce";
  case CollectiveKind::AllGather:
    return "all_gather";
  case CollectiveKind::ReduceScatter:
    return "reduce_scatter";
  case CollectiveKind::AllToAll:
    return "all_to_all";
  case CollectiveKind::Broadcast:
    return "broadcast";
  case CollectiveKind::Send:
    return "send";
  case CollectiveKind::Recv:
    return "recv";
  }
  return "?";
}

/// The kind a plan instruction name (kindName) stands for.
inline std::optional<CollectiveKind> parseKind(std::string_view name) {
  for (CollectiveKind kind : kCollectiveKinds)
    if (name == kindName(kind))
      return kind;
  return std::nullopt;
}

/// Latency steps of a ring (or chain, or pairwise exchange) algorithm over
/// `groupSize` ranks: 2(n-1) for all_reduce (reduce-scatter then
/// all-gather), n-1 for the other collectives, 1 for send and recv, 0 when
/// there is nobody to talk to.
inline int64_t ringSteps(CollectiveKind kind, int64_t groupSize) {
  if (groupSize <= 1)
    return 0;
  switch (kind) {
  case CollectiveKind::AllReduce:
    return 2 * (groupSize - 1);
  case CollectiveKind::Send:
  case CollectiveKind::Recv:
    return 1;
  default:
    return groupSize - 1;
  }
}

/// Bytes each rank sends for one collective of `fullBytes` (S) over
/// `groupSize` ranks (n), as a ring sends them (see the table above).
inline uint64_t ringBytesSent(CollectiveKind kind, uint64_t fullBytes,
                              int64_t groupSize) {
  if (groupSize <= 1)
    return 0;
  uint64_t n = uint64_t(groupSize);
  switch (kind) {
  case CollectiveKind::AllReduce:
    return 2 * (n - 1) * fullBytes / n;
  case CollectiveKind::Send:
    return fullBytes;
  case CollectiveKind::Recv:
    return 0;
  default:
    return (n - 1) * fullBytes / n;
  }
}

/// A link between ranks: a per-step latency and a bus bandwidth.
struct LinkModel {
  /// GB/s (10^9 bytes per second).
  double gigabytesPerSecond = 100;
  /// Microseconds per latency step.
  double latencyMicroseconds = 5;
  /// A collective kind's own bandwidth and latency, where measured
  /// (loom-run --calibrate: an engine's all-gather need not move bytes as
  /// fast as its all-reduce); a bandwidth of 0 takes the link's.
  struct KindLink {
    double gigabytesPerSecond = 0, latencyMicroseconds = 0;
  };
  std::array<KindLink, std::size(kCollectiveKinds)> byKind{};

  double bandwidth(CollectiveKind kind) const {
    const KindLink &own = byKind[size_t(kind)];
    return own.gigabytesPerSecond > 0 ? own.gigabytesPerSecond
                                      : gigabytesPerSecond;
  }
  double latency(CollectiveKind kind) const {
    const KindLink &own = byKind[size_t(kind)];
    return own.gigabytesPerSecond > 0 ? own.latencyMicroseconds
                                      : latencyMicroseconds;
  }

  /// latency * steps + bytes on the link / bandwidth, in seconds (see the
  /// top of this file; a receive waits for its sender's S bytes).
  double seconds(CollectiveKind kind, uint64_t fullBytes,
                 int64_t groupSize) const {
    if (groupSize <= 1)
      return 0;
    uint64_t onLink = kind == CollectiveKind::Recv
                          ? fullBytes
                          : ringBytesSent(kind, fullBytes, groupSize);
    double steps = double(ringSteps(kind, groupSize));
    return latency(kind) * 1e-6 * steps +
           double(onLink) / (bandwidth(kind) * 1e9);
  }
};

} // namespace loomcost

#endif // LOOM_ANALYSIS_LINKMODEL_H
