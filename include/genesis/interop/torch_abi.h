/* The table of functions through which libgenesis_torch_allocator.so (the
 * library PyTorch loads as a pluggable CUDA allocator) reaches the Genesis
 * allocators of the Python extension genesis._C.
 *
 * Note [One allocator behind PyTorch]: Genesis's statistics, snapshots and
 * memory debugger read the process-wide allocators of the copy of Genesis
 * they are linked into. The PyTorch library must therefore allocate from
 * that same copy, not from a second one: if the library linked Genesis
 * statically too, genesis.torch.memory_stats() would describe an allocator
 * PyTorch never used. So the library is a shim without an allocator of its
 * own. genesis._C exports genesis_torch_backend() (default visibility, C
 * linkage) returning this table, and the shim finds it either because the
 * Python side handed it over (genesis_torch_attach(), what
 * genesis.torch.use_genesis_allocator() does) or, on its first call without
 * one, by loading the genesis/_C*.so that lies next to it (the layout of the
 * build tree and of an installed package). A dlopen of a file Python has
 * already imported returns the same module, so either way there is exactly
 * one copy of Genesis in the process. The table is versioned: a shim and a
 * _C of different versions refuse each other with a clear error instead of
 * calling through a table of another layout.
 *
 * Plain C: the shim and PyTorch's loader see only these declarations.
 */
#ifndef GENESIS_INTEROP_TORCH_ABI_H
#define GENESIS_INTEROP_TORCH_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GENESIS_TORCH_ABI_VERSION 2u

/* Flags of malloc/free. */
/* Out of memory: throw a C++ exception (what() starts with
 * GENESIS_TORCH_OOM_PREFIX) instead of returning NULL. For the allocator
 * PyTorch uses for every tensor: a NULL from it becomes a tensor without
 * memory, not an error (Note [Errors into PyTorch] in python/src/py_torch_backend.cpp). */
#define GENESIS_TORCH_THROW_ON_OOM 1u
/* The memory belongs to a torch.cuda.MemPool that PyTorch's own caching
 * allocator manages: free waits for the device first, as cudaFree does, which
 * is what that allocator expects of the memory it releases. */
#define GENESIS_TORCH_POOL 2u

/* The first words of the message of an out-of-memory error: the phrase
 * PyTorch's own error starts with, which code that recognises OOMs by their
 * text (batch-size finders) looks for. */
#define GENESIS_TORCH_OOM_PREFIX "CUDA out of memory. "

typedef struct GenesisTorchBackend {
  uint32_t abi_version; /* GENESIS_TORCH_ABI_VERSION */
  uint32_t size;        /* sizeof(GenesisTorchBackend) */
  /* `size` bytes on CUDA device `device` for use on `stream` (a
   * cudaStream_t); NULL for 0 bytes and, without GENESIS_TORCH_THROW_ON_OOM,
   * when out of memory. Other errors (no CUDA driver, a bad device) throw a
   * C++ exception whose what() says what is wrong. */
  void* (*malloc)(ptrdiff_t size, int device, void* stream, uint32_t flags);
  /* Frees what malloc returned. Never throws: a pointer Genesis did not hand
   * out is reported on stderr and in last_error(), and otherwise ignored. */
  void (*free)(void* ptr, ptrdiff_t size, int device, void* stream, uint32_t flags);
  /* record_stream: the block at `ptr` is in use by work on `stream`; when it
   * is freed it is reused only after that work completes. Throws for a
   * pointer that is not a live Genesis allocation. */
  void (*record_stream)(void* ptr, void* stream);
  /* Returns the cached memory of every Genesis GPU allocator. */
  void (*empty_cache)(void);
  /* Caps what device `device`'s allocator may reserve. Throws for a fraction
   * outside (0, 1]. */
  void (*set_memory_fraction)(double fraction, int device);
  /* The calling thread's last error of malloc/free/record_stream (the full
   * Genesis explanation of an OOM included), "" when its last call
   * succeeded. Valid until the thread's next call. */
  const char* (*last_error)(void);
  /* Private pools (Note [Private pools behind PyTorch] in
   * python/src/py_torch_backend.cpp). From begin_pool until the matching
   * end_pool, malloc on `device` for a stream that route(stream, ctx)
   * accepts (nonzero) is served by the private pool (pool_a, pool_b) of
   * `device`, made on first use; its memory is kept for the pool's blocks
   * until release_pool, after which it goes back to the driver once its last
   * block is freed. end_pool returns the ctx of the region it ends (NULL if
   * none was open), for its owner to dispose of. begin_pool throws on a bad
   * device. */
  void (*begin_pool)(int device, uint64_t pool_a, uint64_t pool_b, int (*route)(void* stream, void* ctx), void* ctx);
  void* (*end_pool)(int device, uint64_t pool_a, uint64_t pool_b);
  void (*release_pool)(int device, uint64_t pool_a, uint64_t pool_b);
} GenesisTorchBackend;

/* Exported by genesis._C. */
typedef const GenesisTorchBackend* (*GenesisTorchBackendFn)(void);

#ifdef __cplusplus
}
#endif

#endif /* GENESIS_INTEROP_TORCH_ABI_H */
