// CPU tests of Storage, StorageView, the copy engine's host paths,
// inspect_storage, StorageTracker and BatchStorage.
#include "genesis/storage/storage.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <numeric>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/core/half.h"
#include "genesis/cuda/runtime.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/device_allocators.h"
#include "genesis/storage/batch_storage.h"
#include "genesis/storage/copy.h"
#include "genesis/storage/inspect.h"
#include "genesis/storage/storage_view.h"

namespace genesis {
namespace {

const Device kCpu(DeviceType::kCPU);

std::int64_t host_allocated() {
  return memory::host_allocator().stats().allocated_bytes[memory::kStatAggregate].current;
}

// ------------------------------------------------------------ factories ---

TEST(Storage, EmptyComesFromTheHostPoolAndGoesBackAtLastReference) {
  const std::int64_t before = host_allocated();
  {
    Storage s = Storage::empty({3, 5}, DType::kFloat32, kCpu);
    EXPECT_TRUE(s.defined());
    EXPECT_EQ(s.nbytes(), 60u);
    EXPECT_EQ(s.numel(), 15);
    EXPECT_EQ(s.shape(), (std::vector<std::int64_t>{3, 5}));
    EXPECT_EQ(s.dtype(), DType::kFloat32);
    EXPECT_EQ(s.device(), kCpu);
    EXPECT_TRUE(s.is_pooled());
    EXPECT_FALSE(s.is_pinned());
    EXPECT_NE(s.data_ptr(), nullptr);
    EXPECT_TRUE(memory::host_allocator().owns(s.data_ptr()));
    EXPECT_GT(host_allocated(), before);
    Storage copy = s;
    EXPECT_EQ(s.use_count(), 2);
    EXPECT_EQ(copy, s);
    s = Storage();
    EXPECT_EQ(copy.use_count(), 1);
    EXPECT_GT(host_allocated(), before);  // still referenced by `copy`
  }
  EXPECT_EQ(host_allocated(), before);
}

TEST(Storage, ZeroBytesAllocateNothing) {
  Storage s = Storage::empty({0, 7}, DType::kInt64, kCpu);
  EXPECT_EQ(s.nbytes(), 0u);
  EXPECT_EQ(s.data_ptr(), nullptr);
  Storage z = Storage::zeros({}, DType::kInt8, kCpu);  // a scalar: one element
  EXPECT_EQ(z.nbytes(), 1u);
  EXPECT_EQ(*z.data<std::int8_t>(), 0);
}

TEST(Storage, ZerosAreZero) {
  Storage s = Storage::zeros({1000}, DType::kFloat64, kCpu);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(s.data<double>()[i], 0.0);
}

TEST(Storage, BadArgumentsAreClearErrors) {
  EXPECT_THROW(Storage::empty({2, -1}, DType::kFloat32, kCpu), InvalidArgumentError);
  EXPECT_THROW(Storage::empty({INT64_MAX, 4}, DType::kFloat32, kCpu), InvalidArgumentError);
  // A DType made from a number outside the enum has no element size.
  for (int bad : {10, 42, 255}) {
    EXPECT_THROW(Storage::empty({4}, static_cast<DType>(bad), kCpu), InvalidArgumentError) << bad;
  }
  EXPECT_THROW(Storage::empty({4}, DType::kFloat32, Device(DeviceType::kCUDA, 0), kCurrentStream, /*pinned=*/true),
               InvalidArgumentError);  // pinned memory is host memory
  if (cuda::device_count() == 0) {
    try {
      Storage::empty({4}, DType::kFloat32, Device(DeviceType::kCUDA, 0));
      FAIL() << "expected an error for a CUDA storage without a GPU";
    } catch (const InvalidArgumentError& e) {
      EXPECT_NE(std::string(e.what()).find("cuda"), std::string::npos) << e.what();
    }
  }
  Storage null;
  EXPECT_FALSE(null.defined());
  EXPECT_THROW(null.nbytes(), InvalidArgumentError);
  EXPECT_EQ(null.use_count(), 0);
}

TEST(Storage, FromBlobRunsTheDeleterOnceAtTheLastReference) {
  int calls = 0;
  std::vector<float> buf(8, 1.5f);
  {
    Storage s = Storage::from_blob(buf.data(), {8}, DType::kFloat32, kCpu, [&](void* p) {
      EXPECT_EQ(p, buf.data());
      ++calls;
    });
    EXPECT_FALSE(s.is_pooled());
    Storage t = s;
    s = Storage();
    EXPECT_EQ(calls, 0);
  }
  EXPECT_EQ(calls, 1);
  EXPECT_THROW(Storage::from_blob(buf.data(), {8}, DType::kFloat32, kCpu, nullptr), InvalidArgumentError);
  EXPECT_THROW(Storage::from_blob(nullptr, {8}, DType::kFloat32, kCpu, [](void*) {}), InvalidArgumentError);
}

TEST(Storage, BorrowNeverFrees) {
  std::vector<std::int32_t> buf(4, 7);
  { Storage s = Storage::borrow(buf.data(), {4}, DType::kInt32, kCpu); EXPECT_EQ(s.data<std::int32_t>()[3], 7); }
  buf[3] = 9;  // still ours
  EXPECT_EQ(buf[3], 9);
}

TEST(Storage, ManualReferenceCounting) {
  const std::int64_t before = host_allocated();
  Storage s = Storage::empty({256}, DType::kUInt8, kCpu);
  StorageImpl* raw = s.release();
  EXPECT_FALSE(s.defined());
  raw->incref();
  EXPECT_EQ(raw->use_count(), 2);
  raw->decref();
  EXPECT_GT(host_allocated(), before);
  Storage back = Storage::adopt(raw);
  EXPECT_EQ(back.use_count(), 1);
  back = Storage();
  EXPECT_EQ(host_allocated(), before);
}

TEST(Storage, WeakReferencesDoNotKeepMemory) {
  const std::int64_t before = host_allocated();
  Storage s = Storage::empty({1024}, DType::kFloat32, kCpu);
  WeakStorage w(s);
  EXPECT_FALSE(w.expired());
  {
    Storage again = w.lock();
    EXPECT_EQ(again, s);
    EXPECT_EQ(s.use_count(), 2);
  }
  s = Storage();
  EXPECT_TRUE(w.expired());
  EXPECT_FALSE(w.lock().defined());
  EXPECT_EQ(host_allocated(), before);
}

TEST(Storage, ConcurrentCopiesAndDropsFromThreads) {
  // Reference counts under contention: 8 threads copy and drop handles; the
  // memory goes back exactly once, when the last one is gone.
  const std::int64_t before = host_allocated();
  {
    Storage s = Storage::empty({4096}, DType::kFloat32, kCpu);
    WeakStorage w(s);
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([s, w] {
        for (int i = 0; i < 20000; ++i) {
          Storage a = s;
          Storage b = w.lock();
          EXPECT_TRUE(b.defined());
        }
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(s.use_count(), 1);
  }
  EXPECT_EQ(host_allocated(), before);
}

TEST(Storage, AlignedStorage) {
  for (std::size_t a : {1u, 64u, 512u, 4096u, 65536u}) {
    Storage s = aligned_storage({33}, DType::kFloat64, kCpu, a);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(s.data_ptr()) % a, 0u) << a;
    EXPECT_EQ(s.nbytes(), 33u * 8u);
    std::memset(s.data_ptr(), 0xAB, s.nbytes());  // the whole range is ours (ASan checks)
  }
  EXPECT_THROW(aligned_storage({4}, DType::kFloat32, kCpu, 48), InvalidArgumentError);
  EXPECT_THROW(aligned_storage({4}, DType::kFloat32, kCpu, 0), InvalidArgumentError);
}

// -------------------------------------------------- create / copy / to ---

TEST(Storage, CreateStorageCopiesAndConverts) {
  std::vector<float> data{0.5f, -2.0f, 3.25f, 1e-8f, 65520.0f};
  Storage s = create_storage(data, kCpu);
  EXPECT_EQ(s.dtype(), DType::kFloat32);
  EXPECT_EQ(s.shape(), (std::vector<std::int64_t>{5}));
  data[0] = 99.0f;  // the storage has its own copy
  EXPECT_EQ(s.data<float>()[0], 0.5f);

  Storage h = create_storage(std::vector<float>{0.5f, -2.0f, 3.25f, 1e-8f, 65520.0f}, kCpu, DType::kFloat16);
  EXPECT_EQ(h.dtype(), DType::kFloat16);
  EXPECT_EQ(h.nbytes(), 10u);
  const Half* hp = h.data<Half>();
  EXPECT_EQ(static_cast<float>(hp[0]), 0.5f);
  EXPECT_EQ(static_cast<float>(hp[1]), -2.0f);
  EXPECT_EQ(static_cast<float>(hp[2]), 3.25f);
  EXPECT_EQ(static_cast<float>(hp[3]), 0.0f);              // underflow to zero
  EXPECT_TRUE(std::isinf(static_cast<float>(hp[4])));      // rounds up past the largest half

  Storage i = create_storage(std::vector<std::int64_t>{1, -1, 300}, kCpu, DType::kUInt8);
  EXPECT_EQ(i.data<std::uint8_t>()[1], 255);
  EXPECT_EQ(i.data<std::uint8_t>()[2], 44);
}

TEST(Storage, ToCloneAndCopy) {
  Storage a = create_storage(std::vector<std::int32_t>{1, 2, 3, 4}, kCpu);
  Storage same = a.to(kCpu);
  EXPECT_EQ(same, a);  // already there: another reference, no copy
  Storage c = a.clone();
  EXPECT_NE(c.data_ptr(), a.data_ptr());
  c.data<std::int32_t>()[0] = 10;
  EXPECT_EQ(a.data<std::int32_t>()[0], 1);

  Storage d = Storage::empty({4}, DType::kFloat64, kCpu);
  d.copy_(a);  // converts int32 -> float64
  EXPECT_EQ(d.data<double>()[3], 4.0);
  copy_storage(c, a);
  EXPECT_EQ(a.data<std::int32_t>()[0], 10);

  Storage wrong = Storage::empty({5}, DType::kInt32, kCpu);
  EXPECT_THROW(wrong.copy_(a), InvalidArgumentError);
  Storage wrong_bytes = Storage::empty({3}, DType::kInt64, kCpu);
  EXPECT_THROW(copy_storage_bytes(a, wrong_bytes), InvalidArgumentError);  // 24 bytes vs 16
}

TEST(Storage, ConvertDtype) {
  Storage a = create_storage(std::vector<double>{1.5, -0.0, 1e300}, kCpu);
  Storage b = convert_dtype(a, DType::kFloat32);
  EXPECT_EQ(b.dtype(), DType::kFloat32);
  EXPECT_EQ(b.data<float>()[0], 1.5f);
  EXPECT_TRUE(std::signbit(b.data<float>()[1]));
  EXPECT_TRUE(std::isinf(b.data<float>()[2]));
  Storage c = convert_dtype(a, DType::kBool);
  EXPECT_EQ(c.data<std::uint8_t>()[0], 1);
  EXPECT_EQ(c.data<std::uint8_t>()[1], 0);
}

TEST(Storage, CopyBytesErrors) {
  std::vector<char> buf(64);
  EXPECT_THROW(copy_bytes(buf.data() + 8, kCpu, buf.data(), kCpu, 16), InvalidArgumentError);  // overlap
  EXPECT_THROW(copy_bytes(nullptr, kCpu, buf.data(), kCpu, 16), InvalidArgumentError);
  copy_bytes(nullptr, kCpu, nullptr, kCpu, 0);  // nothing to do
  EXPECT_THROW(parallel_memcpy(buf.data() + 1, buf.data(), 8), InvalidArgumentError);
}

TEST(Storage, ParallelMemcpyThreadsCopyEveryByte) {
  // Large enough for the thread pool, odd-sized so the last part is ragged;
  // several callers at once share the pool (name matches the TSan filter).
  const std::size_t n = (std::size_t{24} << 20) + 4099;
  std::vector<unsigned char> src(n);
  std::mt19937 rng(7);
  for (auto& b : src) b = static_cast<unsigned char>(rng());
  std::vector<std::thread> callers;
  std::atomic<int> bad{0};
  for (int t = 0; t < 3; ++t) {
    callers.emplace_back([&] {
      std::vector<unsigned char> dst(n, 0);
      parallel_memcpy(dst.data(), src.data(), n);
      if (dst != src) bad.fetch_add(1);
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(bad.load(), 0);
}

// -------------------------------------------------------------- views ---

TEST(StorageView, DataPointerContiguityAndBounds) {
  Storage base = Storage::empty({4, 6}, DType::kFloat32, kCpu);
  std::iota(base.data<float>(), base.data<float>() + 24, 0.0f);
  StorageView whole(base);
  EXPECT_TRUE(whole.is_contiguous());
  EXPECT_EQ(whole.numel(), 24);

  StorageView row(base, 6, {6}, {1});  // row 1
  EXPECT_EQ(static_cast<float*>(row.data_ptr())[0], 6.0f);
  EXPECT_TRUE(row.is_contiguous());

  StorageView col(base, 2, {4}, {6});  // column 2
  EXPECT_FALSE(col.is_contiguous());
  EXPECT_EQ(static_cast<float*>(col.data_ptr())[6 * 3], 20.0f);

  StorageView t(base, 0, {6, 4}, {1, 6});  // transpose
  EXPECT_FALSE(t.is_contiguous());
  StorageView unit(base, 0, {1, 6}, {100, 1});  // a size-1 dim's stride does not matter
  EXPECT_TRUE(unit.is_contiguous());
  StorageView rev(base, 23, {24}, {-1});  // negative stride, in bounds
  EXPECT_FALSE(rev.is_contiguous());
  StorageView empty(base, 24, {0}, {1});
  EXPECT_TRUE(empty.is_contiguous());

  EXPECT_THROW(StorageView(base, 19, {6}, {1}), InvalidArgumentError);   // runs past the end
  EXPECT_THROW(StorageView(base, 2, {4}, {-1}), InvalidArgumentError);   // runs before the start
  EXPECT_THROW(StorageView(base, -1, {1}, {1}), InvalidArgumentError);
  EXPECT_THROW(StorageView(base, 0, {2, 2}, {1}), InvalidArgumentError);
  EXPECT_THROW(StorageView(base, 0, {-2}, {1}), InvalidArgumentError);
  EXPECT_THROW(StorageView(base, 0, {2}, {INT64_MAX}), InvalidArgumentError);
  EXPECT_THROW(StorageView(Storage(), 0, {1}, {1}), InvalidArgumentError);
}

TEST(StorageView, KeepsItsBaseAlive) {
  const std::int64_t before = host_allocated();
  std::optional<StorageView> v;
  {
    Storage base = create_storage(std::vector<std::int16_t>{5, 6, 7, 8}, kCpu);
    v.emplace(base, 1, std::vector<std::int64_t>{2}, std::vector<std::int64_t>{2});
  }
  EXPECT_GT(host_allocated(), before);
  EXPECT_EQ(static_cast<std::int16_t*>(v->data_ptr())[0], 6);
  EXPECT_EQ(static_cast<std::int16_t*>(v->data_ptr())[2], 8);
  v.reset();
  EXPECT_EQ(host_allocated(), before);
}

// ------------------------------------------------- inspect and tracker ---

TEST(InspectStorage, ReportsShapeDeviceAndPool) {
  Storage s = Storage::empty({2, 3}, DType::kInt64, kCpu);
  const StorageInfo info = inspect_storage(s);
  EXPECT_EQ(info.shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(info.stride, (std::vector<std::int64_t>{3, 1}));
  EXPECT_EQ(info.nbytes, 48u);
  EXPECT_TRUE(info.contiguous);
  EXPECT_TRUE(info.pooled);
  EXPECT_EQ(info.data_ptr, reinterpret_cast<std::uintptr_t>(s.data_ptr()));
  EXPECT_EQ(info.pool, memory::host_allocator().upstream().name());
  EXPECT_EQ(info.block_size, memory::host_allocator().allocation_size(s.data_ptr()));
  EXPECT_GE(info.pool_allocated, info.block_size);
  const std::string text = info.to_string();
  EXPECT_NE(text.find("int64"), std::string::npos) << text;
  EXPECT_NE(text.find("pool:"), std::string::npos) << text;

  StorageView t(s, 0, {3, 2}, {1, 3});
  const StorageInfo vi = inspect_storage(t);
  EXPECT_FALSE(vi.contiguous);
  EXPECT_EQ(vi.stride, (std::vector<std::int64_t>{1, 3}));

  std::vector<float> ext(3);
  const StorageInfo ei = inspect_storage(Storage::borrow(ext.data(), {3}, DType::kFloat32, kCpu));
  EXPECT_FALSE(ei.pooled);
  EXPECT_NE(ei.to_string().find("external"), std::string::npos);
  EXPECT_THROW(inspect_storage(Storage()), InvalidArgumentError);
}

TEST(StorageTracker, CountsLiveStoragesFromTheAllocator) {
  StorageTracker tracker;
  Storage a, b;
  {
    memory::ScopedAllocationContext where("model.py:12");
    a = Storage::empty({1000}, DType::kFloat32, kCpu);
  }
  b = Storage::empty({10}, DType::kFloat32, kCpu);
  tracker.register_storage(a, "weights");
  tracker.register_storage(b, "bias");
  EXPECT_THROW(tracker.register_storage(a), InvalidArgumentError);
  EXPECT_EQ(tracker.count(), 2u);
  EXPECT_EQ(tracker.total_allocated(),
            memory::host_allocator().allocation_size(a.data_ptr()) +
                memory::host_allocator().allocation_size(b.data_ptr()));

  auto leaks = tracker.check_leaks();
  ASSERT_EQ(leaks.size(), 2u);
  EXPECT_EQ(leaks[0].label, "weights");  // largest first
  EXPECT_EQ(leaks[0].nbytes, 4000u);
  EXPECT_EQ(leaks[0].location, "model.py:12");
  EXPECT_GE(leaks[0].block_size, 4000u);

  b = Storage();  // released: no longer a leak, no longer counted
  EXPECT_EQ(tracker.count(), 1u);
  leaks = tracker.check_leaks();
  ASSERT_EQ(leaks.size(), 1u);
  EXPECT_EQ(leaks[0].label, "weights");
  EXPECT_TRUE(tracker.unregister_storage(a));
  EXPECT_FALSE(tracker.unregister_storage(a));
  EXPECT_EQ(tracker.total_allocated(), 0u);
  EXPECT_TRUE(tracker.check_leaks().empty());
}

// ------------------------------------------------------------- batches ---

TEST(BatchStorage, CopiesEveryPairOnTheHost) {
  std::vector<Storage> src;
  for (int i = 0; i < 5; ++i) {
    std::vector<std::int32_t> v(1000 + i);
    std::iota(v.begin(), v.end(), i * 10000);
    src.push_back(create_storage(v, kCpu));
  }
  BatchStorage batch(src, 2);
  std::vector<Storage> out = batch.to(kCpu);
  ASSERT_EQ(out.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    ASSERT_NE(out[i].data_ptr(), src[i].data_ptr());
    ASSERT_EQ(std::memcmp(out[i].data_ptr(), src[i].data_ptr(), src[i].nbytes()), 0) << i;
  }
  std::vector<Storage> bad{Storage::empty({3}, DType::kInt32, kCpu)};
  EXPECT_THROW(batch.batch_copy(bad), InvalidArgumentError);  // count mismatch
  std::vector<Storage> wrong;
  for (int i = 0; i < 5; ++i) wrong.push_back(Storage::empty({1000 + i}, DType::kFloat32, kCpu));
  EXPECT_THROW(batch.batch_copy(wrong), InvalidArgumentError);  // dtype mismatch
  EXPECT_THROW(BatchStorage({Storage()}), InvalidArgumentError);
  EXPECT_THROW(BatchStorage(src, 0), InvalidArgumentError);
}

TEST(KeepAlive, NothingPendingOnTheCpu) {
  Storage s = Storage::empty({4}, DType::kFloat32, kCpu);
  keep_alive_on_stream(kCpu, 0, {s});
  EXPECT_EQ(s.use_count(), 1);
  EXPECT_EQ(collect_completed_copies(), 0u);
}

}  // namespace
}  // namespace genesis
