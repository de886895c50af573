// Typical tensor code (creation, operations, indexing, memory calls) in
// C++. Usage: tensor_demo [cpu|cuda]   (default cpu; CUDA needs the CUDA
// kernels, which are registered separately: until then every CUDA operation
// reports "<op> is not available on cuda yet").
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>

#include "genesis/cuda/device.h"

#include "genesis/memory/device_allocators.h"
#include "genesis/tensor/api.h"

using namespace genesis;

namespace {

double mib(std::int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

std::int64_t allocated(Device d) { return memory::allocator_for(d).stats().allocated_bytes[memory::kStatAggregate].current; }
std::int64_t cached(Device d) { return memory::allocator_for(d).stats().cached_bytes[memory::kStatAggregate].current; }

std::string join(const Shape& s) {
  std::string out = "(";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}
std::string dims(const Tensor& t) { return join(t.shape()); }
std::string strides_of(const Tensor& t) { return join(t.strides()); }

void section(const char* title) { std::cout << "\n== " << title << " ==\n"; }

void creation(Device dev) {
  section("Creating tensors");
  Tensor t = tensor({{1.0, 2.0}, {3.0, 4.0}}, std::nullopt, dev);
  std::cout << t << "\n";
  Tensor z = zeros({100, 100}, dev);
  Tensor o = ones({50, 50}, dev);
  Tensor r = randn({200, 200}, dev);
  Tensor h = randn({100, 100}, TensorOptions(DType::kFloat16, dev));
  Tensor i = randint(0, 10, {50, 50}, TensorOptions(DType::kInt64, dev));
  std::cout << "shape " << dims(t) << ", dtype " << t.dtype() << ", device " << t.device() << ", strides "
            << strides_of(t) << "\n";
  std::cout << "zeros " << dims(z) << " ones " << dims(o) << " randn " << dims(r)
            << " float16 " << h.dtype() << " randint " << i.dtype() << " in [" << i.min().item<std::int64_t>() << ", "
            << i.max().item<std::int64_t>() << "]\n";
}

void operations(Device dev) {
  section("Basic operations");
  manual_seed(0);
  Tensor x = randn({100, 100}, dev), y = randn({100, 100}, dev);
  Tensor z = x + y, w = x * y, u = x.pow(2), v = x.exp();
  std::cout << "z[0, :3] = " << z[{0, Slice(None, 3)}] << "\n";
  std::cout << "sum " << x.sum() << ", sum(dim=0) " << dims(x.sum(0)) << ", mean " << x.mean() << "\n";
  auto [max_val, indices] = x.max(1);
  std::cout << "max(dim=1): values " << dims(max_val) << ", indices[:5] " << indices[{Slice(None, 5)}] << "\n";
  Tensor a = randn({100, 50}, dev), b = randn({50, 200}, dev);
  std::cout << "matmul " << dims(matmul(a, b)) << "\n";
  std::cout << "view " << dims(x.view({10, 1000})) << ", transpose strides " << strides_of(x.transpose(0, 1))
            << ", flatten " << dims(x.flatten()) << ", relu(x).sum(1).mean() " << relu(x).sum(1).mean() << "\n";
  (void)w; (void)u; (void)v;
}

void indexing(Device dev) {
  section("Advanced indexing");
  Tensor data = arange(0, 100, 1, std::nullopt, dev).view({10, 10});
  std::cout << "data:\n" << data << "\n";
  std::cout << "basic slice data[2:5, 3:7]: " << dims(data[{Slice(2, 5), Slice(3, 7)}])
            << " (plan " << index_kind_name(plan_index(data, {Slice(2, 5), Slice(3, 7)}).kind) << ")\n";
  std::cout << "stepped data[::2, 1::2]: " << dims(data[{Slice(None, None, 2), Slice(1, None, 2)}]) << "\n";
  Tensor rows = tensor({0, 2, 4, 6}, std::nullopt, dev), cols = tensor({1, 3, 5, 7}, std::nullopt, dev);
  std::cout << "data[rows, cols]: " << data[{rows, cols}] << "\n";
  Tensor mask = data > 50;
  IndexPlan mplan = plan_index(data, {mask});
  std::cout << "data[data > 50]: " << data[mask] << "\n  plan " << index_kind_name(mplan.kind)
            << ", mask compaction " << (mplan.needs_mask_compaction ? "yes" : "no") << ", temporary bytes "
            << mplan.temp_memory_bytes << "\n";
  std::cout << "mixed data[rows, 2:8]: " << dims(data[{rows, Slice(2, 8)}]) << "\n";
  Tensor x = randn({1000, 1000}, dev);
  Tensor sel = x[{Slice(), arange(0, 1000, 10, std::nullopt, dev)}].sum(1);
  std::cout << "x[:, arange(0, 1000, 10)].sum(dim=1): " << dims(sel) << "\n";
}

void memory_calls(Device dev) {
  section("Memory management");
  std::printf("allocated %.1f MB, cached %.1f MB\n", mib(allocated(dev)), mib(cached(dev)));
  {
    Tensor x = randn({1000, 1000}, dev);
    std::printf("after creating a tensor: %.1f MB\n", mib(allocated(dev)));
  }
  memory::allocator_for(dev).empty_cache();
  std::printf("after release + empty_cache: %.1f MB allocated, %.1f MB cached\n", mib(allocated(dev)), mib(cached(dev)));

  Tensor x = randn({1000, 1000}, dev);
  std::int64_t start = allocated(dev);
  Tensor y = x + 1.0, z = y * 2.0, w = z.exp();
  std::printf("out-of-place ops grew memory by %.1f MB\n", mib(allocated(dev) - start));
  start = allocated(dev);
  x += 1.0;
  x *= 2.0;
  x.exp_();
  std::printf("in-place ops grew memory by %.1f MB\n", mib(allocated(dev) - start));

  section("Batched operations");
  std::vector<Tensor> matrices;
  for (int i = 0; i < 10; ++i) matrices.push_back(randn({100, 100}, dev));
  Tensor batched = stack(matrices, 0);
  std::cout << "stack " << dims(batched) << " -> exp().sum(dim=(1, 2)) "
            << dims(batched.exp().sum({1, 2})) << "\n";

  section("Error diagnosis");
  try {
    matmul(randn({1000, 1000}, dev), randn({500, 500}, dev));
  } catch (const Error& e) {
    std::cout << "error: " << e.message() << "\n";
  }
  try {
    Tensor d = arange(10, std::nullopt, dev);
    d[tensor({3, 12}, std::nullopt, dev)];
  } catch (const IndexError& e) {
    std::cout << "index error: " << e.message() << "\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Device dev = argc > 1 ? genesis::cuda::parse_device(argv[1]) : Device{};
    std::cout << "Genesis tensor demo on " << dev << "\n";
    creation(dev);
    operations(dev);
    indexing(dev);
    memory_calls(dev);
  } catch (const Error& e) {
    std::cerr << "error: " << e.message() << "\n";
    return 1;
  }
  return 0;
}
