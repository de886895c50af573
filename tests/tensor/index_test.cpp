// NumPy indexing through IndexPlan. Every expected value below is what
// NumPy gives for the same expression on np.arange(24).reshape(2, 3, 4)
// (x) or np.arange(100).reshape(10, 10) (data), worked out by hand.
#include <gtest/gtest.h>

#include <random>

#include "genesis/tensor/api.h"
#include "genesis/tensor/backend.h"

namespace genesis {
namespace {

using V = std::vector<std::int64_t>;

Tensor X() { return arange(24).view({2, 3, 4}); }
Tensor idx(std::initializer_list<std::int64_t> v) { return tensor(v); }

TEST(IndexBasic, IntsSlicesEllipsisNewAxis) {
  Tensor x = X();
  EXPECT_EQ((x[{1, Slice(), 2}].tolist<std::int64_t>()), (V{14, 18, 22}));
  Tensor e = x[{Ellipsis, 1}];
  EXPECT_EQ(e.shape(), (Shape{2, 3}));
  EXPECT_EQ(e.tolist<std::int64_t>(), (V{1, 5, 9, 13, 17, 21}));
  Tensor r = x[{Slice(None, None, -1)}];
  EXPECT_EQ(r.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(r.tolist<std::int64_t>()[0], 12);
  EXPECT_EQ((x[{0, Slice(None, None, -2), Slice(1, None, 2)}].tolist<std::int64_t>()), (V{9, 11, 1, 3}));
  EXPECT_EQ((x[{NewAxis, 0, Ellipsis, NewAxis}].shape()), (Shape{1, 3, 4, 1}));
  EXPECT_EQ((x[{None, 1}].shape()), (Shape{1, 3, 4}));
  Tensor s = x[{-1, -1, -1}];
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.item<std::int64_t>(), 23);
  EXPECT_EQ((x[{Slice(-2, None), Slice(-100, 100), Slice(3, 1, -1)}].tolist<std::int64_t>()),
            (V{3, 2, 7, 6, 11, 10, 15, 14, 19, 18, 23, 22}));
  EXPECT_EQ((x[{Slice(5, 10)}].shape()), (Shape{0, 3, 4}));
  EXPECT_EQ((x[{Ellipsis}].shape()), (Shape{2, 3, 4}));
  EXPECT_EQ(x[{}].shape(), (Shape{2, 3, 4}));
  // Basic indexing is a view: writes show through.
  Tensor y = X();
  Tensor v = y[{Slice(), 1}];
  EXPECT_EQ(v.storage(), y.storage());
  v.fill_(-1);
  EXPECT_EQ(y.sum().item<std::int64_t>(), 276 - (4 + 5 + 6 + 7 + 16 + 17 + 18 + 19) - 8);
}

TEST(IndexBasic, Errors) {
  Tensor x = X();
  EXPECT_THROW((x[{0, 0, 0, 0}]), IndexError);
  EXPECT_THROW((x[{Ellipsis, 0, Ellipsis}]), IndexError);
  EXPECT_THROW((x[{Slice(None, None, 0)}]), InvalidArgumentError);
  try {
    x[{0, 0, 4}];
    FAIL();
  } catch (const IndexError& err) {
    EXPECT_NE(err.message().find("index 4 is out of bounds for dimension 2 with size 4"), std::string::npos) << err.message();
  }
  try {
    x[{NewAxis, 0, -4}];
    FAIL();
  } catch (const IndexError& err) {
    EXPECT_NE(err.message().find("index -4 is out of bounds for dimension 1 with size 3"), std::string::npos)
        << err.message();
  }
  EXPECT_THROW(tensor(5)[0], IndexError);
}

TEST(IndexAdvanced, IntegerTensors) {
  Tensor x = X();
  Tensor a = x[idx({1, 0})];
  EXPECT_EQ(a.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(a.tolist<std::int64_t>()[0], 12);
  EXPECT_NE(a.storage(), x.storage());  // a copy
  EXPECT_EQ((x[{idx({0, 1}), idx({1, 2})}].tolist<std::int64_t>()), (V{4, 5, 6, 7, 20, 21, 22, 23}));
  // Adjacent advanced indices stay in place ...
  Tensor adj = x[{Slice(), idx({0, 2}), idx({1, 3})}];
  EXPECT_EQ(adj.shape(), (Shape{2, 2}));
  EXPECT_EQ(adj.tolist<std::int64_t>(), (V{1, 11, 13, 23}));
  // ... separated ones go first.
  Tensor sep = x[{idx({0, 1}), Slice(), idx({1, 3})}];
  EXPECT_EQ(sep.shape(), (Shape{2, 3}));
  EXPECT_EQ(sep.tolist<std::int64_t>(), (V{1, 5, 9, 15, 19, 23}));
  // An int counts as advanced once a tensor is present (NumPy, unlike PyTorch).
  Tensor int_sep = x[{0, Slice(), idx({1, 3})}];
  EXPECT_EQ(int_sep.shape(), (Shape{2, 3}));
  EXPECT_EQ(int_sep.tolist<std::int64_t>(), (V{1, 5, 9, 3, 7, 11}));
  Tensor int_adj = x[{Slice(), 0, idx({1, 3})}];
  EXPECT_EQ(int_adj.shape(), (Shape{2, 2}));
  EXPECT_EQ(int_adj.tolist<std::int64_t>(), (V{1, 3, 13, 15}));
  // Index tensors broadcast together.
  Tensor bc = x[{tensor({{0}, {1}}), Slice(), idx({0, 3})}];
  EXPECT_EQ(bc.shape(), (Shape{2, 2, 3}));
  EXPECT_EQ((bc[{1, 1}].tolist<std::int64_t>()), (V{15, 19, 23}));
  EXPECT_EQ((bc[{0, 1}].tolist<std::int64_t>()), (V{3, 7, 11}));
  // Negative indices, other integer dtypes, 0-d results, empty selections.
  EXPECT_EQ((x[{idx({-1}), idx({-3})}].tolist<std::int64_t>()), (V{12, 13, 14, 15}));
  EXPECT_EQ((x[{tensor({1}, DType::kInt32), tensor({2}, DType::kUInt8)}].shape()), (Shape{1, 4}));
  Tensor zero_d = x[{tensor(1), tensor(2), tensor(3)}];
  EXPECT_EQ(zero_d.dim(), 0);
  EXPECT_EQ(zero_d.item<std::int64_t>(), 23);
  EXPECT_EQ(x[zeros({0}, DType::kInt64)].shape(), (Shape{0, 3, 4}));
  EXPECT_EQ((x[{Slice(), zeros({0, 2}, DType::kInt64)}].shape()), (Shape{2, 0, 2, 4}));
  // Advanced indices on a non-contiguous view, with a step.
  Tensor t = x.transpose(0, 2)[{Slice(None, None, 2), idx({2, 0})}];  // [2, 2, 2]
  EXPECT_EQ(t.tolist<std::int64_t>(), (V{8, 20, 0, 12, 10, 22, 2, 14}));
}

TEST(IndexAdvanced, MoreNumPyCases) {
  Tensor x = X();
  // x[..., [0, 2]] -> (2, 3, 2)
  Tensor a = x[{Ellipsis, idx({0, 2})}];
  EXPECT_EQ(a.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ((a[{1, 2}].tolist<std::int64_t>()), (V{20, 22}));
  // x[[[0, 1]]] (a 2-d index) -> (1, 2, 3, 4)
  EXPECT_EQ(x[tensor({{0, 1}})].shape(), (Shape{1, 2, 3, 4}));
  // x[1:, [2, 0]] -> (1, 2, 4): [[8..11], [0..3]] of x[1]
  EXPECT_EQ((x[{Slice(1, None), idx({2, 0})}].tolist<std::int64_t>()), (V{20, 21, 22, 23, 12, 13, 14, 15}));
  // x[None, [0, 1], None, [1, 2]] -> advanced separated by None: (2, 1, 1, 4)
  Tensor b = x[{None, idx({0, 1}), None, idx({1, 2})}];
  EXPECT_EQ(b.shape(), (Shape{2, 1, 1, 4}));
  EXPECT_EQ(b.tolist<std::int64_t>(), (V{4, 5, 6, 7, 20, 21, 22, 23}));
  // x[1, x[1] > 17] -> the int and the mask are adjacent advanced indices
  EXPECT_EQ((x[{1, x[1] > 17}].tolist<std::int64_t>()), (V{18, 19, 20, 21, 22, 23}));
  // x[[1, 0], ::-1, -1] -> ints join the advanced group but are separated by the slice
  Tensor c = x[{idx({1, 0}), Slice(None, None, -1), -1}];
  EXPECT_EQ(c.shape(), (Shape{2, 3}));
  EXPECT_EQ(c.tolist<std::int64_t>(), (V{23, 19, 15, 11, 7, 3}));
  // Duplicated indices gather duplicates.
  EXPECT_EQ((x[{0, 0, idx({3, 3, 0})}].tolist<std::int64_t>()), (V{3, 3, 0}));
  // A 2-d mask assignment with a broadcast row value.
  Tensor y = zeros({2, 3, 4}, DType::kInt64);
  y.index_put_({tensor({{true, false, false}, {false, false, true}})}, tensor({1, 2, 3, 4}));
  EXPECT_EQ(y.sum().item<std::int64_t>(), 20);
  EXPECT_EQ((y[{1, 2}].tolist<std::int64_t>()), (V{1, 2, 3, 4}));
}

TEST(IndexAdvanced, OutOfRangeIsIndexErrorNamingTheDimension) {
  Tensor x = X();
  auto expect_msg = [](auto&& f, const std::string& want) {
    try {
      f();
      ADD_FAILURE() << "expected IndexError " << want;
    } catch (const IndexError& e) {
      EXPECT_NE(e.message().find(want), std::string::npos) << e.message();
    }
  };
  expect_msg([&] { x[idx({0, 2})]; }, "index 2 is out of bounds for dimension 0 with size 2");
  expect_msg([&] { x[{Slice(), idx({5})}]; }, "index 5 is out of bounds for dimension 1 with size 3");
  expect_msg([&] { x[{Ellipsis, idx({1, -5})}]; }, "index -5 is out of bounds for dimension 2 with size 4");
  expect_msg([&] { x[{NewAxis, Slice(), idx({0}), idx({9})}]; }, "index 9 is out of bounds for dimension 2 with size 4");
  EXPECT_THROW(x[tensor({0.5})], TypeMismatchError);
  // Several index tensors are checked together (one transfer): the first
  // offending tensor is named, its max before its min.
  expect_msg([&] { x[{idx({0, 7}), idx({9, 0})}]; }, "index 7 is out of bounds for dimension 0 with size 2");
  expect_msg([&] { x[{idx({-3, 5}), idx({9, 0})}]; }, "index 5 is out of bounds for dimension 0 with size 2");
  expect_msg([&] { x[{idx({1, 0}), idx({0, -4})}]; }, "index -4 is out of bounds for dimension 1 with size 3");
  // A strided index tensor is reduced through its strides.
  expect_msg([&] { x[{Slice(), idx({0, 8, 1, 9, 3, 8}).slice(0, 0, 6, 2)}]; },
             "index 3 is out of bounds for dimension 1 with size 3");
  EXPECT_EQ((x[{Slice(), idx({0, 8, 1, 9, 2, 8}).slice(0, 0, 6, 2)}].shape()), (Shape{2, 3, 4}));
}

TEST(IndexAdvanced, BooleanMasks) {
  Tensor x = X();
  EXPECT_EQ(x[x > 20].tolist<std::int64_t>(), (V{21, 22, 23}));
  Tensor m2 = tensor({{true, false, true}, {false, true, false}});
  Tensor r = x[m2];
  EXPECT_EQ(r.shape(), (Shape{3, 4}));
  EXPECT_EQ(r.tolist<std::int64_t>(), (V{0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19}));
  Tensor mixed = x[{Slice(), tensor({true, false, true})}];
  EXPECT_EQ(mixed.shape(), (Shape{2, 2, 4}));
  EXPECT_EQ((mixed[{1, 0}].tolist<std::int64_t>()), (V{12, 13, 14, 15}));
  EXPECT_EQ((x[{1, tensor({false, true, true}), idx({0, 3})}].tolist<std::int64_t>()), (V{16, 23}));
  EXPECT_THROW((x[{Slice(), tensor({true, false})}]), IndexError);
  EXPECT_EQ(x[{true}].shape(), (Shape{1, 2, 3, 4}));
  EXPECT_EQ(x[{false}].shape(), (Shape{0, 2, 3, 4}));
  EXPECT_EQ(x[tensor(true)].shape(), (Shape{1, 2, 3, 4}));
  EXPECT_EQ(x[x > 100].shape(), (Shape{0}));
  Tensor all = x[x >= 0];
  EXPECT_EQ(all.numel(), 24);
}

TEST(IndexAdvanced, SeedExamples) {
  Tensor data = arange(0, 100).view({10, 10});
  EXPECT_EQ((data[{Slice(2, 5), Slice(3, 7)}].shape()), (Shape{3, 4}));
  EXPECT_EQ((data[{Slice(None, None, 2), Slice(1, None, 2)}].shape()), (Shape{5, 5}));
  Tensor rows = tensor({0, 2, 4, 6}), cols = tensor({1, 3, 5, 7});
  EXPECT_EQ((data[{rows, cols}].tolist<std::int64_t>()), (V{1, 23, 45, 67}));
  Tensor masked = data[data > 50];
  EXPECT_EQ(masked.numel(), 49);
  EXPECT_EQ(masked.tolist<std::int64_t>().front(), 51);
  Tensor mixed = data[{rows, Slice(2, 8)}];
  EXPECT_EQ(mixed.shape(), (Shape{4, 6}));
  EXPECT_EQ((mixed[{3}].tolist<std::int64_t>()), (V{62, 63, 64, 65, 66, 67}));
  Tensor sel = data[{Slice(), arange(0, 10, 3)}];
  EXPECT_EQ(sel.sum(1).tolist<std::int64_t>()[0], 0 + 3 + 6 + 9);
}

// Note [Fused mask selection] in src/tensor/index.cpp: x[mask] with a mask
// over x's leading dims takes the masked_select kernel; x[mask, ...] (two
// items) still goes through nonzero + gather, so it is the reference.
TEST(IndexAdvanced, FusedMaskSelectMatchesGeneralPath) {
  manual_seed(5);
  const std::vector<Shape> shapes = {{7}, {5, 6}, {3, 4, 5}, {1, 1}, {0, 3}, {4, 0}, {33, 2, 3}};
  const DType dtypes[] = {DType::kBool,    DType::kUInt8,   DType::kInt8,    DType::kInt16,   DType::kInt32,
                          DType::kInt64,   DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64};
  for (const Shape& shape : shapes) {
    for (DType t : dtypes) {
      const Tensor x = (randn(shape) * 10).to(t);
      for (std::size_t k = 1; k <= shape.size(); ++k) {
        const Shape lead(shape.begin(), shape.begin() + static_cast<std::ptrdiff_t>(k));
        for (int kind = 0; kind < 3; ++kind) {  // random, all false, all true
          const Tensor mask = kind == 0 ? rand(lead) > 0.5 : kind == 1 ? zeros(lead, DType::kBool) : ones(lead, DType::kBool);
          const Tensor fused = x[mask];
          const Tensor ref = x[{mask, Ellipsis}];
          ASSERT_EQ(fused.shape(), ref.shape()) << "shape " << ::testing::PrintToString(shape) << " k=" << k;
          EXPECT_TRUE(equal(fused, ref)) << "dtype " << t << " shape " << ::testing::PrintToString(shape) << " k=" << k
                                         << " kind=" << kind;
          EXPECT_EQ(fused.dtype(), t);
        }
      }
    }
  }
  // Non-contiguous source and mask are made contiguous first.
  const Tensor x = arange(24).view({2, 3, 4}).permute({2, 1, 0});  // [4, 3, 2]
  const Tensor m = (remainder(arange(12).view({3, 4}), 3) == 0).transpose(0, 1);  // [4, 3]
  EXPECT_TRUE(equal(x[m], x[{m, Ellipsis}]));
  EXPECT_EQ(x[m].shape(), (Shape{4, 2}));
  EXPECT_TRUE(equal(x[x > 11], x[{x > 11, Ellipsis}]));
}

TEST(IndexAdvanced, MaskedSelectKernelCpu) {
  // The CPU entry directly, over chunk boundaries (rows of 1 byte: 256K
  // per chunk) and rows of several elements.
  const auto fn = kernels::kernels_for(DeviceType::kCPU).masked_select;
  ASSERT_NE(fn, nullptr);
  for (std::int64_t row : {std::int64_t{1}, std::int64_t{3}, std::int64_t{1000}}) {
    const std::int64_t n = row == 1 ? 600000 : 777;
    const Tensor mask = rand({n}) > 0.3;
    const Tensor src = arange(n * row).view({n, row}).to(DType::kInt32);
    const std::int64_t count = mask.sum().item().to_int64();
    Tensor out = empty({count, row}, DType::kInt32);
    kernels::StridedOperand mo, so, oo;
    mo.data = mask.data_ptr();
    mo.dtype = DType::kBool;
    mo.ndim = 1;
    mo.sizes[0] = n;
    mo.strides[0] = 1;
    so.data = src.data_ptr();
    so.dtype = DType::kInt32;
    so.ndim = 2;
    so.sizes[0] = n;
    so.sizes[1] = row;
    so.strides[0] = row;
    so.strides[1] = 1;
    oo = so;
    oo.data = out.data_ptr();
    oo.sizes[0] = count;
    fn(kernels::KernelContext{Device{}, ~memory::StreamId{0}}, oo, so, mo);
    EXPECT_TRUE(equal(out, src[{mask, Ellipsis}])) << "row " << row;
  }
}

TEST(IndexPlanTest, PlansRecordTheLayout) {
  Tensor data = arange(0, 100).view({10, 10});
  IndexPlan v = plan_index(data, {Slice(2, 5), Slice(3, 7)});
  EXPECT_EQ(v.kind, IndexKind::kView);
  EXPECT_EQ(v.result_shape, (Shape{3, 4}));
  EXPECT_EQ(v.result_strides, (Shape{10, 1}));
  EXPECT_EQ(v.ptr_offset, 23);
  EXPECT_EQ(v.ptr_offset_bytes, 23 * 8);
  EXPECT_FALSE(v.needs_mask_compaction);
  EXPECT_EQ(v.temp_memory_bytes, 0u);
  IndexPlan st = plan_index(data, {Slice(None, None, 2), Slice(1, None, 2)});
  EXPECT_EQ(st.result_strides, (Shape{20, 2}));
  EXPECT_EQ(st.ptr_offset, 1);
  IndexPlan g = plan_index(data, {tensor({0, 2, 4, 6}), Slice(2, 8)});
  EXPECT_EQ(g.kind, IndexKind::kGather);
  EXPECT_EQ(g.result_shape, (Shape{4, 6}));
  EXPECT_EQ(g.result_strides, (Shape{6, 1}));
  EXPECT_EQ(g.index_tensors.size(), 1u);
  EXPECT_EQ(g.indexed_dims, (std::vector<std::int64_t>{0}));
  EXPECT_EQ(g.ptr_offset, 2);
  EXPECT_EQ(g.temp_memory_bytes, 4u * 6u * 8u);
  IndexPlan m = plan_index(data, {data > 50});
  EXPECT_TRUE(m.needs_mask_compaction);
  EXPECT_EQ(m.index_tensors.size(), 2u);
  EXPECT_EQ(m.result_shape, (Shape{49}));
  EXPECT_GE(m.temp_memory_bytes, 49u * 2u * 8u);
  EXPECT_EQ(plan_index_put(data, {0}, true).kind, IndexKind::kFill);
  EXPECT_EQ(plan_index_put(data, {0}, false).kind, IndexKind::kCopy);
  IndexPlan sc = plan_index_put(data, {tensor({1, 2})}, false);
  EXPECT_EQ(sc.kind, IndexKind::kScatter);
  EXPECT_EQ(sc.result_strides, (Shape{0, 1}));
  EXPECT_STREQ(index_kind_name(sc.kind), "SCATTER");
  EXPECT_EQ(IndexItem(Slice(1, None, 2)).str(), "1::2");
}

TEST(IndexPut, FillCopyScatter) {
  Tensor y = zeros({3, 4});
  y.index_put_({1}, 5);
  EXPECT_EQ(y.sum().item<float>(), 20.0f);
  y.index_put_({Slice(), 1}, tensor({1.0, 2.0, 3.0}));
  EXPECT_EQ((y[{Slice(), 1}].tolist<float>()), (std::vector<float>{1, 2, 3}));
  y.index_put_({tensor({0, 2}), tensor({1, 3})}, tensor({7.0, 8.0}));
  EXPECT_EQ((y[{0, 1}].item<float>()), 7.0f);
  EXPECT_EQ((y[{2, 3}].item<float>()), 8.0f);
  y.index_put_({y > 4}, 0);
  EXPECT_EQ((y > 4).sum().item<std::int64_t>(), 0);
  y.index_put_({tensor({0, 2})}, tensor({1.0, 2.0, 3.0, 4.0}));  // broadcast over rows
  EXPECT_EQ((y[{2}].tolist<float>()), (std::vector<float>{1, 2, 3, 4}));
  y.index_put_({0}, ones({1, 4}));  // leading 1s dropped, as NumPy
  EXPECT_EQ((y[{0}].tolist<float>()), (std::vector<float>{1, 1, 1, 1}));
  EXPECT_THROW(y.index_put_({tensor({0, 1})}, ones({3})), InvalidArgumentError);
  Tensor yi = zeros({3}, DType::kInt64);
  yi.index_put_({Slice()}, tensor({1.7, 2.2, -1.5}));
  EXPECT_EQ(yi.tolist<std::int64_t>(), (V{1, 2, -1}));
  yi.index_put_({tensor({true, false, true})}, tensor({9, 8}));
  EXPECT_EQ(yi.tolist<std::int64_t>(), (V{9, 2, 8}));
}

// NumPy checks index arrays after broadcasting them together: an empty
// broadcast uses no index, so none is out of range (np.zeros((2, 3))[[False,
// False], [7]] has shape (0,)); plain ints are still checked (x[[], 7] raises).
TEST(IndexAdvanced, EmptyBroadcastChecksNoIndex) {
  Tensor b = zeros({2, 3});
  Tensor no = tensor({false, false});
  EXPECT_EQ((b[{no, idx({7})}].shape()), (Shape{0}));
  EXPECT_EQ((b[{zeros({0}, DType::kInt64), idx({7})}].shape()), (Shape{0}));
  b.index_put_({no, idx({7})}, 1);
  EXPECT_EQ(b.sum().item<float>(), 0.0f);
  EXPECT_THROW((b[{zeros({0}, DType::kInt64), 7}]), IndexError);
  EXPECT_THROW((b[{idx({0}), idx({7})}]), IndexError);
}

// NumPy: a boolean mask dim of size 0 matches an indexed dim of any size
// (np.zeros((2, 3))[np.zeros((2, 0), bool)] has shape (0,)); other sizes
// must match.
TEST(IndexMask, EmptyMaskDimMatchesAnySize) {
  Tensor b = zeros({2, 3});
  EXPECT_EQ((b[{zeros({2, 0}, DType::kBool)}].shape()), (Shape{0}));
  EXPECT_EQ((b[{Ellipsis, zeros({0}, DType::kBool)}].shape()), (Shape{2, 0}));
  EXPECT_THROW((b[{zeros({1, 0}, DType::kBool)}]), IndexError);
  EXPECT_THROW((b[{zeros({0, 1}, DType::kBool)}]), IndexError);
  b.index_put_({Ellipsis, zeros({0}, DType::kBool)}, 1);
  EXPECT_EQ(b.sum().item<float>(), 0.0f);
}

// Two storages over one buffer (genesis.from_numpy of two views of one
// array): the value is read before any write, as NumPy's a[1:] = a[:-1].
TEST(IndexPut, ValueAliasingThroughAnotherStorage) {
  std::vector<std::int64_t> buf = {0, 1, 2, 3, 4, 5};
  Tensor x(Storage::borrow(buf.data(), {6}, DType::kInt64, Device{}), {6}, {1}, 0);
  Tensor v(Storage::borrow(buf.data(), {5}, DType::kInt64, Device{}), {5}, {1}, 0);
  x.index_put_({Slice(1, None)}, v);
  EXPECT_EQ(buf, (V{0, 0, 1, 2, 3, 4}));
  buf = {0, 1, 2, 3, 4, 5};
  x.index_put_({tensor({1, 2, 3, 4, 5})}, v);
  EXPECT_EQ(buf, (V{0, 0, 1, 2, 3, 4}));
  buf = {0, 1, 2, 3, 4, 5};
  Tensor tail(Storage::borrow(buf.data() + 1, {5}, DType::kInt64, Device{}), {5}, {1}, 0);
  tail.copy_(v);
  EXPECT_EQ(buf, (V{0, 0, 1, 2, 3, 4}));
}

// NumPy: a 0-d integer index array is an integer (checked on its own, not
// after broadcasting): np.zeros((2, 3))[[], np.array(7)] is an IndexError.
TEST(IndexAdvanced, ZeroDimIntegerTensorIsAnInt) {
  Tensor b = arange(6).view({2, 3});
  EXPECT_THROW((b[{zeros({0}, DType::kInt64), tensor(int64_t{7})}]), IndexError);
  EXPECT_EQ((b[{tensor(int64_t{1}), tensor(int64_t{2})}].item<std::int64_t>()), 5);
  EXPECT_EQ((b[{idx({0, 1}), tensor(int64_t{2})}].tolist<std::int64_t>()), (V{2, 5}));
  EXPECT_EQ((b[{Slice(), tensor(int64_t{-1})}].tolist<std::int64_t>()), (V{2, 5}));
}

TEST(IndexPut, DuplicatesOverlapAndErrors) {
  Tensor z = zeros({3});
  z.index_put_({tensor({0, 0, 1})}, tensor({1.0, 2.0, 3.0}));
  EXPECT_EQ(z.tolist<float>(), (std::vector<float>{2, 3, 0}));  // last write wins (CPU)
  Tensor acc = zeros({3});
  acc.index_put_({tensor({0, 0, 1, 0})}, tensor({1.0, 2.0, 3.0, 4.0}), true);  // np.add.at
  EXPECT_EQ(acc.tolist<float>(), (std::vector<float>{7, 3, 0}));
  acc.index_put_({tensor({2, 2})}, 5, true);
  EXPECT_EQ(acc.tolist<float>(), (std::vector<float>{7, 3, 10}));
  acc.index_put_({Slice(0, 2)}, 1, true);
  EXPECT_EQ(acc.tolist<float>(), (std::vector<float>{8, 4, 10}));
  Tensor a = arange(5);
  a.index_put_({Slice(1, None)}, a[{Slice(None, -1)}]);
  EXPECT_EQ(a.tolist<std::int64_t>(), (V{0, 0, 1, 2, 3}));
  Tensor b = arange(5);
  b.index_put_({tensor({1, 2, 3, 4})}, b[{Slice(None, -1)}]);
  EXPECT_EQ(b.tolist<std::int64_t>(), (V{0, 0, 1, 2, 3}));
  Tensor c = zeros({3});
  EXPECT_THROW(c.index_put_({tensor({0, 5})}, 1), IndexError);
  EXPECT_EQ(c.sum().item<float>(), 0.0f);  // nothing was written
  Tensor d = zeros({2, 2});
  d.index_put_({tensor({1}), tensor({-1})}, 4);
  EXPECT_EQ(d.tolist<float>(), (std::vector<float>{0, 0, 0, 4}));
  d.index_put_({zeros({0}, DType::kInt64)}, 7);  // empty selection: no-op
  EXPECT_EQ(d.sum().item<float>(), 4.0f);
}

// Python's slice.indices(n), written out independently of the library.
std::vector<std::int64_t> slice_positions(std::int64_t n, std::optional<std::int64_t> start,
                                          std::optional<std::int64_t> stop, std::int64_t step) {
  std::vector<std::int64_t> out;
  auto clamp = [&](std::optional<std::int64_t> v, std::int64_t dflt, std::int64_t lo, std::int64_t hi) {
    if (!v) return dflt;
    std::int64_t x = *v < 0 ? *v + n : *v;
    return std::min(std::max(x, lo), hi);
  };
  if (step > 0) {
    for (std::int64_t i = clamp(start, 0, 0, n), e = clamp(stop, n, 0, n); i < e; i += step) out.push_back(i);
  } else {
    for (std::int64_t i = clamp(start, n - 1, -1, n - 1), e = clamp(stop, -1, -1, n - 1); i > e; i += step) out.push_back(i);
  }
  return out;
}

TEST(IndexRandomized, SlicesAgreeWithGatherAndNaiveOffsets) {
  std::mt19937 rng(1234);
  auto rnd = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 300; ++trial) {
    const Shape shape{rnd(0, 5), rnd(1, 6), rnd(1, 4)};
    Tensor x = arange(shape[0] * shape[1] * shape[2]).view(shape);
    std::vector<IndexItem> items;
    std::vector<std::vector<std::int64_t>> pos;
    for (std::size_t d = 0; d < 3; ++d) {
      auto opt = [&]() -> std::optional<std::int64_t> {
        if (rnd(0, 3) == 0) return std::nullopt;
        return rnd(-8, 8);
      };
      const auto start = opt(), stop = opt();
      std::int64_t step = rnd(-3, 3);
      if (step == 0) step = 1;
      items.push_back(Slice(start, stop, step));
      pos.push_back(slice_positions(shape[d], start, stop, step));
    }
    Tensor view = x[items];
    ASSERT_EQ(view.shape(), (Shape{static_cast<std::int64_t>(pos[0].size()), static_cast<std::int64_t>(pos[1].size()),
                                   static_cast<std::int64_t>(pos[2].size())}));
    // Naive: element (i, j, k) of the view is x's element at the positions.
    std::vector<std::int64_t> expected;
    for (auto i : pos[0])
      for (auto j : pos[1])
        for (auto k : pos[2]) expected.push_back((i * shape[1] + j) * shape[2] + k);
    ASSERT_EQ(view.tolist<std::int64_t>(), expected) << "trial " << trial;
    // The same selection through index tensors (an open mesh) gathers it.
    auto mesh = [&](std::size_t d) {
      Shape s{1, 1, 1};
      s[d] = static_cast<std::int64_t>(pos[d].size());
      return tensor(pos[d], {static_cast<std::int64_t>(pos[d].size())}).view(s);
    };
    Tensor g = x[{mesh(0), mesh(1), mesh(2)}];
    ASSERT_TRUE(equal(g, view)) << "trial " << trial;
    // And assignment through both paths agrees.
    Tensor a = zeros(shape, DType::kInt64), b = zeros(shape, DType::kInt64);
    Tensor vals = arange(view.numel()).view(view.shape()) + 1;
    a.index_put_(items, vals);
    b.index_put_({mesh(0), mesh(1), mesh(2)}, vals);
    ASSERT_TRUE(equal(a, b)) << "trial " << trial;
  }
}

TEST(IndexRandomized, MasksEqualNonzeroIndices) {
  manual_seed(99);
  for (int trial = 0; trial < 50; ++trial) {
    Tensor x = randn({4, 5, 3});
    Tensor m = x > 0.3;
    Tensor nz = nonzero(m);
    Tensor by_mask = x[m];
    Tensor by_index = x[{nz.select(1, 0), nz.select(1, 1), nz.select(1, 2)}];
    ASSERT_TRUE(equal(by_mask, by_index));
    Tensor y = x.clone();
    y.index_put_({m}, 0.0);
    ASSERT_EQ((y > 0.3).sum().item<std::int64_t>(), 0);
    ASSERT_TRUE(equal(where(m, 0.0, x), y));
  }
}

}  // namespace
}  // namespace genesis
