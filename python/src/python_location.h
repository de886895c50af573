// Where in Python code an allocation was made, for leak reports (SPEC M9).
//
// When memory debugging is on (genesis.enable_memory_debugging), bindings
// that allocate open an AllocationSite first: it names the innermost Python
// frame outside the genesis package ("train.py:42 in step") and makes it the
// thread's allocation context (memory::ScopedAllocationContext), so the
// allocator stores it with the block and large_allocations() reports it.
// When debugging is off it costs one relaxed atomic load.
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

/// "file:line in function" of the innermost frame outside the package, or an
/// empty string when there is no Python frame. Needs the GIL.
std::string python_caller_location();

/// RAII: while alive, allocations of this thread carry the Python caller's
/// location (when capturing is on). Needs the GIL at construction.
class AllocationSite {
 public:
  AllocationSite();
  AllocationSite(const AllocationSite&) = delete;
  AllocationSite& operator=(const AllocationSite&) = delete;

 private:
  std::optional<memory::ScopedAllocationContext> scope_;
};

}  // namespace genesis::python
