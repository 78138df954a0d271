//===- Checkpoint.cpp - Training state on disk ----------------------------===//
//
// DIR/index (text) and DIR/rank<R>.ckpt (a text header, then the raw bytes
// of the rank's state weights); docs/design/training.md has both formats.
// Everything read is checked before anything is loaded, so that a
// checkpoint of another model, optimizer or rank count is a clear error and
// never a half-restored executor.
//
//===----------------------------------------------------------------------===//

#include "loom/Runtime/Session/Checkpoint.h"

#include "loom/Runtime/Executor.h"
#include "loom/Runtime/TensorIO.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <sys/stat.h>

using namespace loomrt;

namespace {

/// Version 1's single file, which still loads as rank 0's.
constexpr const char *kLegacyMagic = "loom-checkpoint 1";
constexpr const char *kLegacyFile = "state.ckpt";
/// Index and rank files of whole tensors only, which still load.
constexpr const char *kIndexVersion2Magic = "loom-checkpoint 2";
constexpr const char *kRankVersion1Magic = "loom-checkpoint-rank 1";

/// Reads a text a line at a time.
class Lines {
public:
  explicit Lines(std::string_view text) : text(text) {}

  /// The next line without its '\n'; false at the end (a last line without
  /// '\n' is not a line: the header always ends with one).
  bool next(std::string &line) {
    size_t end = text.find('\n', at);
    if (end == std::string_view::npos)
      return false;
    line = std::string(text.substr(at, end - at));
    at = end + 1;
    return true;
  }
  size_t offset() const { return at; }

private:
  std::string_view text;
  size_t at = 0;
};

/// Parses "[8,4]" ("[]" is a scalar).
bool parseShapeText(const std::string &text, std::vector<int64_t> &shape) {
  shape.clear();
  if (text.size() < 2 || text.front() != '[' || text.back() != ']')
    return false;
  std::string inner = text.substr(1, text.size() - 2);
  if (inner.empty())
    return true;
  std::istringstream fields(inner);
  std::string field;
  while (std::getline(fields, field, ',')) {
    if (field.empty() ||
        field.find_first_not_of("0123456789") != std::string::npos ||
        field.size() > 18)
      return false;
    shape.push_back(std::stoll(field));
  }
  return inner.back() != ',';
}

/// Parses "0,1,3": increasing ranks below `ranks`.
bool parseRankList(const std::string &text, int ranks, std::vector<int> &list) {
  list.clear();
  std::istringstream fields(text);
  std::string field;
  while (std::getline(fields, field, ',')) {
    if (field.empty() ||
        field.find_first_not_of("0123456789") != std::string::npos ||
        field.size() > 9)
      return false;
    int rank = std::stoi(field);
    if (rank >= ranks || (!list.empty() && rank <= list.back()))
      return false;
    list.push_back(rank);
  }
  return !list.empty() && text.back() != ',';
}

std::string rankListText(const std::vector<int> &ranks) {
  std::string text;
  for (size_t i = 0; i < ranks.size(); ++i)
    text += (i ? "," : "") + std::to_string(ranks[i]);
  return text;
}

/// After a weight line's shape: "slice OFFSETS of SHAPE" (where `slices`
/// allows it, for an entry of `rank` dimensions), then one more field,
/// `next`. False on a malformed slice.
bool parseSliceThen(std::istringstream &fields, bool slices, size_t rank,
                    std::vector<int64_t> &offsets,
                    std::vector<int64_t> &globalShape, std::string &next) {
  fields >> next;
  if (next != "slice")
    return true;
  std::string at, of, global;
  fields >> at >> of >> global >> next;
  return slices && fields && of == "of" && parseShapeText(at, offsets) &&
         parseShapeText(global, globalShape) && rank > 0 &&
         offsets.size() == rank && globalShape.size() == rank;
}

/// " slice [0,4] of [8,8]" for a slice, "" for a whole weight.
std::string sliceField(const std::vector<int64_t> &offsets,
                       const std::vector<int64_t> &globalShape) {
  std::string text = sliceString(offsets, globalShape);
  return text.empty() ? "" : " " + text;
}

/// A weight's name and slice offsets: what identifies it in a checkpoint.
using WeightKey = std::pair<std::string, std::vector<int64_t>>;

/// A rank file's header.
struct RankFile {
  /// Version 1's DIR/state.ckpt (no rank line).
  bool legacy = false;
  int rank = 0;
  int64_t step = 0;
  struct Entry {
    std::string dtype, shape, name;
    uint64_t bytes = 0;
    std::vector<int64_t> sliceOffsets, globalShape;
  };
  std::vector<Entry> entries;
  /// Where the raw bytes start.
  size_t dataOffset = 0;
};

/// Parses the header of a rank file (or of version 1's state.ckpt) and
/// checks that the data section holds exactly the bytes it announces.
StatusOr<RankFile> parseRankFile(std::string_view text,
                                 const std::string &path) {
  Lines lines(text);
  auto corrupt = [&](const std::string &what) {
    return Status::error(path + ": not a loom checkpoint (" + what + ")");
  };
  RankFile file;
  std::string line;
  if (!lines.next(line) || (line != kRankCheckpointMagic &&
                            line != kRankVersion1Magic && line != kLegacyMagic))
    return corrupt("bad magic");
  file.legacy = line == kLegacyMagic;
  bool slices = line == kRankCheckpointMagic;
  if (!file.legacy) {
    int rank = -1;
    if (!lines.next(line) || std::sscanf(line.c_str(), "rank %d", &rank) != 1 ||
        rank < 0)
      return corrupt("bad rank line");
    file.rank = rank;
  }
  long long step = -1, count = -1, dataBytes = -1;
  if (!lines.next(line) || std::sscanf(line.c_str(), "step %lld", &step) != 1 ||
      step < 0)
    return corrupt("bad step line");
  file.step = step;
  if (!lines.next(line) ||
      std::sscanf(line.c_str(), "weights %lld", &count) != 1 || count < 0)
    return corrupt("bad weights line");
  uint64_t total = 0;
  for (long long i = 0; i < count; ++i) {
    if (!lines.next(line))
      return corrupt("truncated header");
    std::istringstream fields(line);
    std::string keyword, bytes;
    RankFile::Entry entry;
    fields >> keyword >> entry.dtype >> entry.shape;
    std::vector<int64_t> shape;
    if (keyword != "weight" || !fields || !parseShapeText(entry.shape, shape) ||
        !parseSliceThen(fields, slices, shape.size(), entry.sliceOffsets,
                        entry.globalShape, bytes) ||
        bytes.empty() || bytes.find_first_not_of("0123456789") != bytes.npos ||
        bytes.size() > 18)
      return corrupt("bad weight line '" + line + "'");
    entry.bytes = std::stoull(bytes);
    std::getline(fields >> std::ws, entry.name);
    total += entry.bytes;
    file.entries.push_back(std::move(entry));
  }
  if (!lines.next(line) ||
      std::sscanf(line.c_str(), "data %lld", &dataBytes) != 1 ||
      dataBytes < 0 || uint64_t(dataBytes) != text.size() - lines.offset() ||
      uint64_t(dataBytes) != total)
    return corrupt("bad or truncated data section");
  file.dataOffset = lines.offset();
  return file;
}

bool exists(const std::string &path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0;
}

} // namespace

std::vector<size_t> loomrt::stateWeights(const Plan &plan) {
  std::vector<size_t> ids;
  for (size_t id = 0; id < plan.weights.size(); ++id)
    if (plan.weights[id].state)
      ids.push_back(id);
  return ids;
}

std::vector<size_t> loomrt::checkpointedWeights(const Plan &plan) {
  std::vector<size_t> ids;
  for (size_t id : stateWeights(plan))
    if (plan.weights[id].castOf < 0)
      ids.push_back(id);
  return ids;
}

std::vector<std::vector<int>> loomrt::stateWeightHolders(const Plan &plan) {
  // The executors' own rule: a rank's file holds what its executor holds.
  std::vector<std::vector<int>> holders = weightHolders(plan);
  for (size_t id = 0; id < plan.weights.size(); ++id)
    if (!plan.weights[id].state)
      holders[id].clear();
  return holders;
}

std::vector<size_t> loomrt::rankStateWeights(const Plan &plan, int rank) {
  std::vector<std::vector<int>> holders = stateWeightHolders(plan);
  std::vector<size_t> ids;
  for (size_t id = 0; id < holders.size(); ++id)
    if (std::binary_search(holders[id].begin(), holders[id].end(), rank))
      ids.push_back(id);
  return ids;
}

std::string loomrt::rankCheckpointFile(int rank) {
  return "rank" + std::to_string(rank) + ".ckpt";
}

CheckpointIndex loomrt::makeCheckpointIndex(const Plan &plan, int64_t step) {
  CheckpointIndex index;
  index.step = step;
  for (size_t rank = 0; rank < plan.ranks.size(); ++rank)
    index.rankFiles.push_back(rankCheckpointFile(int(rank)));
  std::vector<std::vector<int>> holders = stateWeightHolders(plan);
  for (size_t id : checkpointedWeights(plan)) {
    const Weight &weight = plan.weights[id];
    index.weights.push_back({weight.name, weight.dtype, weight.shape,
                             holders[id], weight.sliceOffsets,
                             weight.globalShape});
  }
  return index;
}

std::string loomrt::formatCheckpointIndex(const CheckpointIndex &index) {
  std::string text = std::string(kCheckpointIndexMagic) + "\n";
  text += "step " + std::to_string(index.step) + "\n";
  text += "ranks " + std::to_string(index.rankFiles.size()) + "\n";
  for (size_t rank = 0; rank < index.rankFiles.size(); ++rank)
    text += "rank " + std::to_string(rank) + " " + index.rankFiles[rank] + "\n";
  text += "weights " + std::to_string(index.weights.size()) + "\n";
  for (const CheckpointIndex::Entry &entry : index.weights)
    text += std::string("weight ") + dtypeName(entry.dtype) + " " +
            shapeString(entry.shape) +
            sliceField(entry.sliceOffsets, entry.globalShape) + " " +
            rankListText(entry.ranks) + " " + entry.name + "\n";
  return text;
}

StatusOr<CheckpointIndex>
loomrt::parseCheckpointIndex(std::string_view text, const std::string &source) {
  Lines lines(text);
  auto corrupt = [&](const std::string &what) {
    return Status::error(source + ": not a loom checkpoint index (" + what +
                         ")");
  };
  CheckpointIndex index;
  std::string line;
  if (!lines.next(line))
    return corrupt("empty");
  bool slices = line == kCheckpointIndexMagic;
  if (!slices && line != kIndexVersion2Magic) {
    if (line.rfind("loom-checkpoint ", 0) == 0)
      return Status::error(source + ": checkpoint format '" + line +
                           "' is not one this runtime reads ('" +
                           kCheckpointIndexMagic + "')");
    return corrupt("bad magic");
  }
  long long step = -1, ranks = -1, count = -1;
  if (!lines.next(line) || std::sscanf(line.c_str(), "step %lld", &step) != 1 ||
      step < 0)
    return corrupt("bad step line");
  index.step = step;
  if (!lines.next(line) ||
      std::sscanf(line.c_str(), "ranks %lld", &ranks) != 1 || ranks < 1 ||
      ranks > (1 << 20))
    return corrupt("bad ranks line");
  for (long long rank = 0; rank < ranks; ++rank) {
    if (!lines.next(line))
      return corrupt("truncated");
    std::istringstream fields(line);
    std::string keyword, file, rest;
    long long number = -1;
    fields >> keyword >> number >> file;
    bool plain = !file.empty() && file.find('/') == std::string::npos &&
                 file != "." && file != "..";
    if (keyword != "rank" || number != rank || !plain || (fields >> rest))
      return corrupt("expected 'rank " + std::to_string(rank) +
                     " FILE', got '" + line + "'");
    index.rankFiles.push_back(file);
  }
  if (!lines.next(line) ||
      std::sscanf(line.c_str(), "weights %lld", &count) != 1 || count < 0)
    return corrupt("bad weights line");
  std::set<WeightKey> keys;
  for (long long i = 0; i < count; ++i) {
    if (!lines.next(line))
      return corrupt("truncated");
    std::istringstream fields(line);
    std::string keyword, dtype, shape, holders;
    fields >> keyword >> dtype >> shape;
    CheckpointIndex::Entry entry;
    bool valid = keyword == "weight" && parseDType(dtype, entry.dtype) &&
                 parseShapeText(shape, entry.shape) &&
                 parseSliceThen(fields, slices, entry.shape.size(),
                                entry.sliceOffsets, entry.globalShape, holders);
    std::getline(fields >> std::ws, entry.name);
    if (!valid || !parseRankList(holders, int(ranks), entry.ranks) ||
        entry.name.empty())
      return corrupt("bad weight line '" + line + "'");
    if (!keys.insert({entry.name, entry.sliceOffsets}).second)
      return corrupt("'" + entry.name + "'" +
                     sliceField(entry.sliceOffsets, entry.globalShape) +
                     " twice");
    index.weights.push_back(std::move(entry));
  }
  if (lines.offset() != text.size())
    return corrupt("text after the last weight");
  return index;
}

StatusOr<CheckpointIndex> loomrt::readCheckpointIndex(const std::string &dir) {
  std::string path = dir + "/index";
  std::string legacy = dir + "/" + kLegacyFile;
  if (!exists(path) && exists(legacy)) {
    // Format version 1: one file, the state of a one-rank plan.
    StatusOr<std::string> bytes = readFile(legacy);
    if (!bytes)
      return bytes.status();
    StatusOr<RankFile> file = parseRankFile(*bytes, legacy);
    if (!file)
      return file.status();
    if (!file->legacy)
      return Status::error(legacy + ": not a loom checkpoint (bad magic)");
    CheckpointIndex index;
    index.step = file->step;
    index.rankFiles.push_back(kLegacyFile);
    for (const RankFile::Entry &entry : file->entries) {
      CheckpointIndex::Entry converted;
      converted.name = entry.name;
      converted.ranks = {0};
      if (!parseDType(entry.dtype, converted.dtype) ||
          !parseShapeText(entry.shape, converted.shape))
        return Status::error(legacy + ": not a loom checkpoint (bad weight '" +
                             entry.name + "')");
      index.weights.push_back(std::move(converted));
    }
    return index;
  }
  StatusOr<std::string> bytes = readFile(path);
  if (!bytes)
    return bytes.status();
  return parseCheckpointIndex(*bytes, path);
}

namespace {

/// "[4,8] at [0,0]" for a slice, "whole" for a whole tensor.
std::string partText(const std::vector<int64_t> &shape,
                     const std::vector<int64_t> &offsets) {
  return offsets.empty() ? "whole"
                         : shapeString(shape) + " at " + shapeString(offsets);
}

/// The shape of the tensor a weight or entry is (a slice of).
const std::vector<int64_t> &tensorShape(const std::vector<int64_t> &shape,
                                        const std::vector<int64_t> &global) {
  return global.empty() ? shape : global;
}

/// The elements of the box [offsets, offsets + shape) that lie inside a
/// tensor of shape `global` (a padded slice may reach past its end).
int64_t clippedVolume(const std::vector<int64_t> &offsets,
                      const std::vector<int64_t> &shape,
                      const std::vector<int64_t> &global) {
  int64_t volume = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    int64_t begin = offsets.empty() ? 0 : offsets[d];
    int64_t end = std::min(begin + shape[d], global[d]);
    volume *= std::max<int64_t>(0, end - begin);
  }
  return volume;
}

bool boxesOverlap(const std::vector<int64_t> &aOffsets,
                  const std::vector<int64_t> &aShape,
                  const std::vector<int64_t> &bOffsets,
                  const std::vector<int64_t> &bShape) {
  for (size_t d = 0; d < aShape.size(); ++d) {
    int64_t a = aOffsets.empty() ? 0 : aOffsets[d];
    int64_t b = bOffsets.empty() ? 0 : bOffsets[d];
    if (a + aShape[d] <= b || b + bShape[d] <= a)
      return false;
  }
  return true;
}

} // namespace

Status loomrt::checkCheckpointMatches(const CheckpointIndex &index,
                                      const Plan &plan,
                                      const std::string &dir) {
  // The checkpoint must hold exactly this plan's state: the same tensors
  // (names, dtypes, whole shapes), however they are cut and placed.
  std::vector<size_t> ids = checkpointedWeights(plan);
  std::map<std::string, std::vector<size_t>> byName;
  for (size_t id : ids)
    byName[plan.weights[id].name].push_back(id);
  std::string mismatch;
  for (const CheckpointIndex::Entry &entry : index.weights) {
    auto named = byName.find(entry.name);
    if (named == byName.end()) {
      mismatch = "it holds '" + entry.name + "', which this model lacks";
      break;
    }
    const Weight &weight = plan.weights[named->second.front()];
    const std::vector<int64_t> &there =
        tensorShape(entry.shape, entry.globalShape);
    const std::vector<int64_t> &here =
        tensorShape(weight.shape, weight.globalShape);
    if (entry.dtype != weight.dtype || there != here) {
      mismatch = "'" + entry.name + "' is " + dtypeName(entry.dtype) +
                 shapeString(there) + " there but " + dtypeName(weight.dtype) +
                 shapeString(here) + " here";
      break;
    }
  }
  if (mismatch.empty()) {
    std::set<std::string> names;
    for (const CheckpointIndex::Entry &entry : index.weights)
      names.insert(entry.name);
    if (names.size() != byName.size())
      mismatch = "it holds " + std::to_string(names.size()) +
                 " state tensors, this model and optimizer " +
                 std::to_string(byName.size());
  }
  if (!mismatch.empty())
    return Status::error(
        "checkpoint " + dir +
        " was written for another model or optimizer: " + mismatch);
  // Whatever layout wrote it, its parts of each tensor must cover the
  // tensor once (what a rank reads from them is then all there).
  std::map<std::string, std::vector<const CheckpointIndex::Entry *>> parts;
  for (const CheckpointIndex::Entry &entry : index.weights)
    parts[entry.name].push_back(&entry);
  for (const auto &[name, entries] : parts) {
    const std::vector<int64_t> &global =
        tensorShape(entries.front()->shape, entries.front()->globalShape);
    int64_t covered = 0, volume = 1;
    for (int64_t size : global)
      volume *= size;
    for (size_t i = 0; i < entries.size(); ++i) {
      covered +=
          clippedVolume(entries[i]->sliceOffsets, entries[i]->shape, global);
      for (size_t j = 0; j < i; ++j)
        if (boxesOverlap(entries[i]->sliceOffsets, entries[i]->shape,
                         entries[j]->sliceOffsets, entries[j]->shape))
          covered = -1;
      if (entries[i]->ranks.empty())
        covered = -1;
    }
    if (covered != volume)
      return Status::error("checkpoint " + dir + " does not hold all of '" +
                           name + "' exactly once: its parts " +
                           [&] {
                             std::string text;
                             for (const CheckpointIndex::Entry *entry : entries)
                               text +=
                                   (text.empty() ? "" : ", ") +
                                   partText(entry->shape, entry->sliceOffsets);
                             return text;
                           }() +
                           " do not tile " + shapeString(global));
  }
  return Status::ok();
}

bool loomrt::checkpointNeedsResharding(const CheckpointIndex &index,
                                       const Plan &plan) {
  if (index.rankFiles.size() != plan.ranks.size())
    return true;
  std::map<WeightKey, size_t> byKey;
  for (size_t id : checkpointedWeights(plan))
    byKey[{plan.weights[id].name, plan.weights[id].sliceOffsets}] = id;
  if (byKey.size() != index.weights.size())
    return true;
  // A copy of another block than its source's is assembled from the
  // source's parts, which only resharding reads.
  for (const Weight &weight : plan.weights)
    if (weight.castOf >= 0 && !copiesSourceBlock(plan, weight))
      return true;
  std::vector<std::vector<int>> holders = stateWeightHolders(plan);
  for (const CheckpointIndex::Entry &entry : index.weights) {
    auto it = byKey.find({entry.name, entry.sliceOffsets});
    if (it == byKey.end() || plan.weights[it->second].shape != entry.shape ||
        holders[it->second] != entry.ranks)
      return true;
  }
  return false;
}

Status loomrt::writeRankCheckpoint(const std::string &path, const Plan &plan,
                                   const Executor &executor, int rank,
                                   int64_t step) {
  std::vector<size_t> ids;
  for (size_t id : rankStateWeights(plan, rank))
    if (plan.weights[id].castOf < 0)
      ids.push_back(id);
  std::string header = std::string(kRankCheckpointMagic) + "\nrank " +
                       std::to_string(rank) + "\nstep " + std::to_string(step) +
                       "\n";
  header += "weights " + std::to_string(ids.size()) + "\n";
  uint64_t total = 0;
  for (size_t id : ids) {
    const Weight &weight = plan.weights[id];
    header += std::string("weight ") + dtypeName(weight.dtype) + " " +
              shapeString(weight.shape) +
              sliceField(weight.sliceOffsets, weight.globalShape) + " " +
              std::to_string(weight.bytes) + " " + weight.name + "\n";
    total += weight.bytes;
  }
  header += "data " + std::to_string(total) + "\n";
  FILE *file = std::fopen(path.c_str(), "wb");
  bool ok = file &&
            std::fwrite(header.data(), 1, header.size(), file) == header.size();
  // One weight at a time: the state is never all in memory twice.
  for (size_t id : ids) {
    if (!ok)
      break;
    HostTensor value = executor.weight(id);
    ok = std::fwrite(value.data.data(), 1, value.data.size(), file) ==
         value.data.size();
  }
  if (file && std::fclose(file) != 0)
    ok = false;
  if (!ok) {
    std::string reason = std::strerror(errno);
    std::remove(path.c_str());
    return Status::error("cannot write checkpoint " + path + ": " + reason);
  }
  return Status::ok();
}

namespace {

/// Rank `rank`'s file of the checkpoint in `dir`: read, parsed, and checked
/// to be that rank's at the index's step.
struct CheckedRankFile {
  std::string bytes;
  RankFile file;
};

StatusOr<CheckedRankFile> readRankFile(const std::string &dir,
                                       const CheckpointIndex &index, int rank) {
  if (rank < 0 || size_t(rank) >= index.rankFiles.size())
    return Status::error("checkpoint " + dir + " has no rank " +
                         std::to_string(rank));
  std::string path = dir + "/" + index.rankFiles[size_t(rank)];
  StatusOr<std::string> bytes = readFile(path);
  if (!bytes)
    return bytes.status();
  StatusOr<RankFile> file = parseRankFile(*bytes, path);
  if (!file)
    return file.status();
  auto inconsistent = [&](const std::string &what) {
    return Status::error("checkpoint " + dir + " is inconsistent: " + path +
                         " " + what);
  };
  if (file->rank != rank)
    return inconsistent("is rank " + std::to_string(file->rank) + "'s, not " +
                        std::to_string(rank) + "'s");
  if (file->step != index.step)
    return inconsistent("is at step " + std::to_string(file->step) +
                        ", the index at step " + std::to_string(index.step) +
                        " (was it interrupted while being written?)");
  return CheckedRankFile{std::move(*bytes), std::move(*file)};
}

/// A rank file of a checkpoint, read and checked: where each of its
/// weights' bytes start.
struct OpenedRankFile {
  std::string bytes;
  std::map<WeightKey, std::pair<size_t, uint64_t>> at;
};

/// Loads rank `rank`'s state from a checkpoint written with another layout
/// (other ranks, slices or placement): each state weight the rank holds is
/// assembled from the parts of its tensor that overlap it, read from the
/// files of the ranks that hold them. A padded slice's overhang stays zero;
/// bf16 copies follow their source. Everything is read and checked before
/// any weight is set.
Status loadResharded(const std::string &dir, const CheckpointIndex &index,
                     const Plan &plan, int rank, Executor &executor) {
  std::map<int, OpenedRankFile> opened;
  auto open = [&](int holder) -> StatusOr<OpenedRankFile *> {
    auto found = opened.find(holder);
    if (found != opened.end())
      return &found->second;
    StatusOr<CheckedRankFile> checked = readRankFile(dir, index, holder);
    if (!checked)
      return checked.status();
    const RankFile &file = checked->file;
    OpenedRankFile &result = opened[holder];
    size_t at = file.dataOffset;
    for (const RankFile::Entry &entry : file.entries) {
      result.at[{entry.name, entry.sliceOffsets}] = {at, entry.bytes};
      at += entry.bytes;
    }
    result.bytes = std::move(checked->bytes);
    return &result;
  };
  std::vector<std::pair<size_t, HostTensor>> values;
  for (size_t id : rankStateWeights(plan, rank)) {
    const Weight &weight = plan.weights[id];
    // A copy of its source's block follows its source (setWeight); a copy
    // of another block (a whole bf16 copy of a sharded master) is the
    // cast of its block of the source tensor, assembled here.
    if (weight.castOf >= 0 && copiesSourceBlock(plan, weight))
      continue;
    const Weight &from =
        weight.castOf >= 0 ? plan.weights[size_t(weight.castOf)] : weight;
    HostTensor value;
    value.dtype = from.dtype;
    value.shape = weight.shape;
    size_t size = dtypeSize(from.dtype);
    value.data.assign(weight.bytes / dtypeSize(weight.dtype) * size, 0);
    for (const CheckpointIndex::Entry &entry : index.weights) {
      if (entry.name != from.name ||
          !boxesOverlap(entry.sliceOffsets, entry.shape, weight.sliceOffsets,
                        weight.shape))
        continue;
      StatusOr<OpenedRankFile *> file = open(entry.ranks.front());
      if (!file)
        return file.status();
      auto part = (*file)->at.find({entry.name, entry.sliceOffsets});
      uint64_t bytes = 1;
      for (int64_t extent : entry.shape)
        bytes *= uint64_t(extent);
      bytes *= size;
      if (part == (*file)->at.end() || part->second.second != bytes)
        return Status::error("checkpoint " + dir + " is inconsistent: " +
                             index.rankFiles[size_t(entry.ranks.front())] +
                             " does not hold '" + entry.name + "'" +
                             sliceField(entry.sliceOffsets, entry.globalShape) +
                             " as its index says");
      copyBlockOverlap(
          reinterpret_cast<const uint8_t *>((*file)->bytes.data()) +
              part->second.first,
          entry.sliceOffsets, entry.shape, value.data.data(),
          weight.sliceOffsets, weight.shape, size);
    }
    if (&from != &weight) {
      StatusOr<HostTensor> narrow = castTensor(value, weight.dtype);
      if (!narrow)
        return narrow.status().withContext("deriving weight '" + weight.name +
                                           "'");
      value = std::move(*narrow);
    }
    values.emplace_back(id, std::move(value));
  }
  for (auto &[id, value] : values)
    if (Status status = executor.setWeight(id, value); !status)
      return status;
  return Status::ok();
}

} // namespace

Status loomrt::loadRankCheckpoint(const std::string &dir,
                                  const CheckpointIndex &index,
                                  const Plan &plan, int rank,
                                  Executor &executor) {
  if (checkpointNeedsResharding(index, plan))
    return loadResharded(dir, index, plan, rank, executor);
  StatusOr<CheckedRankFile> checked = readRankFile(dir, index, rank);
  if (!checked)
    return checked.status();
  const std::string *bytes = &checked->bytes;
  const RankFile *file = &checked->file;
  std::string path = dir + "/" + index.rankFiles[size_t(rank)];
  auto inconsistent = [&](const std::string &what) {
    return Status::error("checkpoint " + dir + " is inconsistent: " + path +
                         " " + what);
  };
  // Exactly the weights the index gives this rank, as the plan has them.
  std::map<WeightKey, size_t> byKey;
  for (size_t id : checkpointedWeights(plan))
    byKey[{plan.weights[id].name, plan.weights[id].sliceOffsets}] = id;
  std::set<WeightKey> expected;
  for (const CheckpointIndex::Entry &entry : index.weights)
    if (std::binary_search(entry.ranks.begin(), entry.ranks.end(), rank))
      expected.insert({entry.name, entry.sliceOffsets});
  std::set<WeightKey> held;
  for (const RankFile::Entry &entry : file->entries) {
    WeightKey key{entry.name, entry.sliceOffsets};
    std::string what = "'" + entry.name + "'" +
                       sliceField(entry.sliceOffsets, entry.globalShape);
    auto it = byKey.find(key);
    if (!expected.count(key) || it == byKey.end() || !held.insert(key).second)
      return inconsistent("holds " + what +
                          ", which its index does not give rank " +
                          std::to_string(rank));
    const Weight &weight = plan.weights[it->second];
    if (entry.dtype != dtypeName(weight.dtype) ||
        entry.shape != shapeString(weight.shape) ||
        entry.bytes != weight.bytes || entry.globalShape != weight.globalShape)
      return inconsistent("holds " + what + " as " + entry.dtype + entry.shape +
                          sliceField(entry.sliceOffsets, entry.globalShape) +
                          ", not " + dtypeName(weight.dtype) +
                          shapeString(weight.shape) +
                          sliceField(weight.sliceOffsets, weight.globalShape));
  }
  if (held.size() != expected.size())
    return inconsistent("holds " + std::to_string(held.size()) +
                        " state tensors, its index gives rank " +
                        std::to_string(rank) + " " +
                        std::to_string(expected.size()));
  // All checked: now load.
  size_t at = file->dataOffset;
  for (const RankFile::Entry &entry : file->entries) {
    size_t id = byKey[{entry.name, entry.sliceOffsets}];
    HostTensor value;
    value.dtype = plan.weights[id].dtype;
    value.shape = plan.weights[id].shape;
    value.data.assign(bytes->begin() + at, bytes->begin() + at + entry.bytes);
    at += entry.bytes;
    if (Status status = executor.setWeight(id, value); !status)
      return status;
  }
  return Status::ok();
}

std::string loomrt::npyFileName(const std::string &name) {
  std::string file;
  for (unsigned char c : name) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
        (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-') {
      file += char(c);
      continue;
    }
    char escaped[4];
    std::snprintf(escaped, sizeof escaped, "%%%02X", c);
    file += escaped;
  }
  return file + ".npy";
}
