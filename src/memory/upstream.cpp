#include "genesis/memory/upstream.h"

namespace genesis::memory {

const char* memory_kind_name(MemoryKind kind) noexcept {
  switch (kind) {
    case MemoryKind::kDevice: return "device";
    case MemoryKind::kPinnedHost: return "pinned_host";
    case MemoryKind::kHost: return "host";
  }
  return "unknown";
}

}  // namespace genesis::memory
