#include "genesis/memory/detail/thread_cache.h"

#include <algorithm>
#include <bit>

namespace genesis::memory::detail {

ThreadCache::ThreadCache(std::uint32_t thread_number_in, Arena* owner_in)
    : owner(owner_in), thread_number(thread_number_in) {
  primary.stream = 0;
  streams[0] = &primary;
  set_current(&primary);
}

StreamCache* ThreadCache::cache_for(StreamId stream) {
  StreamCache* empty = nullptr;
  for (std::size_t i = 0; i < streams.size(); ++i) {
    StreamCache* sc = streams[i];
    if (sc == nullptr) {
      // A new stream cache: ~34 KiB, made only when a thread uses a stream.
      extra[i - 1] = std::make_unique<StreamCache>();  // streams[0] is never null
      sc = streams[i] = extra[i - 1].get();
      sc->stream = stream;
      return sc;
    }
    if (sc->stream == stream) return sc;
    if (empty == nullptr) {
      bool has_blocks = false;
      for (const auto& l : sc->small) has_blocks |= l.count != 0;
      for (const auto& l : sc->large) has_blocks |= l.list.count != 0;
      if (!has_blocks) empty = sc;
    }
  }
  // All slots taken: recycle one that holds no blocks (its bins are empty,
  // so re-labelling it cannot hand a block to the wrong stream).
  if (empty != nullptr) {
    empty->stream = stream;
    for (auto& l : empty->large) l.size = 0;
  }
  return empty;
}

}  // namespace genesis::memory::detail
