// Tensor::str(): PyTorch's repr (torch/_tensor_str.py, default print
// options: precision 4, threshold 1000, edgeitems 3, linewidth 80).
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "genesis/tensor/creation.h"
#include "genesis/tensor/tensor.h"
#include "tensor_internal.h"

namespace genesis {
namespace {

constexpr int kPrecision = 4;
constexpr std::int64_t kThreshold = 1000;
constexpr std::int64_t kEdgeItems = 3;
constexpr std::size_t kLineWidth = 80;
// Prefix of dtype names in the suffix; PyTorch prints "torch.float16".
constexpr const char* kDTypePrefix = "genesis.";

std::string fmt(const char* spec, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, spec, v);
  return buf;
}

// Python's str of a float for nonfinite values ("nan", "inf", "-inf").
std::string nonfinite(double v) { return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf"); }

// Python's "{:.4e}" / "{:.4f}" / "{:.0f}" (printf matches, except that a
// NaN has no sign in Python).
std::string py_format(double v, char mode, int precision) {
  if (!std::isfinite(v)) return nonfinite(v);
  char spec[16];
  std::snprintf(spec, sizeof spec, "%%.%d%c", precision, mode);
  return fmt(spec, v);
}

// Element reader over the host copy of the elements shown (edge_items):
// float64 for floating dtypes (exact for all of them), int64 for integers
// and bool.
struct Reader {
  Tensor host;  // float64 copy for floats; int64 for integers and bool
  std::int64_t at_int(std::int64_t lin) const { return host.data_ptr<std::int64_t>()[lin]; }
  double at(std::int64_t lin) const {
    return host.dtype() == DType::kFloat64 ? host.data_ptr<double>()[lin]
                                           : static_cast<double>(host.data_ptr<std::int64_t>()[lin]);
  }
};

// The _Formatter of torch/_tensor_str.py.
class Formatter {
 public:
  Formatter(const Reader& r, const std::vector<std::int64_t>& shown, DType dtype)
      : reader_(r), floating_(is_floating(dtype)), is_bool_(dtype == DType::kBool) {
    if (!floating_) {
      for (auto lin : shown) max_width_ = std::max(max_width_, raw(r.at_int(lin)).size());
      return;
    }
    std::vector<double> values;
    for (auto lin : shown) values.push_back(r.at(lin));
    std::vector<double> finite;
    for (double v : values) {
      if (std::isfinite(v) && v != 0.0) finite.push_back(v);
    }
    if (finite.empty()) return;
    double lo = std::abs(finite[0]), hi = lo;
    for (double v : finite) {
      lo = std::min(lo, std::abs(v));
      hi = std::max(hi, std::abs(v));
      if (v != std::ceil(v)) int_mode_ = false;
    }
    if (int_mode_) {
      if (hi / lo > 1000.0 || hi > 1.0e8) {
        sci_mode_ = true;
        for (double v : finite) max_width_ = std::max(max_width_, py_format(v, 'e', kPrecision).size());
      } else {
        for (double v : finite) max_width_ = std::max(max_width_, py_format(v, 'f', 0).size() + 1);
      }
    } else if (hi / lo > 1000.0 || hi > 1.0e8 || lo < 1.0e-4) {
      sci_mode_ = true;
      for (double v : finite) max_width_ = std::max(max_width_, py_format(v, 'e', kPrecision).size());
    } else {
      for (double v : finite) max_width_ = std::max(max_width_, py_format(v, 'f', kPrecision).size());
    }
  }

  std::size_t width() const { return max_width_; }

  /// The element at linear index `lin` of the host copy, padded.
  std::string format(std::int64_t lin) const {
    std::string s;
    const double v = floating_ ? reader_.at(lin) : 0.0;
    if (floating_) {
      if (sci_mode_) {
        s = py_format(v, 'e', kPrecision);
      } else if (int_mode_) {
        s = py_format(v, 'f', 0);
        if (std::isfinite(v)) s += ".";
      } else {
        s = py_format(v, 'f', kPrecision);
      }
    } else {
      s = raw(reader_.at_int(lin));
    }
    return s.size() < max_width_ ? std::string(max_width_ - s.size(), ' ') + s : s;
  }

 private:
  std::string raw(std::int64_t v) const {
    if (is_bool_) return v != 0 ? "True" : "False";
    return std::to_string(v);
  }
  const Reader& reader_;
  bool floating_;
  bool is_bool_;
  bool int_mode_ = true;
  bool sci_mode_ = false;
  std::size_t max_width_ = 1;
};

// The elements of one row; `cut`: the row holds only its edge items
// (2 * kEdgeItems of them), shown with "..." between.
std::string vector_str(std::int64_t n, std::int64_t st, std::int64_t base, std::size_t indent, bool cut,
                       const Formatter& f) {
  const std::size_t element_length = f.width() + 2;
  const std::size_t per_line = std::max<std::size_t>(
      1, kLineWidth > indent ? (kLineWidth - indent) / element_length : 1);
  std::vector<std::string> data;
  if (cut) {
    for (std::int64_t i = 0; i < kEdgeItems; ++i) data.push_back(f.format(base + i * st));
    data.push_back(" ...");
    for (std::int64_t i = n - kEdgeItems; i < n; ++i) data.push_back(f.format(base + i * st));
  } else {
    for (std::int64_t i = 0; i < n; ++i) data.push_back(f.format(base + i * st));
  }
  std::string out = "[";
  for (std::size_t i = 0; i < data.size(); ++i) {
    if (i > 0) out += (i % per_line == 0) ? ",\n" + std::string(indent + 1, ' ') : ", ";
    out += data[i];
  }
  return out + "]";
}

// Dims d.. of the edge copy (see edge_items); cut[d]: dim d holds only its
// edge items.
std::string tensor_str(const Shape& shape, const Shape& strides, const std::vector<bool>& cut, std::size_t d,
                       std::int64_t base, std::size_t indent, const Formatter& f) {
  const std::size_t dims = shape.size() - d;
  if (dims == 1) return vector_str(shape[d], strides[d], base, indent, cut[d], f);
  const std::int64_t n = shape[d];
  std::vector<std::string> slices;
  auto one = [&](std::int64_t i) {
    slices.push_back(tensor_str(shape, strides, cut, d + 1, base + i * strides[d], indent + 1, f));
  };
  if (cut[d]) {
    for (std::int64_t i = 0; i < kEdgeItems; ++i) one(i);
    slices.push_back("...");
    for (std::int64_t i = n - kEdgeItems; i < n; ++i) one(i);
  } else {
    for (std::int64_t i = 0; i < n; ++i) one(i);
  }
  const std::string sep = "," + std::string(dims - 1, '\n') + std::string(indent + 1, ' ');
  std::string out = "[";
  for (std::size_t i = 0; i < slices.size(); ++i) out += (i ? sep : "") + slices[i];
  return out + "]";
}

std::string add_suffixes(std::string s, const std::vector<std::string>& suffixes, std::size_t indent) {
  // Python: len(s) - s.rfind("\n") + 1, where rfind gives -1 when absent.
  const std::size_t nl = s.rfind('\n');
  std::size_t last_line_len = nl == std::string::npos ? s.size() + 2 : s.size() - nl + 1;
  for (const auto& suf : suffixes) {
    if (last_line_len + suf.size() + 2 > kLineWidth) {
      s += ",\n" + std::string(indent, ' ') + suf;
      last_line_len = indent + suf.size();
    } else {
      s += ", " + suf;
      last_line_len += suf.size() + 2;
    }
  }
  return s + ")";
}

// Note [Printing reads the edges]: a summarised tensor (more than
// kThreshold elements) shows the first and last kEdgeItems items of every
// dim longer than 2 * kEdgeItems. Only those are read: each corner block
// (first or last items of every such dim) is copied into its place in a
// small host tensor of `host_dtype`, so printing a tensor, or a view that
// expands one element to 10^10, allocates only what it shows. cut[d] says
// whether dim d was reduced to its edges.
Tensor edge_items(const Tensor& t, const std::vector<bool>& cut, DType host_dtype) {
  Shape shape = t.shape();
  std::vector<std::size_t> cut_dims;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (!cut[d]) continue;
    shape[d] = 2 * kEdgeItems;
    cut_dims.push_back(d);
  }
  Tensor out = empty(shape, TensorOptions(host_dtype, Device{}));
  for (std::size_t corner = 0; corner < (std::size_t{1} << cut_dims.size()); ++corner) {
    Tensor src = t;
    Tensor dst = out;
    for (std::size_t j = 0; j < cut_dims.size(); ++j) {
      const auto d = static_cast<std::int64_t>(cut_dims[j]);
      const bool last = ((corner >> j) & 1U) != 0;
      src = src.narrow(d, last ? t.shape()[cut_dims[j]] - kEdgeItems : 0, kEdgeItems);
      dst = dst.narrow(d, last ? kEdgeItems : 0, kEdgeItems);
    }
    dst.copy_(src);
  }
  return out;
}

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  const std::string prefix = "tensor(";
  const std::size_t indent = prefix.size();
  std::vector<std::string> suffixes;
  if (device().is_cuda()) suffixes.push_back("device='" + device().str() + "'");
  const DType dt = dtype();
  const bool default_dtype = dt == DType::kFloat32 || dt == DType::kInt64 || dt == DType::kBool;
  const std::string dtype_suffix = std::string("dtype=") + kDTypePrefix + std::string(dtype_name(dt));
  std::string body;
  if (numel() == 0) {
    if (dim() != 1) {
      std::string sz = "size=(";
      for (std::size_t i = 0; i < shape().size(); ++i) sz += (i ? ", " : "") + std::to_string(shape()[i]);
      if (shape().size() == 1) sz += ",";
      suffixes.push_back(sz + ")");
    }
    if (dt != DType::kFloat32) suffixes.push_back(dtype_suffix);
    body = "[]";
  } else {
    if (!default_dtype) suffixes.push_back(dtype_suffix);
    const bool summarize = numel() > kThreshold;
    std::vector<bool> cut(shape().size());
    for (std::size_t d = 0; d < cut.size(); ++d) cut[d] = summarize && shape()[d] > 2 * kEdgeItems;
    // Every element of the edge copy is shown (Note [Printing reads the edges]).
    const Reader r{edge_items(*this, cut, is_floating(dt) ? DType::kFloat64 : DType::kInt64)};
    std::vector<std::int64_t> shown(static_cast<std::size_t>(r.host.numel()));
    for (std::size_t i = 0; i < shown.size(); ++i) shown[i] = static_cast<std::int64_t>(i);
    const Formatter f(r, shown, dt);
    body = dim() == 0 ? f.format(0) : tensor_str(r.host.shape(), r.host.strides(), cut, 0, 0, indent, f);
  }
  return add_suffixes(prefix + body, suffixes, indent);
}

}  // namespace genesis
