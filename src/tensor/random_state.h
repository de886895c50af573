// The random generators' state (Note [Random numbers] in tensor/philox.h):
// one (seed, offset) pair per device, all reseeded by manual_seed.
#pragma once

#include <cstdint>

#include "genesis/core/device.h"

namespace genesis::detail {

/// Reserves `count` counters of `device`'s generator: returns its seed and
/// the offset of the first counter, and advances the offset. Thread-safe.
void reserve_random(Device device, std::uint64_t count, std::uint64_t& seed, std::uint64_t& offset);

}  // namespace genesis::detail
