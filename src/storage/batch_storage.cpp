// BatchStorage: copies spread over a few streams per GPU, then one wait.
#include "genesis/storage/batch_storage.h"

#include <exception>
#include <map>
#include <thread>

#include "genesis/core/error.h"
#include "genesis/cuda/event_pool.h"
#include "genesis/cuda/runtime.h"
#include "genesis/cuda/stream.h"
#include "genesis/memory/device_allocators.h"
#include "genesis/storage/copy.h"
#include "storage_internal.h"

namespace genesis {

// The streams a batch uses, per GPU, created on first use (non-blocking: they
// must not serialise with the legacy stream). Owned cuda::Streams: when the
// batch goes away they return to the stream pool for the next batch.
struct BatchStorage::Streams {
  std::map<int, std::vector<cuda::Stream>> per_device;
  cuda::EventPool events;

  const std::vector<cuda::Stream>& get(int device, int count) {
    auto& list = per_device[device];
    if (list.empty()) {
      for (int i = 0; i < count; ++i) {
        list.push_back(cuda::Stream::create(device, /*priority=*/0, /*non_blocking=*/true));
      }
    }
    return list;
  }
};

BatchStorage::BatchStorage(std::vector<Storage> storages, int streams)
    : storages_(std::move(storages)), streams_per_device_(streams), streams_(std::make_unique<Streams>()) {
  GENESIS_CHECK(streams >= 1 && streams <= 64, "BatchStorage: streams must be in [1, 64], got ", streams);
  for (std::size_t i = 0; i < storages_.size(); ++i) {
    GENESIS_CHECK(storages_[i].defined(), "BatchStorage: storage ", i, " is null");
  }
}

BatchStorage::~BatchStorage() = default;
BatchStorage::BatchStorage(BatchStorage&&) noexcept = default;
BatchStorage& BatchStorage::operator=(BatchStorage&&) noexcept = default;

std::vector<Storage> BatchStorage::to(Device device) {
  std::vector<Storage> out;
  out.reserve(storages_.size());
  for (const Storage& s : storages_) out.push_back(Storage::empty(s.shape(), s.dtype(), device));
  batch_copy(out);
  return out;
}

void BatchStorage::batch_copy(std::vector<Storage>& targets) {
  GENESIS_CHECK(targets.size() == storages_.size(), "BatchStorage::batch_copy: ", storages_.size(),
                " sources but ", targets.size(), " targets");
  for (std::size_t i = 0; i < targets.size(); ++i) {
    GENESIS_CHECK(targets[i].defined(), "BatchStorage::batch_copy: target ", i, " is null");
    targets[i].check_writable("BatchStorage::batch_copy");
    GENESIS_CHECK(targets[i].dtype() == storages_[i].dtype() && targets[i].nbytes() == storages_[i].nbytes(),
                  "BatchStorage::batch_copy: pair ", i, ": source is ", storages_[i].nbytes(), " bytes of ",
                  dtype_name(storages_[i].dtype()), ", target ", targets[i].nbytes(), " bytes of ",
                  dtype_name(targets[i].dtype()), " (they must match)");
  }
  // Which stream each pair runs on; host-only pairs get 0 (plain memcpy).
  struct Job {
    std::size_t pair;
    Device gpu;
    StreamId stream;
    bool pageable;
  };
  std::vector<Job> jobs;
  std::map<int, int> next;  // round-robin position per GPU
  for (std::size_t i = 0; i < targets.size(); ++i) {
    const Device sd = storages_[i].device(), dd = targets[i].device();
    if (sd.is_cpu() && dd.is_cpu()) {
      jobs.push_back({i, sd, 0, true});
      continue;
    }
    const Device gpu = dd.is_cuda() ? dd : sd;
    const auto& list = streams_->get(gpu.index(), streams_per_device_);
    const StreamId s = list[static_cast<std::size_t>(next[gpu.index()]++ % streams_per_device_)].id();
    const bool pageable = (sd.is_cpu() && !storages_[i].is_pinned()) || (dd.is_cpu() && !targets[i].is_pinned());
    jobs.push_back({i, gpu, s, pageable});
  }
  // Order the batch after what each GPU's current stream has queued (it may
  // still be producing the sources or reading the targets).
  for (auto& [dev, list] : streams_->per_device) {
    if (next.count(dev) == 0) continue;
    const StreamId current = storage_detail::resolve_stream(Device(DeviceType::kCUDA, dev), kCurrentStream);
    const std::uintptr_t e = streams_->events.record(dev, current);
    try {
      for (const cuda::Stream& s : list) streams_->events.wait(e, dev, s.id());
    } catch (...) {
      streams_->events.release(e);
      throw;
    }
    streams_->events.release(e);
  }
  auto run = [&](const Job& j) {
    const Storage& src = storages_[j.pair];
    Storage& dst = targets[j.pair];
    copy_bytes(dst.data_ptr(), dst.device(), src.data_ptr(), src.device(), src.nbytes(), j.stream,
               /*non_blocking=*/true);
  };
  // Async-capable pairs are queued from this thread; pageable ones block in
  // their staging pipeline, so each stream's pageable pairs get a thread.
  std::map<StreamId, std::vector<const Job*>> blocking;
  for (const Job& j : jobs) {
    if (j.pageable) {
      blocking[j.stream].push_back(&j);
    } else {
      run(j);
    }
  }
  std::vector<std::thread> workers;
  std::vector<std::exception_ptr> errors(blocking.size());
  std::size_t w = 0;
  for (auto& [stream, list] : blocking) {
    workers.emplace_back([&, slot = w++, lst = &list] {
      try {
        for (const Job* j : *lst) run(*j);
      } catch (...) {
        errors[slot] = std::current_exception();
      }
    });
  }
  for (auto& t : workers) t.join();
  for (auto& [dev, list] : streams_->per_device) {
    for (const cuda::Stream& s : list) s.synchronize();
  }
  // The batch's streams are done, so the current streams may reuse the
  // memory right away: nothing needs to be kept alive past this point.
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace genesis
