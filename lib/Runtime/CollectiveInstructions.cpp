//===- CollectiveInstructions.cpp - A plan's communication steps ----------===//
//
// Operand sizes are checked in elements, not shapes: a collective moves
// contiguous bytes, and the compiler may hand it any view of them (an
// all_gather along dim 0 of [4,8] into [16,8], or of a flattened tensor).
//
//===----------------------------------------------------------------------===//

#include "CollectiveInstructions.h"

#include "loom/Analysis/LinkModel.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <tuple>

using namespace loomrt;

namespace {

enum class Shape : uint8_t {
  /// One input, one output, the same element count.
  Same,
  /// One input, one output of group-size times its elements.
  Gather,
  /// One input of group-size times the output's elements.
  Scatter,
  /// One input, no output.
  Send,
  /// No input, one output.
  Recv,
};

struct CollectiveInfo {
  const char *name;
  Shape shape;
  /// Takes `op=sum|max|avg`.
  bool reduces;
  /// Takes `root=` (a group rank).
  bool rooted;
};

const CollectiveInfo kCollectives[] = {
    {"all_gather", Shape::Gather, false, false},
    {"all_reduce", Shape::Same, true, false},
    {"all_to_all", Shape::Same, false, false},
    {"broadcast", Shape::Same, false, true},
    {"recv", Shape::Recv, false, false},
    {"reduce_scatter", Shape::Scatter, true, false},
    {"send", Shape::Send, false, false},
};

const CollectiveInfo *lookup(const std::string &name) {
  for (const CollectiveInfo &info : kCollectives)
    if (name == info.name)
      return &info;
  return nullptr;
}

bool isPointToPoint(const CollectiveInfo &info) {
  return info.shape == Shape::Send || info.shape == Shape::Recv;
}

/// The integer attribute `key`, or an error naming it.
Status intAttr(const Instruction &inst, const char *key, int64_t &value) {
  auto it = inst.attrs.find(key);
  if (it == inst.attrs.end())
    return Status::error(std::string("missing attribute '") + key + "'");
  if (!std::holds_alternative<int64_t>(it->second))
    return Status::error(std::string("attribute '") + key +
                         "' must be an integer");
  value = std::get<int64_t>(it->second);
  return Status::ok();
}

bool parseReduceOp(const std::string &word, ReduceOp &op) {
  for (ReduceOp candidate : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Avg})
    if (word == reduceOpName(candidate)) {
      op = candidate;
      return true;
    }
  return false;
}

ReduceOp reduceOpOf(const Instruction &inst) {
  ReduceOp op = ReduceOp::Sum;
  parseReduceOp(std::get<std::string>(inst.attrs.at("op")), op);
  return op;
}

bool isFloat(DType dtype) {
  return dtype == DType::F16 || dtype == DType::BF16 || dtype == DType::F32 ||
         dtype == DType::F64;
}

Status checkReduction(const Instruction &inst, DType dtype) {
  auto it = inst.attrs.find("op");
  if (it == inst.attrs.end() ||
      !std::holds_alternative<std::string>(it->second))
    return Status::error("missing attribute 'op' (sum, max or avg)");
  ReduceOp op;
  if (!parseReduceOp(std::get<std::string>(it->second), op))
    return Status::error("unknown reduction '" +
                         std::get<std::string>(it->second) +
                         "' (expected sum, max or avg)");
  if (dtype != DType::F32 && dtype != DType::F64 && dtype != DType::I32 &&
      dtype != DType::I64 && dtype != DType::BF16)
    return Status::error(std::string("cannot reduce ") + dtypeName(dtype) +
                         " (f32, f64, bf16, i32 and i64 reduce)");
  if (op == ReduceOp::Avg && !isFloat(dtype))
    return Status::error("avg needs a float dtype");
  return Status::ok();
}

Status checkOperands(const Instruction &inst, const CollectiveInfo &info,
                     int64_t groupSize) {
  size_t inputs = info.shape == Shape::Recv ? 0 : 1;
  size_t outputs = info.shape == Shape::Send ? 0 : 1;
  if (inst.inputs.size() != inputs || inst.outputs.size() != outputs)
    return Status::error("expected " + std::to_string(inputs) +
                         " input(s) and " + std::to_string(outputs) +
                         " output(s)");
  if (inputs == 0 || outputs == 0)
    return Status::ok();
  const TensorRef &in = inst.inputs[0], &out = inst.outputs[0];
  if (in.dtype != out.dtype)
    return Status::error(std::string("input is ") + dtypeName(in.dtype) +
                         " but output is " + dtypeName(out.dtype));
  int64_t expected = in.elements();
  std::string relation = "as many elements as its input";
  if (info.shape == Shape::Gather) {
    expected = in.elements() * groupSize;
    relation = "group size (" + std::to_string(groupSize) +
               ") times its input's elements";
  } else if (info.shape == Shape::Scatter) {
    if (in.elements() % groupSize != 0)
      return Status::error("input of " + std::to_string(in.elements()) +
                           " elements does not split over " +
                           std::to_string(groupSize) + " ranks");
    expected = in.elements() / groupSize;
    relation = "its input's elements over the group size (" +
               std::to_string(groupSize) + ")";
  } else if (std::string(info.name) == "all_to_all" &&
             in.elements() % groupSize != 0) {
    return Status::error("input of " + std::to_string(in.elements()) +
                         " elements does not split over " +
                         std::to_string(groupSize) + " ranks");
  }
  if (out.elements() != expected)
    return Status::error("output has " + std::to_string(out.elements()) +
                         " elements, expected " + relation + " (" +
                         std::to_string(expected) + ")");
  return Status::ok();
}

} // namespace

// The reductions' plan spellings (in the plan format library, which the
// compiler links without the communication engines).
const char *loomrt::reduceOpName(ReduceOp op) {
  switch (op) {
  case ReduceOp::Sum:
    return "sum";
  case ReduceOp::Max:
    return "max";
  case ReduceOp::Avg:
    return "avg";
  }
  return "?";
}

Status loomrt::checkCollective(const Plan &plan, int rank,
                               const Instruction &inst) {
  const CollectiveInfo *info = lookup(inst.kernel);
  if (!info) {
    std::string known;
    for (const std::string &name : collectiveNames())
      known += (known.empty() ? "" : ", ") + name;
    return Status::error("unknown collective '" + inst.kernel +
                         "' (known: " + known + ")");
  }
  std::set<std::string> allowed;
  int64_t groupSize = 1;
  if (isPointToPoint(*info)) {
    allowed = {"peer", "tag"};
    int64_t peer, tag;
    if (Status status = intAttr(inst, "peer", peer); !status)
      return status;
    if (Status status = intAttr(inst, "tag", tag); !status)
      return status;
    if (peer < 0 || uint64_t(peer) >= plan.ranks.size() || peer == rank)
      return Status::error("peer " + std::to_string(peer) +
                           " is not another rank of the plan's " +
                           std::to_string(plan.ranks.size()));
    if (tag < 0 || tag > INT32_MAX)
      return Status::error("tag " + std::to_string(tag) + " is out of range");
  } else {
    allowed = {"group"};
    int64_t group;
    if (Status status = intAttr(inst, "group", group); !status)
      return status;
    if (group < 0 || uint64_t(group) >= plan.groups.size())
      return Status::error("group " + std::to_string(group) +
                           " does not exist (the plan has " +
                           std::to_string(plan.groups.size()) + ")");
    const std::vector<int> &members = plan.groups[size_t(group)];
    if (!std::binary_search(members.begin(), members.end(), rank))
      return Status::error("rank " + std::to_string(rank) +
                           " is not a member of group " +
                           std::to_string(group));
    groupSize = int64_t(members.size());
    if (info->reduces) {
      allowed.insert("op");
      DType dtype = inst.inputs.empty() ? DType::F32 : inst.inputs[0].dtype;
      if (Status status = checkReduction(inst, dtype); !status)
        return status;
    }
    if (info->rooted) {
      allowed.insert("root");
      int64_t root;
      if (Status status = intAttr(inst, "root", root); !status)
        return status;
      if (root < 0 || root >= groupSize)
        return Status::error("root " + std::to_string(root) +
                             " is not a rank of the group (size " +
                             std::to_string(groupSize) + ")");
    }
  }
  for (const auto &entry : inst.attrs)
    if (!allowed.count(entry.first))
      return Status::error("unknown attribute '" + entry.first + "'");
  return checkOperands(inst, *info, groupSize);
}

int loomrt::collectiveGroup(const Instruction &inst) {
  auto it = inst.attrs.find("group");
  if (it == inst.attrs.end())
    return -1;
  return int(std::get<int64_t>(it->second));
}

std::shared_ptr<CommEvent> loomrt::startCollective(const Instruction &inst,
                                                   Communicator &comm,
                                                   const void *const *inputs,
                                                   void *const *outputs) {
  const std::string &name = inst.kernel;
  if (name == "send")
    return comm.send(inputs[0], inst.inputs[0].bytes(),
                     int(std::get<int64_t>(inst.attrs.at("peer"))),
                     int(std::get<int64_t>(inst.attrs.at("tag"))));
  if (name == "recv")
    return comm.recv(outputs[0], inst.outputs[0].bytes(),
                     int(std::get<int64_t>(inst.attrs.at("peer"))),
                     int(std::get<int64_t>(inst.attrs.at("tag"))));
  const TensorRef &in = inst.inputs[0], &out = inst.outputs[0];
  if (name == "all_reduce")
    return comm.allReduce(inputs[0], outputs[0], in.elements(), in.dtype,
                          reduceOpOf(inst));
  if (name == "all_gather")
    return comm.allGather(inputs[0], outputs[0], in.elements(), in.dtype);
  if (name == "reduce_scatter")
    return comm.reduceScatter(inputs[0], outputs[0], out.elements(), in.dtype,
                              reduceOpOf(inst));
  if (name == "all_to_all")
    return comm.allToAll(inputs[0], outputs[0], in.elements() / comm.size(),
                         in.dtype);
  // broadcast: the root's input (already copied into its output) becomes
  // everyone's output.
  return comm.broadcast(outputs[0], out.elements(), out.dtype,
                        int(std::get<int64_t>(inst.attrs.at("root"))));
}

bool loomrt::needsRootCopy(const Instruction &inst, const Communicator &comm,
                           const void *const *inputs, void *const *outputs) {
  // Only a broadcast has both operands (send and recv have one).
  return inst.kernel == "broadcast" && inputs[0] != outputs[0] &&
         comm.rank() == int(std::get<int64_t>(inst.attrs.at("root")));
}

namespace {

/// One rank's use of a group or of a (source, target, tag) channel.
struct Use {
  int rank;
  const Instruction *instruction;
  size_t index;
};

/// What must agree across the ranks: "all_reduce(8 x f32, sum)".
std::string signature(const Instruction &inst) {
  const TensorRef &ref = inst.inputs.empty() ? inst.outputs[0] : inst.inputs[0];
  std::string text = (inst.kernel == "send" || inst.kernel == "recv")
                         ? std::string("transfer")
                         : inst.kernel;
  text += "(" + std::to_string(ref.elements()) + " x " + dtypeName(ref.dtype);
  if (auto op = inst.attrs.find("op"); op != inst.attrs.end())
    text += ", " + std::get<std::string>(op->second);
  if (auto root = inst.attrs.find("root"); root != inst.attrs.end())
    text += ", root " + std::to_string(std::get<int64_t>(root->second));
  return text + ")";
}

std::string where(const Use &use) {
  std::string text = "rank " + std::to_string(use.rank) + " instruction " +
                     std::to_string(use.index);
  if (!use.instruction->loc.empty())
    text += " (" + use.instruction->loc + ")";
  return text;
}

} // namespace

Status loomrt::checkCommunication(const Plan &plan) {
  for (const RankProgram &program : plan.ranks)
    for (size_t index = 0; index < program.instructions.size(); ++index) {
      const Instruction &inst = program.instructions[index];
      if (inst.kind != Instruction::Kind::Collective)
        continue;
      if (Status status = checkCollective(plan, program.rank, inst); !status)
        return status.withContext("rank " + std::to_string(program.rank) +
                                  " instruction " + std::to_string(index));
    }
  // Per group: each member's collectives in order. Per channel (source,
  // target, tag): the source's sends and the target's receives in order.
  std::map<int64_t, std::map<int, std::vector<Use>>> groups;
  std::map<std::tuple<int, int, int64_t>, std::vector<Use>> sends, recvs;
  for (const RankProgram &program : plan.ranks)
    for (size_t index = 0; index < program.instructions.size(); ++index) {
      const Instruction &inst = program.instructions[index];
      if (inst.kind != Instruction::Kind::Collective)
        continue;
      Use use{program.rank, &inst, index};
      int group = collectiveGroup(inst);
      if (group >= 0) {
        groups[group][program.rank].push_back(use);
        continue;
      }
      int peer = int(std::get<int64_t>(inst.attrs.at("peer")));
      int64_t tag = std::get<int64_t>(inst.attrs.at("tag"));
      if (inst.kernel == "send")
        sends[{program.rank, peer, tag}].push_back(use);
      else
        recvs[{peer, program.rank, tag}].push_back(use);
    }
  for (auto &[id, byRank] : groups) {
    const std::vector<int> &members = plan.groups[size_t(id)];
    const std::vector<Use> &first = byRank[members[0]];
    for (int member : members) {
      const std::vector<Use> &uses = byRank[member];
      for (size_t k = 0; k < std::max(first.size(), uses.size()); ++k) {
        if (k >= first.size() || k >= uses.size()) {
          const Use &extra = k < uses.size() ? uses[k] : first[k];
          int idle = k < uses.size() ? members[0] : member;
          return Status::error(
              where(extra) + ": " + signature(*extra.instruction) + " is #" +
              std::to_string(k) + " on group " + std::to_string(id) +
              ", but rank " + std::to_string(idle) + " issues only " +
              std::to_string(std::min(first.size(), uses.size())) +
              " collective(s) there: it would wait forever");
        }
        std::string a = signature(*first[k].instruction),
                    b = signature(*uses[k].instruction);
        if (a != b)
          return Status::error("mismatched collectives #" + std::to_string(k) +
                               " on group " + std::to_string(id) + ": " +
                               where(first[k]) + " calls " + a + ", " +
                               where(uses[k]) + " calls " + b);
      }
    }
  }
  auto channel = [](const std::tuple<int, int, int64_t> &key) {
    return "from rank " + std::to_string(std::get<0>(key)) + " to rank " +
           std::to_string(std::get<1>(key)) + " with tag " +
           std::to_string(std::get<2>(key));
  };
  for (auto *side : {&sends, &recvs})
    for (auto &[key, uses] : *side) {
      const std::vector<Use> &other = side == &sends ? recvs[key] : sends[key];
      if (uses.size() != other.size())
        return Status::error(
            std::to_string(side == &sends ? uses.size() : other.size()) +
            " send(s) but " +
            std::to_string(side == &sends ? other.size() : uses.size()) +
            " receive(s) " + channel(key) + " (" + where(uses[0]) +
            "): a transfer would wait forever");
      for (size_t k = 0; k < uses.size(); ++k) {
        const Use &send = side == &sends ? uses[k] : other[k];
        const Use &recv = side == &sends ? other[k] : uses[k];
        std::string a = signature(*send.instruction),
                    b = signature(*recv.instruction);
        if (a != b)
          return Status::error("transfer #" + std::to_string(k) + " " +
                               channel(key) + ": " + where(send) + " sends " +
                               a.substr(8) + ", " + where(recv) + " receives " +
                               b.substr(8));
      }
    }
  return Status::ok();
}

Status loomrt::checkTransferOrder(const Plan &plan) {
  // Per (source, target): the tags in the order each side posts them.
  std::map<std::pair<int, int>, std::vector<int64_t>> sent, received;
  for (const RankProgram &program : plan.ranks)
    for (const Instruction &inst : program.instructions) {
      if (inst.kind != Instruction::Kind::Collective ||
          (inst.kernel != "send" && inst.kernel != "recv"))
        continue;
      int peer = int(std::get<int64_t>(inst.attrs.at("peer")));
      int64_t tag = std::get<int64_t>(inst.attrs.at("tag"));
      if (inst.kernel == "send")
        sent[{program.rank, peer}].push_back(tag);
      else
        received[{peer, program.rank}].push_back(tag);
    }
  auto text = [](const std::vector<int64_t> &tags) {
    std::string out;
    for (int64_t tag : tags)
      out += (out.empty() ? "" : ", ") + std::to_string(tag);
    return out;
  };
  for (auto &[channel, tags] : sent)
    if (received[channel] != tags)
      return Status::error(
          "rank " + std::to_string(channel.first) + " sends to rank " +
          std::to_string(channel.second) + " tags " + text(tags) +
          " in that order, but rank " + std::to_string(channel.second) +
          " receives tags " + text(received[channel]) +
          ": NCCL pairs the transfers between two ranks by their order (a "
          "schedule whose ranks run the microbatches in different orders "
          "cannot run on it)");
  return Status::ok();
}

std::vector<std::string> loomrt::collectiveNames() {
  std::vector<std::string> names;
  for (const CollectiveInfo &info : kCollectives)
    names.push_back(info.name);
  return names;
}

uint64_t loomrt::collectiveFullBytes(const Instruction &instruction) {
  std::optional<loomcost::CollectiveKind> kind =
      loomcost::parseKind(instruction.kernel);
  if (!kind)
    return 0;
  using loomcost::CollectiveKind;
  bool byInput =
      *kind == CollectiveKind::ReduceScatter || *kind == CollectiveKind::Send;
  const std::vector<TensorRef> &buffers =
      byInput ? instruction.inputs : instruction.outputs;
  return buffers.empty() ? 0 : buffers.front().bytes();
}

uint64_t loomrt::collectiveBytesSent(const Instruction &instruction,
                                     int64_t groupSize) {
  std::optional<loomcost::CollectiveKind> kind =
      loomcost::parseKind(instruction.kernel);
  if (!kind)
    return 0;
  using loomcost::CollectiveKind;
  if (*kind == CollectiveKind::Send || *kind == CollectiveKind::Recv)
    groupSize = 2;
  return loomcost::ringBytesSent(*kind, collectiveFullBytes(instruction),
                                 groupSize);
}
