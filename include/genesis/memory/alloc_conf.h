// Allocator options written as text: GENESIS_ALLOC_CONF and every front end
// that configures the process-wide GPU allocators (the C++ API, Python's
// genesis.torch.use_genesis_allocator, the PyTorch and CuPy adaptors).
//
// Note [Allocator configuration]: the options of a CachingAllocator are fixed
// when it is made, and the process-wide GPU allocators are made lazily, by
// whichever front end allocates first. So the text is parsed in one place
// (parse_alloc_conf) into AllocatorOptions, and cuda_allocator_options() is
// what every process-wide GPU allocator is created with:
//   1. the defaults of AllocatorOptions;
//   2. GENESIS_ALLOC_CONF, read once, at the first use (a malformed value is
//      an error at that first use, naming the variable);
//   3. what configure_cuda_allocators() set on top (later calls add to it).
// Between 1 and 2 sit a front end's own defaults for the keys the user left
// alone (prefer_cuda_allocator_defaults, Note [Front-end defaults]).
// The text is "key:value,key:value" in the spirit of PYTORCH_CUDA_ALLOC_CONF:
// blanks around keys and values are ignored, as are empty items; a key given
// twice, an unknown key (the message lists the valid ones) and a malformed
// value (the message says what was expected) are errors. Booleans are
// True/False/true/false/1/0; sizes take units ("2GB", "512MiB"; a bare
// number is bytes, parse_bytes). Options of PYTORCH_CUDA_ALLOC_CONF that
// Genesis does not have are rejected by name, so that a configuration copied
// from PyTorch fails loudly instead of doing nothing.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "genesis/memory/caching_allocator.h"

namespace genesis::memory {

/// One key of the configuration text, for documentation and error messages.
struct AllocConfKey {
  const char* name;     ///< e.g. "expandable_segments"
  const char* form;     ///< what the value looks like, e.g. "True|False|auto"
  const char* meaning;  ///< the AllocatorOptions field it sets, in words
};

/// The keys, in the order the documentation lists them.
const std::vector<AllocConfKey>& alloc_conf_keys();

/// Applies `text` on top of `base`. `source` names the text in error messages
/// ("GENESIS_ALLOC_CONF", "use_genesis_allocator"). Throws InvalidArgumentError
/// for malformed text (Note [Allocator configuration]); `base` is returned
/// unchanged for empty text. `keys`, when given, receives the keys the text
/// set, in its order.
AllocatorOptions parse_alloc_conf(std::string_view text, const AllocatorOptions& base = {},
                                  std::string_view source = "allocator configuration",
                                  std::vector<std::string>* keys = nullptr);

/// The text that parse_alloc_conf() turns back into `options`: every key
/// whose value differs from AllocatorOptions{}, in key order ("" for the
/// defaults).
std::string format_alloc_conf(const AllocatorOptions& options);

/// The options process-wide GPU allocators are created with (Note [Allocator
/// configuration]). Throws InvalidArgumentError when GENESIS_ALLOC_CONF is
/// malformed.
AllocatorOptions cuda_allocator_options();

/// cuda_allocator_options() as text (format_alloc_conf: only what differs
/// from the defaults).
std::string cuda_alloc_conf();

/// Adds `text` to the configuration of the process-wide GPU allocators.
/// Allocators created later use it all. Allocators that exist already take
/// what can change while an allocator lives (memory_fraction, cache_size);
/// if the text asks any of them for a different value of an option fixed at
/// creation (expandable_segments, thread_cache, ...), nothing changes and
/// InvalidArgumentError names the option and the device. Thread-safe.
void configure_cuda_allocators(std::string_view text, std::string_view source = "allocator configuration");

/// Defaults a front end prefers to the library's for options fixed when an
/// allocator is made (Note [Front-end defaults]): each key of `text` that
/// neither GENESIS_ALLOC_CONF nor configure_cuda_allocators() has given is
/// set, while no process-wide GPU allocator exists yet. Returns false,
/// changing nothing, once one exists (its options are fixed and a default
/// never makes an error). Throws InvalidArgumentError for malformed text.
/// Thread-safe.
bool prefer_cuda_allocator_defaults(std::string_view text, std::string_view source);

/// What the PyTorch and CuPy adaptors prefer (Note [Front-end defaults]).
inline constexpr std::string_view kFrameworkAllocDefaults = "expandable_segments:True";

/// The PyTorch and CuPy adaptors' call before the allocator of CUDA device
/// `device` is first needed: kFrameworkAllocDefaults where that device maps
/// pages (CudaDeviceResource::maps_pages), nothing where it cannot, so that
/// a preference never turns into the error that asking for expandable
/// segments there would be. Returns whether they were applied.
bool prefer_framework_allocator_defaults(int device, std::string_view source);

}  // namespace genesis::memory
