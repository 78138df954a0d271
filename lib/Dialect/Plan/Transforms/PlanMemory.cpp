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
#include "llvm/Support/MathExtras.h"

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

/// Where each send that is `released_by` a receive is known to have
/// completed: the first read of that receive's result (where the runtime
/// waits for it). The attribute is dropped: the plan has no use for it.
/// Sends whose receive is missing or never read stay until the end.
llvm::DenseMap<Operation *, unsigned> releasePoints(Block &body) {
  llvm::DenseMap<Operation *, unsigned> position;
  for (auto [index, op] : llvm::enumerate(body))
    position[&op] = index;
  llvm::DenseMap<Value, SmallVector<unsigned>> usesOf;
  for (Operation &op : body)
    for (Value operand : op.getOperands())
      usesOf[plan::ViewOp::getRoot(operand)].push_back(position[&op]);
  llvm::DenseMap<Operation *, unsigned> released;
  for (Operation &op : body) {
    auto send = dyn_cast<plan::KernelOp>(op);
    if (!send || send.getKernel() != "send")
      continue;
    DictionaryAttr attrs = send.getKernelAttrs();
    auto tag = attrs.getAs<IntegerAttr>("released_by");
    auto pairs = attrs.getAs<ArrayAttr>("pairs");
    if (!tag)
      continue;
    send.setKernelAttrsAttr(DictionaryAttr::get(
        op.getContext(), llvm::to_vector(llvm::make_filter_range(
                             attrs.getValue(), [](NamedAttribute attr) {
                               return attr.getName() != "released_by";
                             }))));
    if (!pairs)
      continue;
    for (Operation &other :
         llvm::make_range(std::next(op.getIterator()), body.end())) {
      auto recv = dyn_cast<plan::KernelOp>(other);
      if (!recv || recv.getKernel() != "recv")
        continue;
      DictionaryAttr recvAttrs = recv.getKernelAttrs();
      auto recvTag = recvAttrs.getAs<IntegerAttr>("tag");
      auto recvPairs = recvAttrs.getAs<ArrayAttr>("pairs");
      if (!recvTag || !recvPairs || recvTag.getInt() != tag.getInt() ||
          pairsOf(recvPairs) != pairsOf(pairs, /*reversed=*/true))
        continue;
      // The first use of what it received after the receive itself.
      for (Value output : recv.getOutputs())
        for (unsigned use : usesOf[plan::ViewOp::getRoot(output)])
          if (use > position[&other]) {
            released[&op] = use;
            break;
          }
      break;
    }
  }
  return released;
}

/// The buffers placed so far, ordered by (offset, end), one array per
/// field.
class PlacedBuffers {
public:
  void reserve(size_t count) {
    offsets.reserve(count);
    ends.reserve(count);
    firsts.reserve(count);
    lasts.reserve(count);
  }

  /// The lowest offset at which `bytes` fit beside every placed buffer
  /// alive at some position of [first, last].
  int64_t firstFit(int64_t bytes, unsigned first, unsigned last) const {
    constexpr size_t kBlock = 32;
    int64_t offset = 0;
    size_t count = offsets.size();
    int32_t from = int32_t(first), to = int32_t(last);
    auto overlaps = [&](size_t i) {
      return (firsts[i] <= to) & (lasts[i] >= from);
    };
    for (size_t start = 0; start < count; start += kBlock) {
      size_t stop = std::min(count, start + kBlock);
      int any = 0;
      for (size_t i = start; i < stop; ++i)
        any |= overlaps(i);
      if (!any)
        continue;
      for (size_t i = start; i < stop; ++i) {
        if (!overlaps(i))
          continue;
        if (offset + bytes <= offsets[i])
          return offset;
        offset = std::max(offset, ends[i]);
      }
    }
    return offset;
  }

  void insert(int64_t offset, int64_t end, unsigned first, unsigned last) {
    // After the placed buffers of the same (offset, end).
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

private:
  std::vector<int64_t> offsets, ends;
  /// (Signed: the compiler vectorizes signed comparisons more simply.)
  std::vector<int32_t> firsts, lasts;
};

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
    llvm::DenseMap<Operation *, unsigned> position;
    for (auto [index, op] : llvm::enumerate(body))
      position[&op] = index;
    unsigned end = body.getOperations().size();

    std::vector<Buffer> buffers;
    llvm::DenseMap<Value, size_t> bufferOf;
    for (Operation &op : body) {
      if (!isa<plan::InputOp, plan::AllocOp>(op))
        continue;
      unsigned first = isa<plan::InputOp>(op) ? 0 : position[&op];
      bufferOf[op.getResult(0)] = buffers.size();
      buffers.push_back(
          {&op, bufferBytes(cast<MemRefType>(op.getResult(0).getType())), first,
           first});
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
    llvm::DenseMap<Operation *, unsigned> releasedAt = releasePoints(body);
    for (Operation &op : body) {
      auto kernel = dyn_cast<plan::KernelOp>(op);
      unsigned last = position[&op];
      if (isa<plan::OutputOp>(op))
        last = end;
      else if (kernel && kernel.getKernel() == "send")
        last = releasedAt.count(&op) ? releasedAt.lookup(&op) : end;
      for (Value operand : op.getOperands()) {
        auto it = bufferOf.find(plan::ViewOp::getRoot(operand));
        if (it == bufferOf.end())
          continue;
        Buffer &buffer = buffers[it->second];
        buffer.last = std::max(buffer.last, last);
      }
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
    // Where each buffer is used (through any view of it), in order.
    llvm::DenseMap<Value, SmallVector<unsigned>> usesOf;
    for (Operation &op : body)
      for (Value operand : op.getOperands()) {
        SmallVector<unsigned> &uses = usesOf[plan::ViewOp::getRoot(operand)];
        if (uses.empty() || uses.back() != position[&op])
          uses.push_back(position[&op]);
      }
    SmallVector<unsigned> collectivePositions;
    for (Operation &op : body)
      if (auto kernel = dyn_cast<plan::KernelOp>(op);
          kernel && (collectives.contains(kernel.getKernel()) ||
                     kernel.getKernel() == "send"))
        collectivePositions.push_back(position[&op]);
    for (Operation &op : body) {
      auto kernel = dyn_cast<plan::KernelOp>(op);
      if (!kernel || !collectives.contains(kernel.getKernel()))
        continue;
      unsigned at = position[&op], firstRead = end;
      auto next = std::upper_bound(collectivePositions.begin(),
                                   collectivePositions.end(), at);
      if (next != collectivePositions.end())
        firstRead = *next;
      for (Value output : kernel.getOutputs()) {
        const SmallVector<unsigned> &uses =
            usesOf[plan::ViewOp::getRoot(output)];
        auto next = std::upper_bound(uses.begin(), uses.end(), at);
        if (next != uses.end())
          firstRead = std::min(firstRead, *next);
      }
      for (Value operand : op.getOperands()) {
        auto it = bufferOf.find(plan::ViewOp::getRoot(operand));
        if (it != bufferOf.end())
          buffers[it->second].last =
              std::max(buffers[it->second].last, firstRead);
      }
    }

    std::vector<Buffer *> order;
    for (Buffer &buffer : buffers)
      order.push_back(&buffer);
    std::stable_sort(order.begin(), order.end(),
                     [](Buffer *a, Buffer *b) { return a->bytes > b->bytes; });
    int64_t arena = 0, total = 0;
    // The placed buffers by (offset, end), so that the live-overlapping
    // ones come in the order the search needs without sorting them for
    // every buffer (a 96-layer GPT's rank has thousands of buffers). Kept
    // as arrays of values, not pointers: the search reads every placed
    // buffer's lifetime for every buffer it places. It tests 32 lifetimes
    // at a time without a branch (the compiler vectorizes it) and looks
    // closer only where one overlaps: in a pipeline's step, where a
    // rank has tens of thousands of buffers, most placed buffers below the
    // answer live at other times (3.5 of the 11 s of a 175B-shaped GPT's
    // compile at 64 microbatches went to testing them one by one).
    PlacedBuffers placed;
    placed.reserve(order.size());
    for (Buffer *buffer : order) {
      int64_t offset =
          placed.firstFit(buffer->bytes, buffer->first, buffer->last);
      buffer->offset = offset;
      placed.insert(offset, offset + buffer->bytes, buffer->first,
                    buffer->last);
      arena = std::max(arena, offset + buffer->bytes);
      total += buffer->bytes;
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
