// Where in Python code an allocation was made, for leak reports.
//
// When memory debugging is on (genesis.enable_memory_debugging), bindings
// that allocate open an AllocationSite first: it names up to site_depth()
// Python frames outside the genesis package, innermost first, one per line
// ("train.py:42 in step\ntrain.py:90 in main"), and makes that text the
// thread's allocation context (memory::ScopedAllocationContext), so the
// allocator stores it with the block and large_allocations() reports it.
// C++ code names its sites itself with ScopedAllocationContext: those are the
// only C++ sites there are (an AllocationSite inside one replaces it).
// When debugging is off an AllocationSite costs one relaxed atomic load.
//
// Note [Site cache]: building "file:line in function" strings for several
// frames on every allocation would cost microseconds. A site is instead
// looked up by the (code object, instruction offset) of each of its frames:
// an offset fixes the line within a code object, so the pair names a frame
// line exactly. Both caches below hold a reference to every code object they
// key on (so an address is never reused under them) and are cleared whole when
// they grow past a bound. A repeated site costs the frame walk and two kinds
// of hash lookups, no strings. Guarded by the GIL, which an AllocationSite
// holds while it is made.
#pragma once

#include <optional>
#include <string>

#include "genesis/memory/caching_allocator.h"

namespace genesis::python {

/// Turns capturing on or off (process-wide). Thread-safe.
void set_capture_locations(bool on) noexcept;
bool capture_locations() noexcept;
/// Frames whose file starts with this prefix (the genesis package directory)
/// are skipped, so the site is the user's code, not our wrappers.
void set_package_prefix(std::string prefix);

/// Most Python frames one site names (default 4); 1 .. kMaxSiteDepth, else
/// InvalidArgumentError. Thread-safe.
inline constexpr int kMaxSiteDepth = 32;
void set_site_depth(int depth);
int site_depth() noexcept;

/// The interned site of the calling Python code (see the file comment), or
/// nullptr when there is no Python frame outside the package. Needs the GIL.
const char* python_caller_site();
/// The same as a string ("" for none). Needs the GIL.
std::string python_caller_location();

/// RAII: while alive, allocations of this thread carry the Python caller's
/// site (when capturing is on). Needs the GIL at construction.
class AllocationSite {
 public:
  AllocationSite();
  AllocationSite(const AllocationSite&) = delete;
  AllocationSite& operator=(const AllocationSite&) = delete;

 private:
  std::optional<memory::ScopedAllocationContext> scope_;
};

}  // namespace genesis::python
