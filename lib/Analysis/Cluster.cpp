//===- Cluster.cpp - The machine a plan is costed for ---------------------===//

#include "loom/Analysis/Cluster.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>

using namespace llvm;
using namespace mlir::loom;
using loomcost::CollectiveKind;

const loomcost::LinkModel &
ClusterSpec::linkFor(const std::vector<int> &ranks) const {
  for (int rank : ranks)
    if (nodeOf(rank) != nodeOf(ranks.front()))
      return interNode;
  return intraNode;
}

double ClusterSpec::collectiveSeconds(CollectiveKind kind, uint64_t fullBytes,
                                      const std::vector<int> &ranks) const {
  int64_t n = int64_t(ranks.size());
  const loomcost::LinkModel &link = linkFor(ranks);
  double ring = link.seconds(kind, fullBytes, n);
  if (kind != CollectiveKind::AllReduce || n <= 2)
    return ring;
  // A tree (NCCL's double binary tree) reduces up and broadcasts down:
  // 2 log2(n) latency steps, about the ring's bytes per rank.
  double steps = 2 * std::ceil(std::log2(double(n)));
  double tree = link.latency(kind) * 1e-6 * steps +
                double(loomcost::ringBytesSent(kind, fullBytes, n)) /
                    (link.bandwidth(kind) * 1e9);
  return std::min(ring, tree);
}

double ClusterSpec::peakFlops(StringRef precision) const {
  auto it = device.peakTflops.find(precision.str());
  if (it == device.peakTflops.end())
    it = device.peakTflops.find("f32");
  if (it == device.peakTflops.end())
    it = device.peakTflops.begin();
  return it->second * 1e12;
}

double ClusterSpec::kernelSeconds(double gemmFlops, double gemmMinDim,
                                  StringRef precision, double bytes) const {
  double compute = 0;
  if (gemmFlops > 0) {
    double efficiency =
        device.gemmEfficiency * gemmMinDim / (gemmMinDim + device.gemmHalfDim);
    compute = gemmFlops / (peakFlops(precision) * std::max(efficiency, 1e-3));
  }
  double traffic = bytes / (device.memoryGBps * 1e9 * device.memoryEfficiency);
  return std::max(compute, traffic) + device.kernelOverheadUs * 1e-6;
}

double ClusterSpec::kernelSeconds(const loomrt::InstructionWork &work,
                                  StringRef kernel) const {
  double compute = 0;
  if (work.gemmFlops > 0) {
    auto rate = device.kernelTflops.find(kernel.str());
    auto perScore = device.kernelNsPerScore.find(kernel.str());
    auto perRowElement = device.kernelNsPerRowElement.find(kernel.str());
    bool perUnit = perScore != device.kernelNsPerScore.end() ||
                   perRowElement != device.kernelNsPerRowElement.end();
    if (rate != device.kernelTflops.end())
      compute = work.gemmFlops / (rate->second * 1e12);
    else if (!perUnit)
      compute =
          kernelSeconds(work.gemmFlops, work.gemmMinDim, work.precision, 0) -
          device.kernelOverheadUs * 1e-6;
    if (perScore != device.kernelNsPerScore.end())
      compute += work.scores * perScore->second * 1e-9;
    if (perRowElement != device.kernelNsPerRowElement.end())
      compute += work.rowElements * perRowElement->second * 1e-9;
  }
  double bandwidth = device.memoryGBps * 1e9 * device.memoryEfficiency;
  if (auto it = device.kernelGBps.find(kernel.str());
      it != device.kernelGBps.end())
    bandwidth = it->second * 1e9;
  double traffic = work.bytes / bandwidth;
  double elementwise = 0;
  for (const auto &[op, elements] : work.elementOps)
    if (auto it = device.elementwiseNs.find(op);
        it != device.elementwiseNs.end())
      elementwise += elements * it->second * 1e-9;
  double latency = 0;
  if (auto it = device.kernelLatencyUs.find(kernel.str());
      it != device.kernelLatencyUs.end())
    latency = it->second * 1e-6;
  // An elementwise program whose operations are calibrated (a CPU's)
  // computes and streams one after the other: its time is both. The
  // larger of the two alone put the benchmark GPT's elementwise kernels at
  // 52 ms where they took 65, and every layout of the accuracy benchmark
  // short (-1.5 to -12.7%; with the sum -6.2 to +5.0%, planner.md).
  if (elementwise > 0)
    return std::max(compute, traffic + elementwise) + latency +
           device.kernelOverheadUs * 1e-6;
  return std::max({compute, traffic, elementwise}) + latency +
         device.kernelOverheadUs * 1e-6;
}

namespace {

/// `1.5`, `-1`, `0.001`: as the user wrote it, near enough.
std::string shortNumber(double value) {
  std::string text;
  raw_string_ostream(text) << format("%g", value);
  return text;
}

/// Reads one object's keys, remembering the first error with its path.
class Reader {
public:
  Reader(StringRef source, std::string &error) : source(source), error(error) {}

  bool failed() const { return !error.empty(); }

  void fail(const Twine &path, const Twine &message) {
    if (error.empty())
      error = (Twine(source) + ": '" + path + "' " + message).str();
  }

  /// Reports keys of `object` not in `known` (a misspelt key would
  /// otherwise be ignored).
  void checkKeys(const llvm::json::Object &object, StringRef path,
                 ArrayRef<StringRef> known) {
    for (const auto &entry : object) {
      StringRef key = entry.first;
      if (llvm::is_contained(known, key) || key == "name" ||
          key == "description" || key == "measured")
        continue;
      std::string where = path.empty() ? key.str() : (path + "." + key).str();
      fail(where, "is not a key of a cluster description (expected one of " +
                      llvm::join(known, ", ") + ")");
    }
  }

  /// A number at `key`; `required` ones must be present. `minimum` is
  /// exclusive unless `inclusive`.
  std::optional<double> number(const llvm::json::Object &object, StringRef path,
                               StringRef key, bool required, double minimum,
                               bool inclusive = false,
                               std::optional<double> maximum = {}) {
    std::string where = path.empty() ? key.str() : (path + "." + key).str();
    const llvm::json::Value *value = object.get(key);
    if (!value) {
      if (required)
        fail(where, "is missing");
      return std::nullopt;
    }
    std::optional<double> number = value->getAsNumber();
    if (!number) {
      fail(where, "must be a number");
      return std::nullopt;
    }
    bool below = inclusive ? *number < minimum : *number <= minimum;
    if (below || !std::isfinite(*number) || (maximum && *number > *maximum)) {
      std::string range = (inclusive ? ">= " : "> ") + shortNumber(minimum);
      if (maximum)
        range += " and <= " + shortNumber(*maximum);
      fail(where, "must be " + range + " (it is " + shortNumber(*number) + ")");
      return std::nullopt;
    }
    return number;
  }

  std::optional<int64_t> count(const llvm::json::Object &object,
                               StringRef key) {
    const llvm::json::Value *value = object.get(key);
    if (!value) {
      fail(key, "is missing");
      return std::nullopt;
    }
    std::optional<int64_t> number = value->getAsInteger();
    if (!number || *number < 1) {
      fail(key, "must be a whole number >= 1");
      return std::nullopt;
    }
    return number;
  }

  const llvm::json::Object *object(const llvm::json::Object &parent,
                                   StringRef key, bool required) {
    const llvm::json::Value *value = parent.get(key);
    if (!value) {
      if (required)
        fail(key, "is missing");
      return nullptr;
    }
    const llvm::json::Object *object = value->getAsObject();
    if (!object)
      fail(key, "must be an object");
    return object;
  }

  void link(const llvm::json::Object &parent, StringRef key,
            loomcost::LinkModel &link, bool required) {
    const llvm::json::Object *object = this->object(parent, key, required);
    if (!object)
      return;
    checkKeys(*object, key, {"gbytes_per_s", "latency_us", "by_kind"});
    if (auto bandwidth = number(*object, key, "gbytes_per_s", true, 0))
      link.gigabytesPerSecond = *bandwidth;
    if (auto latency = number(*object, key, "latency_us", true, 0, true))
      link.latencyMicroseconds = *latency;
    const llvm::json::Object *kinds = this->object(*object, "by_kind", false);
    if (!kinds)
      return;
    std::string path = (key + ".by_kind").str();
    for (const auto &[name, value] : *kinds) {
      std::string entry = path + "." + name.str();
      std::optional<loomcost::CollectiveKind> kind =
          loomcost::parseKind(name.str());
      if (!kind) {
        std::string known;
        for (loomcost::CollectiveKind k : loomcost::kCollectiveKinds)
          known +=
              (known.empty() ? "" : ", ") + std::string(loomcost::kindName(k));
        fail(entry, "is not a collective (" + known + ")");
        return;
      }
      const llvm::json::Object *own = value.getAsObject();
      if (!own) {
        fail(entry, "must be an object");
        return;
      }
      checkKeys(*own, entry, {"gbytes_per_s", "latency_us"});
      auto bandwidth = number(*own, entry, "gbytes_per_s", true, 0);
      auto latency = number(*own, entry, "latency_us", true, 0, true);
      if (!bandwidth || !latency)
        return;
      link.byKind[size_t(*kind)] = {*bandwidth, *latency};
    }
  }

private:
  std::string source;
  std::string &error;
};

} // namespace

std::optional<ClusterSpec> mlir::loom::parseClusterSpec(StringRef json,
                                                        StringRef source,
                                                        std::string &error) {
  error.clear();
  llvm::Expected<llvm::json::Value> value = llvm::json::parse(json);
  if (!value) {
    error = (source + ": not valid JSON: " + llvm::toString(value.takeError()))
                .str();
    return std::nullopt;
  }
  const llvm::json::Object *root = value->getAsObject();
  if (!root) {
    error = (source + ": a cluster description is a JSON object").str();
    return std::nullopt;
  }
  Reader read(source, error);
  ClusterSpec spec;
  spec.source = source.str();
  read.checkKeys(
      *root, "",
      {"nodes", "devices_per_node", "device", "intra_node", "inter_node"});
  if (auto nodes = read.count(*root, "nodes"))
    spec.nodes = *nodes;
  if (auto devices = read.count(*root, "devices_per_node"))
    spec.devicesPerNode = *devices;
  if (const llvm::json::Object *device = read.object(*root, "device", true)) {
    DeviceSpec &d = spec.device;
    read.checkKeys(
        *device, "device",
        {"memory_gib", "peak_tflops", "memory_gbytes_per_s", "gemm_efficiency",
         "gemm_half_dim", "memory_efficiency", "kernel_overhead_us",
         "kernel_tflops", "kernel_gbytes_per_s", "kernel_latency_us",
         "kernel_ns_per_score", "kernel_ns_per_row_element", "elementwise_ns"});
    // Figures by kind: any kernel or operation name, each a number.
    auto byKind = [&](StringRef key, std::map<std::string, double> &out,
                      bool zeroAllowed) {
      const llvm::json::Object *table = read.object(*device, key, false);
      if (!table)
        return;
      std::string path = ("device." + key).str();
      for (const auto &entry : *table)
        if (auto value = read.number(*table, path, entry.first.str(), true, 0,
                                     zeroAllowed))
          out[entry.first.str()] = *value;
    };
    byKind("kernel_tflops", d.kernelTflops, false);
    byKind("kernel_gbytes_per_s", d.kernelGBps, false);
    byKind("elementwise_ns", d.elementwiseNs, true);
    byKind("kernel_latency_us", d.kernelLatencyUs, true);
    byKind("kernel_ns_per_score", d.kernelNsPerScore, true);
    byKind("kernel_ns_per_row_element", d.kernelNsPerRowElement, true);
    if (auto memory = read.number(*device, "device", "memory_gib", true, 0))
      d.memoryGiB = *memory;
    if (auto bandwidth =
            read.number(*device, "device", "memory_gbytes_per_s", true, 0))
      d.memoryGBps = *bandwidth;
    if (auto e = read.number(*device, "device", "gemm_efficiency", false, 0,
                             false, 1.0))
      d.gemmEfficiency = *e;
    if (auto half =
            read.number(*device, "device", "gemm_half_dim", false, 0, true))
      d.gemmHalfDim = *half;
    if (auto e = read.number(*device, "device", "memory_efficiency", false, 0,
                             false, 1.0))
      d.memoryEfficiency = *e;
    if (auto overhead = read.number(*device, "device", "kernel_overhead_us",
                                    false, 0, true))
      d.kernelOverheadUs = *overhead;
    const llvm::json::Value *peaks = device->get("peak_tflops");
    if (!peaks) {
      read.fail("device.peak_tflops", "is missing");
    } else if (const llvm::json::Object *table = peaks->getAsObject()) {
      read.checkKeys(*table, "device.peak_tflops", {"f32", "bf16", "f16"});
      for (StringRef precision : {"f32", "bf16", "f16"})
        if (auto peak =
                read.number(*table, "device.peak_tflops", precision, false, 0))
          d.peakTflops[precision.str()] = *peak;
      if (!read.failed() && d.peakTflops.empty())
        read.fail("device.peak_tflops", "lists no precision (f32, bf16)");
    } else {
      read.fail("device.peak_tflops",
                "must be an object of TFLOP/s by precision");
    }
  }
  read.link(*root, "intra_node", spec.intraNode, true);
  // One node needs no network.
  read.link(*root, "inter_node", spec.interNode, spec.nodes > 1);
  if (!root->get("inter_node"))
    spec.interNode = spec.intraNode;
  if (read.failed())
    return std::nullopt;
  return spec;
}

std::optional<ClusterSpec> mlir::loom::loadClusterSpec(StringRef path,
                                                       std::string &error) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!file) {
    error =
        (path + ": cannot read the cluster file: " + file.getError().message())
            .str();
    return std::nullopt;
  }
  return parseClusterSpec((*file)->getBuffer(), path, error);
}
