// CUDA sum, prod and mean (Note [CUDA reduction paths]) and the `reduce`
// entry, which hands max/min/any/all to cuda_reduce_minmax.cu.
#include <mutex>
#include <unordered_map>

#include "cuda_kernels.h"
#include "cuda_reduce.cuh"

namespace genesis::kernels::cuda_impl {

// Counters of Note [One-pass full reductions]: one per (device, stream),
// zeroed once when made; kept for the process (Genesis recycles streams, so
// their number stays small). Null when a device runs out of them: the
// caller then merges with a second kernel.
unsigned int* reduce_done_counter(int device, memory::StreamId stream) {
  constexpr int kPerDevice = 1024;
  constexpr int kMaxDevices = 64;
  struct Pool {
    unsigned int* base = nullptr;
    std::unordered_map<memory::StreamId, int> slots;
  };
  static std::mutex mu;
  static Pool pools[kMaxDevices];
  // The common case (the same stream as this thread's last reduction) skips the lock.
  thread_local int last_device = -1;
  thread_local memory::StreamId last_stream = 0;
  thread_local unsigned int* last_counter = nullptr;
  if (device == last_device && stream == last_stream && last_counter != nullptr) return last_counter;
  if (device < 0 || device >= kMaxDevices) return nullptr;
  std::lock_guard<std::mutex> lock(mu);
  Pool& p = pools[device];
  if (p.base == nullptr) {
    void* mem = nullptr;
    GENESIS_CUDA_CHECK(cudaMalloc(&mem, kPerDevice * sizeof(unsigned int)));
    GENESIS_CUDA_CHECK(cudaMemset(mem, 0, kPerDevice * sizeof(unsigned int)));
    GENESIS_CUDA_CHECK(cudaDeviceSynchronize());  // zeroed before any stream, blocking or not, uses it
    p.base = static_cast<unsigned int*>(mem);
  }
  auto it = p.slots.find(stream);
  if (it == p.slots.end()) {
    if (static_cast<int>(p.slots.size()) >= kPerDevice) return nullptr;
    it = p.slots.emplace(stream, static_cast<int>(p.slots.size())).first;
  }
  last_device = device;
  last_stream = stream;
  last_counter = p.base + it->second;
  return last_counter;
}

void reduce_sum_family(const LaunchScope& scope, int device, ReduceOp op, const StridedOperand& out,
                       const StridedOperand& in) {
  dispatch(in.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    switch (op) {
      case ReduceOp::kSum: return launch_reduce(scope, device, out, in, RSum<T>{});
      case ReduceOp::kProd: return launch_reduce(scope, device, out, in, RProd<T>{});
      case ReduceOp::kMean:
        if constexpr (!std::is_integral_v<T>) return launch_reduce(scope, device, out, in, RMean<T>{});
        return;
      default: return;
    }
  });
}

void reduce(const KernelContext& ctx, ReduceOp op, const StridedOperand& out, const StridedOperand& in) {
  if (out.numel() == 0) return;
  LaunchScope scope(ctx);
  if (op == ReduceOp::kSum || op == ReduceOp::kProd || op == ReduceOp::kMean) {
    reduce_sum_family(scope, ctx.device.index(), op, out, in);
  } else {
    reduce_minmax_family(scope, ctx.device.index(), op, out, in);
  }
}

}  // namespace genesis::kernels::cuda_impl
