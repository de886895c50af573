// The pool of one arena (genesis/memory/detail/pool.h).
#include "genesis/memory/detail/pool.h"

namespace genesis::memory::detail {

namespace {

constexpr std::size_t kBlockChunk = 1024;  // block records made at once

}  // namespace

Pool::~Pool() {
  for (auto& chunk : block_chunks_)
    for (std::size_t i = 0; i < kBlockChunk; ++i) delete chunk[i].stream_uses;
}

Block* Pool::new_block_chunk() {
  block_chunks_.push_back(std::make_unique<Block[]>(kBlockChunk));
  Block* chunk = block_chunks_.back().get();
  for (std::size_t i = 0; i < kBlockChunk; ++i) {
    chunk[i].arena = arena_;
    chunk[i].cache_next = free_blocks_;
    free_blocks_ = &chunk[i];
  }
  return new_block();
}

Block* Pool::take(Block* b, std::size_t rounded) {
  void* owner = index_erase(b);  // the remainder goes to the same stream's table
  // Out of the index means out of the pool: a block still marked kFree here
  // would be merged into a neighbour that returns to the pool before the
  // caller is done with it (expandable segments' out-of-memory recovery
  // returns blocks while the taken one waits for its pages).
  b->set_state(BlockState::kAllocated);
  const std::size_t remaining = b->size - rounded;
  // Classic large segments keep small remainders attached (they could not
  // serve a large request); in an expandable segment the remainder's pages
  // can be unmapped, so always split.
  const bool split = b->pool == kSmallPool || b->segment->expandable ? remaining >= kAlignment
                                                                              : remaining > kSmallLimit;
  if (split) index_insert(split_at(b, rounded), owner);
  return b;
}

Block* Pool::take_range(Block* b, std::uintptr_t addr, std::size_t size) {
  void* owner = index_erase(b);
  if (addr > b->addr) {
    // The part before addr stays free, in the table b left.
    Block* mid = split_at(b, addr - b->addr);
    index_insert(b, owner);
    b = mid;
  }
  b->set_state(BlockState::kAllocated);
  if (b->size > size) index_insert(split_at(b, size), owner);
  return b;
}

Block* Pool::give_back(Block* b, bool touch) {
  // Work queued before this free may still use b's memory.
  b->segment->settled = false;
  // Invariant: two free blocks are never neighbours, so at most one merge on
  // each side. A neighbour is of the same segment, hence stream: the merged
  // block goes to the table the neighbour left.
  void* owner = nullptr;
  if (Block* prev = b->prev; prev != nullptr && prev->load_state() == BlockState::kFree) {
    owner = index_erase(prev);
    prev->size += b->size;
    prev->next = b->next;
    if (b->next != nullptr) b->next->prev = prev;
    map_.erase(b->addr);
    delete_block(b);
    b = prev;
  }
  if (Block* next = b->next; next != nullptr && next->load_state() == BlockState::kFree) {
    if (void* o = index_erase(next); o != nullptr) owner = o;
    b->size += next->size;
    b->next = next->next;
    if (next->next != nullptr) next->next->prev = b;
    map_.erase(next->addr);
    delete_block(next);
  }
  index_insert(b, owner);
  if (touch) b->segment->last_used_ns = coarse_now_ns();
  return b;
}

Segment* Pool::add_segment(std::uintptr_t addr, std::size_t size, PoolId pool, StreamId stream,
                                      bool expandable) {
  auto* seg = new Segment;
  seg->addr = addr;
  seg->size = size;
  seg->pool = pool;
  seg->stream = stream;
  seg->expandable = expandable;
  seg->last_used_ns = coarse_now_ns();
  seg->next_seg = segments_;
  if (segments_ != nullptr) segments_->prev_seg = seg;
  segments_ = seg;
  // One free block covers the new segment.
  Block* b = new_block();
  b->addr = addr;
  b->size = size;
  b->segment = seg;
  b->pool = pool;
  b->stream = stream;
  seg->first = b;
  map_.insert(b->addr, b);
  index_insert(b);
  return seg;
}

void Pool::remove_segment(Segment* seg) {
  Block* b = seg->first;
  index_erase(b);
  map_.erase(b->addr);
  delete_block(b);
  if (seg->prev_seg != nullptr) seg->prev_seg->next_seg = seg->next_seg;
  else segments_ = seg->next_seg;
  if (seg->next_seg != nullptr) seg->next_seg->prev_seg = seg->prev_seg;
}

Segment* Pool::pop_segment() noexcept {
  Segment* seg = segments_;
  if (seg != nullptr) {
    segments_ = seg->next_seg;
    if (segments_ != nullptr) segments_->prev_seg = nullptr;
  }
  return seg;
}

}  // namespace genesis::memory::detail
