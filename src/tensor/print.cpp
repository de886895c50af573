// Tensor::str(): PyTorch's repr (torch/_tensor_str.py, default print
// options: precision 4, threshold 1000, edgeitems 3, linewidth 80).
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

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

// Element reader over a host copy of the tensor: float64 for floating
// dtypes (exact for all of them), int64 for integers and bool.
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

// Calls f(linear index) for the elements shown (summarised when asked).
template <typename F>
void visit(const Shape& shape, const Shape& strides, std::size_t d, std::int64_t base, bool summarize, F& f) {
  if (d == shape.size()) {
    f(base);
    return;
  }
  const std::int64_t n = shape[d];
  auto one = [&](std::int64_t i) { visit(shape, strides, d + 1, base + i * strides[d], summarize, f); };
  if (summarize && n > 2 * kEdgeItems) {
    for (std::int64_t i = 0; i < kEdgeItems; ++i) one(i);
    for (std::int64_t i = n - kEdgeItems; i < n; ++i) one(i);
  } else {
    for (std::int64_t i = 0; i < n; ++i) one(i);
  }
}

std::string vector_str(const Shape& shape, const Shape& strides, std::int64_t base, std::size_t indent,
                       bool summarize, const Formatter& f) {
  const std::size_t element_length = f.width() + 2;
  const std::size_t per_line = std::max<std::size_t>(
      1, kLineWidth > indent ? (kLineWidth - indent) / element_length : 1);
  const std::int64_t n = shape.back(), st = strides.back();
  std::vector<std::string> data;
  if (summarize && n > 2 * kEdgeItems) {
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

std::string tensor_str(const Shape& shape, const Shape& strides, std::size_t d, std::int64_t base,
                       std::size_t indent, bool summarize, const Formatter& f) {
  const std::size_t dims = shape.size() - d;
  if (dims == 1) {
    return vector_str(Shape(shape.begin() + static_cast<std::ptrdiff_t>(d), shape.end()),
                      Shape(strides.begin() + static_cast<std::ptrdiff_t>(d), strides.end()), base, indent, summarize, f);
  }
  const std::int64_t n = shape[d];
  std::vector<std::string> slices;
  auto one = [&](std::int64_t i) {
    slices.push_back(tensor_str(shape, strides, d + 1, base + i * strides[d], indent + 1, summarize, f));
  };
  if (summarize && n > 2 * kEdgeItems) {
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
    Reader r{to(Device{}, is_floating(dt) ? DType::kFloat64 : DType::kInt64).contiguous()};
    const bool summarize = numel() > kThreshold;
    std::vector<std::int64_t> shown;
    auto collect = [&](std::int64_t lin) { shown.push_back(lin); };
    const Shape& sh = r.host.shape();
    const Shape& st = r.host.strides();
    visit(sh, st, 0, 0, summarize, collect);
    const Formatter f(r, shown, dt);
    body = dim() == 0 ? f.format(0) : tensor_str(sh, st, 0, 0, indent, summarize, f);
  }
  return add_suffixes(prefix + body, suffixes, indent);
}

}  // namespace genesis
