// Which stream a storage operation runs on when the caller did not say.
#include "storage_internal.h"

namespace genesis::storage_detail {

StreamId resolve_stream(Device device, StreamId stream) {
  if (stream != kCurrentStream || device.is_cpu()) return device.is_cpu() ? 0 : stream;
  return 0;  // the legacy default stream (until per-thread current streams land)
}

}  // namespace genesis::storage_detail
