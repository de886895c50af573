// Which stream a storage operation runs on when the caller did not say: the
// device's current stream for the calling thread (cuda/stream.h), so that
// storage copies order themselves with the user's kernels like PyTorch's do.
#include "genesis/cuda/stream.h"
#include "storage_internal.h"

namespace genesis::storage_detail {

StreamId resolve_stream(Device device, StreamId stream) {
  if (device.is_cpu()) return 0;
  if (stream != kCurrentStream) return stream;
  return cuda::current_stream(device.index()).id();
}

}  // namespace genesis::storage_detail
