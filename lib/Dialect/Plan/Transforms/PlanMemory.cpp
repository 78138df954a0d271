//===- PlanMemory.cpp - Liveness-based placement of arena buffers ---------===//
//
// Greedy-by-size placement (as TFLite's and XLA's heap simulators do for
// static graphs): buffers sorted largest first, each put at the lowest
// aligned offset free of every already placed buffer whose lifetime overlaps
// its own. Lifetimes are intervals of op positions in the straight-line body;
// a collective's buffers live until its result is first read, so that its
// communication can overlap the kernels in between.
//
//===----------------------------------------------------------------------===//

#include "loom/Dialect/Plan/Transforms/Passes.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/bit.h"
#include "llvm/Support/MathExtras.h"
#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace mlir {
namespace loom {
namespace plan {
#define GEN_PASS_DEF_LOOMPLANMEMORY
#include "loom/Dialect/Plan/Transforms/Passes.h.inc"

namespace {

struct Buffer {
  Operation *op;
  int64_t bytes;
  unsigned first, last;
  int64_t offset = -1;
};

/// Arena bytes of a buffer: its size rounded up to the alignment, at least
/// one alignment unit so that every buffer has its own address.
int64_t bufferBytes(MemRefType type) {
  int64_t bytes = plan::PlanDialect::getBufferBytes(type);
  return llvm::alignTo(std::max<int64_t>(bytes, 1),
                       plan::PlanDialect::kAlignment);
}

/// The [source, target] pairs of `pairs`, each turned around if `reversed`.
SmallVector<SmallVector<int64_t, 2>> pairsOf(ArrayAttr pairs,
                                             bool reversed = false) {
  SmallVector<SmallVector<int64_t, 2>> result;
  for (Attribute pair : pairs) {
    SmallVector<int64_t, 2> ranks(cast<DenseI64ArrayAttr>(pair).asArrayRef());
    if (reversed)
      std::reverse(ranks.begin(), ranks.end());
    result.push_back(ranks);
  }
  return result;
}

/// Where each buffer, or other root of views (a weight), is used, in
/// order.
struct Uses {
  llvm::DenseMap<Value, size_t> bufferOf;
  std::vector<SmallVector<unsigned, 4>> ofBuffer;
  llvm::DenseMap<Value, SmallVector<unsigned, 4>> ofOther;

  ArrayRef<unsigned> of(Value root) const {
    if (auto it = bufferOf.find(root); it != bufferOf.end())
      return ofBuffer[it->second];
    if (auto it = ofOther.find(root); it != ofOther.end())
      return it->second;
    return {};
  }
};

/// Where each send that is `released_by` a receive is known to have
/// completed: the first read of that receive's result (where the runtime
/// waits for it). The attribute is dropped: the plan has no use for it.
/// Sends whose receive is missing or never read stay until the end.
/// `sends` and `receives`: the body's, with their positions, in order.
llvm::DenseMap<Operation *, unsigned>
releasePoints(ArrayRef<std::pair<plan::KernelOp, unsigned>> sends,
              ArrayRef<std::pair<plan::KernelOp, unsigned>> receives,
              const Uses &uses) {
  // The receives by tag, in order (a step at many microbatches has
  // thousands of sends, each looking for its receive).
  llvm::DenseMap<int64_t, SmallVector<std::pair<plan::KernelOp, unsigned>>>
      receivesOf;
  for (auto [recv, at] : receives)
    if (auto tag = recv.getKernelAttrs().getAs<IntegerAttr>("tag"))
      receivesOf[tag.getInt()].push_back({recv, at});
  llvm::DenseMap<Operation *, unsigned> released;
  for (auto [send, at] : sends) {
    DictionaryAttr attrs = send.getKernelAttrs();
    auto tag = attrs.getAs<IntegerAttr>("released_by");
    auto pairs = attrs.getAs<ArrayAttr>("pairs");
    if (!tag)
      continue;
    send.setKernelAttrsAttr(DictionaryAttr::get(
        send.getContext(), llvm::to_vector(llvm::make_filter_range(
                               attrs.getValue(), [](NamedAttribute attr) {
                                 return attr.getName() != "released_by";
                               }))));
    if (!pairs)
      continue;
    auto candidates = receivesOf.find(tag.getInt());
    if (candidates == receivesOf.end())
      continue;
    auto after =
        llvm::partition_point(candidates->second, [&](const auto &recv) {
          return recv.second <= at;
        });
    SmallVector<SmallVector<int64_t, 2>> reversed =
        pairsOf(pairs, /*reversed=*/true);
    for (auto [recv, received] :
         llvm::make_range(after, candidates->second.end())) {
      auto recvPairs = recv.getKernelAttrs().getAs<ArrayAttr>("pairs");
      if (!recvPairs || pairsOf(recvPairs) != reversed)
        continue;
      // The first use of what it received after the receive itself.
      for (Value output : recv.getOutputs()) {
        ArrayRef<unsigned> used = uses.of(plan::ViewOp::getRoot(output));
        auto next = llvm::upper_bound(used, received);
        if (next != used.end())
          released[send] = *next;
      }
      break;
    }
  }
  return released;
}

/// Placed buffers ordered by (offset, end), in chunks of at most
/// `chunkSize`, one array per field: an insertion moves the rest of one chunk,
/// not of every placed buffer.
class SortedPlacements {
public:
  explicit SortedPlacements(size_t chunkSize = 512)
      : chunkSize(std::max<size_t>(2, chunkSize)) {}

  /// The lowest offset at which `bytes` fit beside every buffer here
  /// alive at some position of [first, last].
  int64_t firstFit(int64_t bytes, unsigned first, unsigned last) const {
    int64_t offset = 0;
    for (const Chunk &chunk : chunks)
      if (chunk.firstFit(bytes, int32_t(first), int32_t(last), offset))
        break;
    return offset;
  }

  void insert(int64_t offset, int64_t end, unsigned first, unsigned last) {
    auto key = std::make_pair(offset, end);
    // The first chunk whose last buffer comes after the new one (after the
    // buffers of the same (offset, end)), or the last chunk.
    auto chunk = std::upper_bound(
        chunks.begin(), chunks.end(), key,
        [](const auto &key, const Chunk &chunk) { return key < chunk.back(); });
    if (chunk == chunks.end()) {
      if (chunks.empty() || chunks.back().size() == chunkSize)
        chunks.emplace_back();
      chunk = std::prev(chunks.end());
    }
    if (chunk->size() == chunkSize) {
      Chunk upper = chunk->splitUpperHalf();
      bool above = !(key < chunk->back());
      chunk = chunks.insert(std::next(chunk), std::move(upper));
      if (!above)
        --chunk;
    }
    chunk->insert(offset, end, first, last);
  }

private:
  size_t chunkSize;

  struct Chunk {
    std::vector<int64_t> offsets, ends;
    /// (Signed: SSE2 compares signed 32-bit integers.)
    std::vector<int32_t> firsts, lasts;

    size_t size() const { return offsets.size(); }
    std::pair<int64_t, int64_t> back() const {
      return {offsets.back(), ends.back()};
    }

    /// Walks this chunk's buffers alive in [from, to] from `offset` on:
    /// true with `offset` the answer where `bytes` fit below one of them.
    bool firstFit(int64_t bytes, int32_t from, int32_t to,
                  int64_t &offset) const {
      constexpr size_t kBlock = 32;
      size_t count = offsets.size();
      // 32 lifetimes are tested at a time without a branch, into a mask;
      // only the buffers the mask holds are met. (Four in five blocks hold
      // one, but only a quarter of their buffers on average: testing each
      // buffer of such a block again, with a branch, was half the search.)
      for (size_t start = 0; start < count; start += kBlock) {
        size_t stop = std::min(count, start + kBlock);
        for (uint32_t mask = overlapMask(start, stop, from, to); mask;
             mask &= mask - 1) {
          size_t i = start + llvm::countr_zero(mask);
          if (offset + bytes <= offsets[i])
            return true;
          offset = std::max(offset, ends[i]);
        }
      }
      return false;
    }

    /// Bit i - start set where buffer i (in [start, stop), at most 32)
    /// is alive at some position of [from, to].
    uint32_t overlapMask(size_t start, size_t stop, int32_t from,
                         int32_t to) const {
      uint32_t mask = 0;
      size_t i = start;
#ifdef __SSE2__
      // Four lifetimes per comparison: first <= to and last > from - 1.
      __m128i below = _mm_set1_epi32(to), above = _mm_set1_epi32(from - 1);
      for (; i + 4 <= stop; i += 4) {
        __m128i first = _mm_loadu_si128(
            reinterpret_cast<const __m128i *>(firsts.data() + i));
        __m128i last = _mm_loadu_si128(
            reinterpret_cast<const __m128i *>(lasts.data() + i));
        __m128i overlap = _mm_andnot_si128(_mm_cmpgt_epi32(first, below),
                                           _mm_cmpgt_epi32(last, above));
        mask |= uint32_t(_mm_movemask_ps(_mm_castsi128_ps(overlap)))
                << (i - start);
      }
#endif
      for (; i < stop; ++i)
        mask |= uint32_t((firsts[i] <= to) & (lasts[i] >= from)) << (i - start);
      return mask;
    }

    void insert(int64_t offset, int64_t end, unsigned first, unsigned last) {
      auto key = std::make_pair(offset, end);
      size_t at = 0, high = offsets.size();
      while (at < high) {
        size_t middle = (at + high) / 2;
        if (key < std::make_pair(offsets[middle], ends[middle]))
          high = middle;
        else
          at = middle + 1;
      }
      offsets.insert(offsets.begin() + at, offset);
      ends.insert(ends.begin() + at, end);
      firsts.insert(firsts.begin() + at, int32_t(first));
      lasts.insert(lasts.begin() + at, int32_t(last));
    }

    Chunk splitUpperHalf() {
      Chunk upper;
      size_t half = size() / 2;
      auto move = [&](auto &from, auto &to) {
        to.assign(from.begin() + half, from.end());
        from.resize(half);
      };
      move(offsets, upper.offsets);
      move(ends, upper.ends);
      move(firsts, upper.firsts);
      move(lasts, upper.lasts);
      return upper;
    }
  };
  std::vector<Chunk> chunks;
};

/// The buffers placed so far, for the first fit: the lowest offset free
/// of every placed buffer alive at some position of a lifetime. The
/// positions are cut into windows, level by level (1024 positions a
/// window by default, then 4 times as many, up to one window over the whole
/// body),
/// and each window keeps the placed buffers alive in it sorted by (offset,
/// end). A search walks the window of the lowest level that holds its
/// whole lifetime: every placed buffer overlapping the lifetime is there,
/// in the order a walk over all of them would meet it, so the offset is
/// the same; but it meets mostly buffers alive at about the same time. (A
/// pipeline rank's step at 64 microbatches has tens of thousands of
/// buffers, most alive for one action: walking every placed buffer for
/// each was 2.9 of the 10 s of a 175B-shaped GPT's compile. Narrower
/// windows make buffers that live long go into more of them.)
class PlacedBuffers {
public:
  PlacedBuffers(unsigned positions, unsigned firstWidth, unsigned chunkSize) {
    for (uint64_t width = std::max(1u, firstWidth);; width *= kGrowth) {
      levels.push_back(
          {width, std::vector<SortedPlacements>(size_t(positions / width + 1),
                                                SortedPlacements(chunkSize))});
      if (width > positions)
        break;
    }
  }

  int64_t firstFit(int64_t bytes, unsigned first, unsigned last) const {
    for (const Level &level : levels)
      if (first / level.width == last / level.width)
        return level.windows[first / level.width].firstFit(bytes, first, last);
    llvm_unreachable("the last level has one window over every position");
  }

  void insert(int64_t offset, int64_t end, unsigned first, unsigned last) {
    for (Level &level : levels)
      for (unsigned window = first / level.width; window <= last / level.width;
           ++window)
        level.windows[window].insert(offset, end, first, last);
  }

private:
  static constexpr unsigned kGrowth = 4;
  struct Level {
    uint64_t width;
    std::vector<SortedPlacements> windows;
  };
  SmallVector<Level> levels;
};

/// For each buffer, the buffer whose bytes it takes (itself, or the first
/// of a chain of in-place writes): an `elementwise` kernel with one output
/// writes it over an input of the same type (read directly, not through a
/// view, nor read through one by the same kernel) whose last use it is,
/// where the kernel is the output's first use. `buffers` hold their
/// lifetimes.
std::vector<size_t> shareInPlace(Block &body, ArrayRef<Buffer> buffers,
                                 const Uses &uses) {
  std::vector<size_t> root(buffers.size());
  for (size_t i = 0; i < root.size(); ++i)
    root[i] = i;
  unsigned at = 0;
  for (Operation &op : body) {
    unsigned position = at++;
    auto kernel = dyn_cast<plan::KernelOp>(op);
    if (!kernel || kernel.getKernel() != "elementwise" ||
        kernel.getOutputs().size() != 1)
      continue;
    Value output = kernel.getOutputs().front();
    auto out = uses.bufferOf.find(output);
    if (out == uses.bufferOf.end() ||
        !isa<plan::AllocOp>(buffers[out->second].op) ||
        uses.ofBuffer[out->second].front() != position)
      continue;
    for (Value input : kernel.getInputs()) {
      auto in = uses.bufferOf.find(input);
      if (in == uses.bufferOf.end() || input.getType() != output.getType() ||
          !isa<plan::AllocOp>(buffers[in->second].op) ||
          buffers[in->second].last != position)
        continue;
      bool viewed = llvm::any_of(kernel.getInputs(), [&](Value other) {
        return other != input && plan::ViewOp::getRoot(other) == input;
      });
      if (viewed)
        continue;
      root[out->second] = root[in->second];
      break;
    }
  }
  return root;
}

struct PlanMemoryPass : impl::LoomPlanMemoryBase<PlanMemoryPass> {
  using LoomPlanMemoryBase::LoomPlanMemoryBase;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    if (!func.getBody().hasOneBlock()) {
      func.emitOpError("must have a single block to plan its memory");
      return signalPassFailure();
    }
    Block &body = func.getBody().front();
    // (Positions by walking, not a map by op, and uses per buffer: a
    // pipeline rank's step has a hundred thousand ops.)
    std::vector<Buffer> buffers;
    Uses uses;
    SmallVector<std::pair<plan::KernelOp, unsigned>> sends, receives;
    unsigned end = 0;
    for (Operation &op : body) {
      unsigned at = end++;
      if (isa<plan::InputOp, plan::AllocOp>(op)) {
        unsigned first = isa<plan::InputOp>(op) ? 0 : at;
        uses.bufferOf[op.getResult(0)] = buffers.size();
        buffers.push_back(
            {&op, bufferBytes(cast<MemRefType>(op.getResult(0).getType())),
             first, first});
      }
      if (auto kernel = dyn_cast<plan::KernelOp>(op)) {
        if (kernel.getKernel() == "send")
          sends.push_back({kernel, at});
        else if (kernel.getKernel() == "recv")
          receives.push_back({kernel, at});
      }
    }
    // Every use extends the lifetime of the buffer behind it; outputs are
    // read after the last kernel. A send completes only once its receiver
    // has taken the data, which may be after this rank's later instructions:
    // reusing its bytes would make the runtime wait for the send first, and
    // two ranks sending to each other before receiving would wait forever.
    // So what a send reads lives to the end of the step, or, when it is
    // `released_by` a receive from its target (which the target sends only
    // after it read this send's data), until that receive's result is
    // first read: the runtime has waited for it there.
    uses.ofBuffer.resize(buffers.size());
    unsigned at = 0;
    for (Operation &op : body) {
      for (Value operand : op.getOperands()) {
        Value root = plan::ViewOp::getRoot(operand);
        auto it = uses.bufferOf.find(root);
        SmallVector<unsigned, 4> &list = it != uses.bufferOf.end()
                                             ? uses.ofBuffer[it->second]
                                             : uses.ofOther[root];
        if (list.empty() || list.back() != at)
          list.push_back(at);
      }
      ++at;
    }
    for (auto [buffer, used] : llvm::zip(buffers, uses.ofBuffer))
      if (!used.empty())
        buffer.last = std::max(buffer.last, used.back());
    auto extend = [&](Operation &op, unsigned last) {
      for (Value operand : op.getOperands()) {
        auto it = uses.bufferOf.find(plan::ViewOp::getRoot(operand));
        if (it != uses.bufferOf.end())
          buffers[it->second].last = std::max(buffers[it->second].last, last);
      }
    };
    for (Operation &op : body)
      if (isa<plan::OutputOp>(op))
        extend(op, end);
    llvm::DenseMap<Operation *, unsigned> releasedAt =
        releasePoints(sends, receives, uses);
    for (auto [send, position] : sends) {
      auto released = releasedAt.find(send);
      extend(*send, released != releasedAt.end() ? released->second : end);
    }

    // The runtime posts a collective and waits for it only where a later
    // instruction touches its buffers. Another buffer placed on them right
    // after it would make the runtime wait at once, and nothing would
    // overlap the communication (data parallelism's gradient buckets in
    // flight during the backward pass). So a collective's buffers live
    // until its result is first read or the next collective is posted,
    // whichever comes first: engines run a communicator's collectives in
    // order, and bounding the window to one collective keeps what is in
    // flight to about one bucket (ZeRO-2's whole gradients are freed as
    // the next one is reduced, not at the optimizer). Where a buffer is
    // reused earlier than the collective completes, the runtime waits.
    static const llvm::StringSet<> collectives = {
        "all_reduce", "all_gather", "reduce_scatter",
        "all_to_all", "broadcast",  "recv"};
    SmallVector<std::pair<plan::KernelOp, unsigned>> posted;
    SmallVector<unsigned> collectivePositions;
    at = 0;
    for (Operation &op : body) {
      if (auto kernel = dyn_cast<plan::KernelOp>(op)) {
        bool collective = collectives.contains(kernel.getKernel());
        if (collective || kernel.getKernel() == "send")
          collectivePositions.push_back(at);
        if (collective)
          posted.push_back({kernel, at});
      }
      ++at;
    }
    for (auto [kernel, position] : posted) {
      unsigned firstRead = end;
      auto next = std::upper_bound(collectivePositions.begin(),
                                   collectivePositions.end(), position);
      if (next != collectivePositions.end())
        firstRead = *next;
      for (Value output : kernel.getOutputs()) {
        ArrayRef<unsigned> used = uses.of(plan::ViewOp::getRoot(output));
        auto next = llvm::upper_bound(used, position);
        if (next != used.end())
          firstRead = std::min(firstRead, *next);
      }
      extend(*kernel, firstRead);
    }

    // An elementwise kernel writes its output in place of an input of the
    // same type that dies there (the runtimes compute each block before
    // they store it: plan-format.md): the two share their bytes, and a
    // sum over microbatches takes one buffer, not two at each step.
    std::vector<size_t> sharing = shareInPlace(body, buffers, uses);
    for (size_t i = 0; i < buffers.size(); ++i)
      if (size_t root = sharing[i]; root != i) {
        buffers[root].first = std::min(buffers[root].first, buffers[i].first);
        buffers[root].last = std::max(buffers[root].last, buffers[i].last);
      }
    std::vector<Buffer *> order;
    for (size_t i = 0; i < buffers.size(); ++i)
      if (sharing[i] == i)
        order.push_back(&buffers[i]);
    std::stable_sort(order.begin(), order.end(),
                     [](Buffer *a, Buffer *b) { return a->bytes > b->bytes; });
    int64_t arena = 0, total = 0;
    // The placed buffers by (offset, end) in windows of positions, so
    // that the live-overlapping ones come in the order the search needs
    // without sorting them for every buffer, and mostly only they
    // (PlacedBuffers). Kept as arrays of values, not pointers: the search
    // reads the lifetimes of the placed buffers of a window, 32 at a time
    // without a branch, and looks closer only at those that overlap.
    PlacedBuffers placed(end + 1, windowPositions, chunkBuffers);
    for (Buffer *buffer : order) {
      int64_t offset =
          placed.firstFit(buffer->bytes, buffer->first, buffer->last);
      buffer->offset = offset;
      placed.insert(offset, offset + buffer->bytes, buffer->first,
                    buffer->last);
      arena = std::max(arena, offset + buffer->bytes);
      total += buffer->bytes;
    }

    for (size_t i = 0; i < buffers.size(); ++i) {
      total += sharing[i] != i ? buffers[i].bytes : 0;
      buffers[i].offset = buffers[sharing[i]].offset;
    }
    Builder builder(&getContext());
    for (Buffer &buffer : buffers)
      buffer.op->setAttr("offset", builder.getI64IntegerAttr(buffer.offset));
    func->setAttr(plan::PlanDialect::kArenaSizeAttrName,
                  builder.getI64IntegerAttr(arena));
    if (printSummary)
      func.emitRemark() << "arena " << arena << " bytes for " << buffers.size()
                        << " buffers of " << total << " bytes in all";
  }
};

} // namespace
} // namespace plan
} // namespace loom
} // namespace mlir
