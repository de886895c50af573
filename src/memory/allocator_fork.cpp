// Caching allocators across fork() (Note [Fork] in genesis/core/fork.h).
//
// Note [Allocators across fork]: in a forked child only the forking thread
// exists. A lock another thread held at that instant would stay held, and a
// thread cache whose owner was on its hot path (`active` set, Note [Thread
// cache handshake]) would make every reclaim in the child wait for ever;
// a reclaim comes before the pool grows, so the child would hang on its
// first allocation that needs new memory. So around fork:
//   prepare: every lock the slow path takes, in the order it takes them:
//     each allocator's arena-set mutex (arena creation holds it while taking
//     arena 0's pool mutex), then
//     the thread-cache registry's mutex (a thread exit holds it while
//     taking pool mutexes), then every arena's pool mutex. Nobody holds a
//     pool mutex while waiting for anything prepare takes, so prepare only
//     waits for critical sections to end.
//   child: while still holding them, marks every thread cache but the
//     forking thread's inactive: their owners are gone, so reclaims may take
//     their blocks back (they return to the child's pools instead of
//     staying cached for ever), and ends any pool mutex's bias towards a
//     thread that is gone (Note [Pool mutex]). Then releases everything.
//   parent: releases everything.
// The hot path takes no lock and is not held up. Only the process-wide
// allocators (host, pinned, one per GPU) are handled: an allocator a program
// makes itself (tests, SimulatedAllocator) should not be used by a child if
// another thread of the parent was using it at the fork.
#include "genesis/memory/detail/allocator_fork.h"

#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/detail/allocator_registry.h"

namespace genesis::memory {

void AllocatorFork::prepare(CachingAllocator* const* roots, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) roots[i]->arenas_.mutex().lock();
  detail::AllocatorRegistry::instance().lock_for_fork();
  // The sets' mutexes are held: no arena appears until finish().
  for (std::size_t i = 0; i < n; ++i) roots[i]->arenas_.for_each([](detail::Arena& a) { a.mutex_.lock(); });
}

void AllocatorFork::finish(CachingAllocator* const* roots, std::size_t n, bool in_child) {
  // The forking thread's cache stays as it is: it was not on its hot path
  // (it was in fork()), and it goes on using it.
  auto forget_other_threads = [](detail::Arena& a) {
    detail::ThreadCache* mine = nullptr;
    const detail::TlsSlot& s = detail::tls_slots[a.slot_];
    if (s.generation == a.generation_) mine = s.cache;
    for (detail::ThreadCache* tc : a.caches_) {
      if (tc != mine) tc->active.store(0, std::memory_order_relaxed);
    }
    // A bias towards a thread that is gone would make every lock in the
    // child revoke it again (a process-wide barrier each time): off for good.
    if (!a.mutex_.biased_to_caller()) a.mutex_.end_bias();
  };
  for (std::size_t i = n; i-- > 0;) {
    CachingAllocator& root = *roots[i];
    for (std::uint32_t k = root.arenas_.limit(); k-- > 0;) {
      detail::Arena* a = root.arenas_.get(k);
      if (a == nullptr) continue;
      if (in_child) forget_other_threads(*a);
      a->mutex_.unlock();
    }
  }
  detail::AllocatorRegistry::instance().unlock_after_fork();
  for (std::size_t i = n; i-- > 0;) roots[i]->arenas_.mutex().unlock();
}

}  // namespace genesis::memory
