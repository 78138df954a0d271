//===- Cluster.h - The machine a plan is costed for -------------*- C++ -*-===//
//
// The planner's description of a cluster (docs/design/planner.md): how many
// nodes of how many devices, what one device computes and holds, and the
// links between devices of one node and of different nodes. Read from the
// JSON file `loom-plan --cluster` takes; examples are in examples/clusters.
//
// The cost model built on it times what a plan runs:
//   - a kernel by the roofline of its FLOPs (at the device's peak for its
//     precision, times an efficiency that grows with the GEMM's smallest
//     dimension) and its bytes (at the memory bandwidth times an
//     efficiency), plus a fixed launch overhead;
//   - a collective by the alpha-beta model of LinkModel.h on the link its
//     group crosses: one node's link when every member is on one node, the
//     network otherwise (the slowest link of a ring is the one between
//     nodes). An all-reduce takes the faster of a ring and a tree (NCCL
//     picks between the two by size): a tree needs 2 log2(n) latency steps
//     instead of 2(n - 1) and moves the same bytes per rank.
// Ranks are placed on devices in order: rank r on node r / devices_per_node.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_ANALYSIS_CLUSTER_H
#define LOOM_ANALYSIS_CLUSTER_H

#include "loom/Analysis/LinkModel.h"
#include "llvm/ADT/StringRef.h"

#include "loom/Runtime/InstructionWork.h"
#include <map>

#include <optional>
#include <string>
#include <vector>

namespace mlir {
namespace loom {

struct DeviceSpec {
  /// Memory one device holds, in GiB (2^30 bytes).
  double memoryGiB = 0;
  /// Peak TFLOP/s by the precision of the GEMM's operands ("f32", "bf16").
  std::map<std::string, double> peakTflops;
  /// Memory bandwidth, GB/s (10^9 bytes per second).
  double memoryGBps = 0;
  /// The fraction of peak a large GEMM reaches, and the smallest dimension
  /// (of M, N, K) at which it reaches half of that.
  double gemmEfficiency = 0.8;
  double gemmHalfDim = 128;
  /// The fraction of the bandwidth a memory-bound kernel reaches.
  double memoryEfficiency = 0.8;
  /// Fixed time of every kernel (its launch), microseconds.
  double kernelOverheadUs = 5;
  /// Measured by kind (loom-run --calibrate), each replacing the roofline's
  /// figure for the kernels it names: the GEMM-like FLOP rate of a kernel
  /// (attention's, far below a GEMM's on a CPU), TFLOP/s; the bandwidth of
  /// a memory-bound kernel (cross_entropy), GB/s; and what an elementwise
  /// program's operations cost per element computed (exp, erf, div: the
  /// optimizer's and GELU's programs are compute-bound on a CPU), ns.
  std::map<std::string, double> kernelTflops, kernelGBps, elementwiseNs;
  /// By kind, a fixed time of every kernel of that kind on top of the
  /// launch overhead, microseconds: on a GPU, a kernel with few thread
  /// blocks (an attention over one sequence) leaves multiprocessors idle,
  /// so its time is this latency plus its work at the kind's rate.
  std::map<std::string, double> kernelLatencyUs;
  /// By kind, nanoseconds per (query, key) score and per element of the
  /// query rows (InstructionWork::scores, rowElements), on top of the
  /// kind's FLOP rate (or instead of it, where the kind has no rate): a
  /// CPU attention's time follows them, not its FLOPs, and one rate
  /// measured at one shape missed the example GPT's by 2x.
  std::map<std::string, double> kernelNsPerScore, kernelNsPerRowElement;
};

struct ClusterSpec {
  int64_t nodes = 1;
  int64_t devicesPerNode = 1;
  DeviceSpec device;
  /// Per device, one direction (a bus bandwidth: LinkModel.h).
  loomcost::LinkModel intraNode, interNode;
  /// Where the file came from, for messages.
  std::string source;

  int64_t devices() const { return nodes * devicesPerNode; }
  uint64_t memoryBytes() const {
    return uint64_t(device.memoryGiB * double(1ull << 30));
  }
  int64_t nodeOf(int64_t rank) const { return rank / devicesPerNode; }
  /// The link a group of these ranks communicates over.
  const loomcost::LinkModel &linkFor(const std::vector<int> &ranks) const;
  /// The seconds of one collective of `fullBytes` (LinkModel.h's S) among
  /// `ranks`; all-reduce the faster of ring and tree.
  double collectiveSeconds(loomcost::CollectiveKind kind, uint64_t fullBytes,
                           const std::vector<int> &ranks) const;
  /// The seconds of a kernel doing `gemmFlops` of GEMM work whose smallest
  /// dimension is `gemmMinDim`, at `precision`'s peak, plus `otherFlops`
  /// and `bytes` of memory traffic.
  double kernelSeconds(double gemmFlops, double gemmMinDim,
                       llvm::StringRef precision, double bytes) const;
  /// The seconds of `kernel` doing `work`: the roofline above, with the
  /// device's figures by kind where it has them (an attention's FLOPs at
  /// its kind's rate plus its scores and query-row elements at theirs), and
  /// an elementwise program's operations timed per element, added to its
  /// bytes' time (a CPU's program computes, then streams).
  double kernelSeconds(const loomrt::InstructionWork &work,
                       llvm::StringRef kernel) const;
  /// Peak FLOP/s at `precision` (f32 when the device lists no such key).
  double peakFlops(llvm::StringRef precision) const;
};

/// Parses a cluster description (JSON; the keys of docs/design/planner.md).
/// Errors name the file (`source`) and the key, and say what was expected.
std::optional<ClusterSpec> parseClusterSpec(llvm::StringRef json,
                                            llvm::StringRef source,
                                            std::string &error);

/// Reads and parses the file at `path`.
std::optional<ClusterSpec> loadClusterSpec(llvm::StringRef path,
                                           std::string &error);

} // namespace loom
} // namespace mlir

#endif // LOOM_ANALYSIS_CLUSTER_H
