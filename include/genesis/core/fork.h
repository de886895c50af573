// What happens to Genesis in a fork()ed child.
//
// Note [Fork]: fork() copies the address space but only the calling thread.
// Every other thread of the parent (the CPU thread pool's workers, the
// parallel memcpy pool, the memory publisher, a metrics server, a memory
// debugger's sampler) is absent from the child, and a lock one of them held
// at that instant stays held there for ever. Without handling, the child's
// first parallel operation waited for workers that do not exist, and its exit
// joined threads that do not exist (multiprocessing's fork context and
// DataLoader-style workers hit both).
//
// So each module that owns threads or locks a child may need registers fork
// handlers here, at one rank each, when the library is loaded (a
// namespace-scope initializer next to the handlers); a single pthread_atfork
// registration runs them. At load, because a set registered while a fork is
// under way misses that fork's prepare: its lock, taken meanwhile by another
// thread, would stay held in the child (a lazily registering module hung
// children that way).
//   prepare (parent, before the fork): by ascending rank, takes the locks the
//     child will need, so that none is half-held across the fork;
//   parent (parent, after): by descending rank, releases them;
//   child (child, after; the only thread): by descending rank, releases or
//     re-creates them and forgets the parent's threads. Objects that own the
//     parent's threads are leaked, never destroyed: destroying a std::thread
//     joins, and the thread will never finish in the child.
// The parent's state is untouched: its pools and servers carry on.
//
// Ranks follow the lock order: a module whose lock is held while another
// module's lock is taken (the publisher reads the allocators under its own
// mutex) has the lower rank, so prepare never waits for a lock whose holder
// waits for one prepare already took. Thread pools come last: nothing is
// called under their creation locks.
//
// Objects that users create and own (a MemoryDebugger, a MetricsServer, ...)
// remember the process that started their thread; in another process their
// stop() forgets the thread instead of joining it (join_or_forget).
#pragma once

#include <thread>

namespace genesis {

enum class ForkRank : int {
  kIdleRelease = 0,  // the idle-release watcher: releases the allocators' caches under its mutex
  kPublisher,      // memory publisher: reads the allocators under its mutex
  kMetrics,        // this process's metrics endpoint
  kAllocators,     // the process-wide caching allocators
  kMemcpyPool,     // parallel host memcpy workers
  kCpuPool,        // the CPU tensor backend's thread pool
  kCount,
};

struct ForkHandlers {
  void (*prepare)() = nullptr;
  void (*parent)() = nullptr;
  void (*child)() = nullptr;
};

/// Installs the handlers of `rank` (one set per rank; `handlers` must live
/// for the rest of the process: a static). Call it from a namespace-scope
/// initializer (see above). Handlers may run before the module made any of
/// its objects. Idempotent for the same set; lock-free.
void register_fork_handlers(ForkRank rank, const ForkHandlers* handlers) noexcept;

/// Joins `thread` when this process started it (`owner_pid`, taken with
/// getpid() when the thread started); in a forked child, where the thread is
/// the parent's and absent, detaches it instead (a join would never return).
void join_or_forget(std::thread& thread, int owner_pid);

/// True when the calling process is not `owner_pid` (a forked child of it).
bool in_forked_child(int owner_pid) noexcept;

}  // namespace genesis
