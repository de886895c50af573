// DLPack exchange (zero copy) with NumPy, PyTorch, CuPy, JAX, ...
//
//   t.__dlpack__(stream=None, max_version=None, dl_device=None, copy=None)
//       a "dltensor_versioned" capsule when the consumer passes
//       max_version >= (1, 0), else a legacy "dltensor" capsule;
//   t.__dlpack_device__() -> (device_type, device_id);
//   genesis.from_dlpack(obj) asks for a versioned capsule first and falls
//       back to the legacy protocol for producers that do not take
//       max_version (NumPy < 2, older PyTorch); a bare capsule is accepted.
//
// Ownership follows the spec: the capsule owns the managed tensor until a
// consumer renames it "used_dltensor[_versioned]"; from then on the consumer
// calls the managed tensor's deleter when done. Our manager context holds a
// Tensor handle, so the memory lives until that deleter runs.
//
// Read-only memory (Note [Read-only memory] in storage/storage.h): a
// versioned capsule with DLPACK_FLAG_BITMASK_READ_ONLY imports as a
// read-only tensor, and a read-only tensor exports with that flag. The
// legacy capsule has no flags: a read-only tensor refuses to go out that way
// (BufferError, as NumPy does), since the consumer would write into it.
//
// Streams (CUDA): the spec asks the producer to make the data ready for the
// consumer's stream. We synchronise the tensor's stream unless the consumer
// passes -1 ("no synchronisation"); simple and always correct, at the price
// of one wait. On import we pass our current stream on the producer's device
// (1 for the legacy default stream) so the producer orders its work first.
//
// Debian 12's libdlpack-dev is DLPack 0.6, which predates the versioned ABI
// (DLPack 1.0). The versioned struct below is written from the spec and used
// only when the header does not define it (DLPACK_MAJOR_VERSION appears in
// 1.0 headers). Without the header at all, py_dlpack_abi.h declares the ABI.
#include "py_dlpack_abi.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "genesis/core/checked_math.h"
#include "genesis/core/error.h"
#include "genesis/cuda/device.h"
#include "genesis/cuda/stream.h"
#include "genesis/tensor/api.h"
#include "py_tensor_args.h"
#include "py_tensor_bind.h"

namespace genesis::python {

namespace {

#if defined(DLPACK_MAJOR_VERSION)
using VersionedTensor = ::DLManagedTensorVersioned;
#else
struct DLPackVersionV1 {
  std::uint32_t major;
  std::uint32_t minor;
};
// Layout of DLManagedTensorVersioned in DLPack 1.0 (dlpack.h of that release).
struct VersionedTensor {
  DLPackVersionV1 version;
  void* manager_ctx;
  void (*deleter)(VersionedTensor* self);
  std::uint64_t flags;
  DLTensor dl_tensor;
};
#endif

constexpr std::uint8_t kBoolCode = 6;  // kDLBool, added in DLPack 0.8 (absent from 0.6's enum)
#if defined(DLPACK_FLAG_BITMASK_READ_ONLY)
constexpr std::uint64_t kFlagReadOnly = DLPACK_FLAG_BITMASK_READ_ONLY;
#else
constexpr std::uint64_t kFlagReadOnly = 1ULL << 0;  // DLPACK_FLAG_BITMASK_READ_ONLY of DLPack 1.0
#endif

constexpr const char* kLegacyName = "dltensor";
constexpr const char* kLegacyUsed = "used_dltensor";
constexpr const char* kVersionedName = "dltensor_versioned";
constexpr const char* kVersionedUsed = "used_dltensor_versioned";

DLDataType to_dl_dtype(DType t) {
  DLDataType d{};
  d.lanes = 1;
  d.bits = static_cast<std::uint8_t>(dtype_size(t) * 8);
  switch (t) {
    case DType::kBool: d.code = kBoolCode; break;
    case DType::kUInt8: d.code = kDLUInt; break;
    case DType::kInt8: case DType::kInt16: case DType::kInt32: case DType::kInt64: d.code = kDLInt; break;
    case DType::kBFloat16: d.code = kDLBfloat; break;
    default: d.code = kDLFloat; break;
  }
  return d;
}

DType from_dl_dtype(DLDataType d) {
  if (d.lanes != 1) throw py::type_error("DLPack: vector dtypes (lanes != 1) are not supported");
  switch (d.code) {
    case kBoolCode: if (d.bits == 8) return DType::kBool; break;
    case kDLUInt: if (d.bits == 8) return DType::kUInt8; break;
    case kDLInt:
      if (d.bits == 8) return DType::kInt8;
      if (d.bits == 16) return DType::kInt16;
      if (d.bits == 32) return DType::kInt32;
      if (d.bits == 64) return DType::kInt64;
      break;
    case kDLFloat:
      if (d.bits == 16) return DType::kFloat16;
      if (d.bits == 32) return DType::kFloat32;
      if (d.bits == 64) return DType::kFloat64;
      break;
    case kDLBfloat: if (d.bits == 16) return DType::kBFloat16; break;
    default: break;
  }
  throw py::type_error("DLPack: dtype (code " + std::to_string(d.code) + ", " + std::to_string(d.bits) +
                       " bits) has no genesis equivalent");
}

DLDevice to_dl_device(Device d) {
  DLDevice out{};
  out.device_type = d.is_cpu() ? kDLCPU : kDLCUDA;
  out.device_id = d.is_cpu() ? 0 : d.index();
  return out;
}

// What a capsule we produce points to: the tensor (keeps the memory), its
// shape and strides (DLTensor points into these), and the managed struct.
template <typename Managed>
struct Export {
  Tensor tensor;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
  Managed managed{};
};

template <typename Managed>
void fill(Export<Managed>* e) {
  DLTensor& dl = e->managed.dl_tensor;
  const Tensor& t = e->tensor;
  dl.data = t.numel() == 0 ? nullptr : t.data_ptr();
  dl.device = to_dl_device(t.device());
  dl.ndim = static_cast<int>(t.dim());
  dl.dtype = to_dl_dtype(t.dtype());
  dl.shape = e->shape.data();
  dl.strides = e->strides.data();
  dl.byte_offset = 0;
}

template <typename Managed>
void delete_export(Managed* self) {
  delete static_cast<Export<Managed>*>(self->manager_ctx);
}

// Capsule destructor: only an unconsumed capsule still owns its tensor.
template <typename Managed>
void capsule_destructor(PyObject* capsule) {
  const char* name = std::is_same_v<Managed, DLManagedTensor> ? kLegacyName : kVersionedName;
  if (!PyCapsule_IsValid(capsule, name)) return;  // consumed (renamed "used_...")
  auto* managed = static_cast<Managed*>(PyCapsule_GetPointer(capsule, name));
  if (managed != nullptr && managed->deleter != nullptr) managed->deleter(managed);
}

// A (a, b) pair of ints of __dlpack__'s arguments; TypeError naming the
// argument and its form ("max_version", "(major, minor)") otherwise.
std::pair<int, int> int_pair(py::handle h, const char* what, const char* form) {
  auto refuse = [&] {
    return py::type_error(std::string("__dlpack__: ") + what + " must be a tuple " + form + " or None, got " +
                          (PyTuple_Check(h.ptr()) ? py::repr(h).cast<std::string>() : type_name_of(h)));
  };
  if (!PyTuple_Check(h.ptr()) || PyTuple_GET_SIZE(h.ptr()) != 2) throw refuse();
  int out[2] = {0, 0};
  for (int i = 0; i < 2; ++i) {
    PyObject* item = PyTuple_GET_ITEM(h.ptr(), i);
    if (PyBool_Check(item) || !PyIndex_Check(item)) throw refuse();
    const std::int64_t v = to_int64(item, what);
    if (v < INT_MIN || v > INT_MAX) throw refuse();
    out[i] = static_cast<int>(v);
  }
  return {out[0], out[1]};
}

py::object export_tensor(const Tensor& self, py::object stream, py::object max_version, py::object dl_device,
                         py::object copy) {
  Tensor t = self;
  bool versioned = false;
  if (!max_version.is_none()) versioned = int_pair(max_version, "max_version", "(major, minor)").first >= 1;
  if (!dl_device.is_none()) {
    const auto [type, id] = int_pair(dl_device, "dl_device", "(device_type, device_id)");
    const DLDevice own = to_dl_device(t.device());
    if (type != own.device_type || id != own.device_id) {
      if (!copy.is_none() && !copy.cast<bool>()) throw py::buffer_error("DLPack: dl_device differs and copy=False");
      if (type == kDLCPU) t = t.cpu();
      else if (type == kDLCUDA) t = t.to(genesis::cuda::parse_device("cuda:" + std::to_string(id)));
      else throw py::buffer_error("DLPack: unsupported dl_device type " + std::to_string(type));
    }
  }
  if (!copy.is_none() && copy.cast<bool>() && t.is_same(self)) t = t.clone();
  if (t.device().is_cuda()) {
    if (stream.is_none() || stream.cast<long long>() != -1) t.storage().synchronize();
  } else if (!stream.is_none()) {
    throw py::buffer_error("DLPack: stream must be None for CPU tensors");
  }

  auto make = [&](auto* e) {
    e->tensor = t;
    e->shape.assign(t.shape().begin(), t.shape().end());
    e->strides.assign(t.strides().begin(), t.strides().end());
    e->managed.manager_ctx = e;
    fill(e);
  };
  if (versioned) {
    auto* e = new Export<VersionedTensor>();
    make(e);
    e->managed.version.major = 1;
    e->managed.version.minor = 0;
    e->managed.flags = t.is_read_only() ? kFlagReadOnly : 0;
    e->managed.deleter = &delete_export<VersionedTensor>;
    PyObject* cap = PyCapsule_New(&e->managed, kVersionedName, &capsule_destructor<VersionedTensor>);
    if (cap == nullptr) {
      delete e;
      throw py::error_already_set();
    }
    return py::reinterpret_steal<py::object>(cap);
  }
  if (t.is_read_only()) {
    throw py::buffer_error(
        "DLPack: this tensor is read-only (its source is read-only memory), and the legacy DLPack protocol cannot "
        "mark it so: ask for a versioned capsule (__dlpack__(max_version=(1, 0))) or export a writable copy "
        "(t.clone())");
  }
  auto* e = new Export<DLManagedTensor>();
  make(e);
  e->managed.deleter = &delete_export<DLManagedTensor>;
  PyObject* cap = PyCapsule_New(&e->managed, kLegacyName, &capsule_destructor<DLManagedTensor>);
  if (cap == nullptr) {
    delete e;
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::object>(cap);
}

// A DLTensor -> Tensor over the same memory; `release` runs when the last
// reference to the storage goes (also when the import fails). `read_only`:
// the producer flagged the memory read-only.
Tensor import_dl(const DLTensor& dl, std::function<void()> release, bool read_only) {
  // The producer's memory is handed back on every failure below.
  struct Guard {
    std::function<void()>* release;
    ~Guard() {
      if (release != nullptr) (*release)();
    }
  } guard{&release};
  const DType dtype = from_dl_dtype(dl.dtype);
  Device device;
  if (dl.device.device_type == kDLCPU || dl.device.device_type == kDLCUDAHost) {
    device = Device{};
  } else if (dl.device.device_type == kDLCUDA) {
    device = genesis::cuda::parse_device("cuda:" + std::to_string(dl.device.device_id));
  } else {
    throw py::buffer_error("DLPack: device type " + std::to_string(dl.device.device_type) + " is not supported");
  }
  if (dl.ndim < 0 || dl.ndim > kernels::kMaxDims || (dl.ndim > 0 && dl.shape == nullptr)) {
    throw py::buffer_error("DLPack: invalid tensor: ndim " + std::to_string(dl.ndim) +
                           (dl.ndim > 0 && dl.shape == nullptr ? " with a null shape" : ""));
  }
  const auto ndim = static_cast<std::size_t>(dl.ndim);
  Shape shape(dl.shape, dl.shape + ndim);
  // A producer's sizes are not trusted to fit (Note [Size overflow]).
  const std::int64_t numel = checked_numel(shape, "DLPack");
  Shape strides(ndim);
  if (dl.strides != nullptr) {
    strides.assign(dl.strides, dl.strides + ndim);
  } else {
    std::int64_t s = 1;  // NULL strides: compact row-major (spec)
    for (std::size_t d = ndim; d-- > 0;) {
      strides[d] = s;
      if (d > 0) s = checked_mul(s, std::max<std::int64_t>(shape[d], 1), "DLPack: strides");
    }
  }
  std::int64_t lo = 0, hi = 0;
  for (std::size_t d = 0; d < ndim && numel > 0; ++d) {
    const std::int64_t ext = checked_mul(shape[d] - 1, strides[d], "DLPack: tensor extent");
    if (ext < 0) lo = checked_add(lo, ext, "DLPack: tensor extent");
    else hi = checked_add(hi, ext, "DLPack: tensor extent");
  }
  const auto item = static_cast<std::int64_t>(dtype_size(dtype));
  const std::int64_t span = numel == 0 ? 0 : checked_add(hi - lo, 1, "DLPack: tensor extent");
  (void)checked_mul(span, item, "DLPack: byte size");
  (void)checked_mul(lo, item, "DLPack: byte offset");
  char* data = static_cast<char*>(dl.data) + dl.byte_offset;
  char* base = numel == 0 ? data : data + lo * item;
  if (numel > 0 && dl.data == nullptr) throw py::buffer_error("DLPack: data is null for a non-empty tensor");
  Storage storage = Storage::from_blob(base, {span}, dtype, device, [release](void*) { release(); });
  guard.release = nullptr;  // the storage's copy calls it now
  if (read_only) storage.set_read_only("DLPack tensor (flagged read-only by its producer)");
  return Tensor(std::move(storage), std::move(shape), std::move(strides), numel == 0 ? 0 : -lo);
}

// Producers' deleters may touch Python objects (NumPy's does): run them with
// the GIL, and not at all once the interpreter is gone.
template <typename Managed>
std::function<void()> releaser(Managed* managed) {
  return [managed]() {
    if (managed->deleter == nullptr || !Py_IsInitialized()) return;
    py::gil_scoped_acquire gil;
    managed->deleter(managed);
  };
}

Tensor from_capsule(py::handle cap) {
  PyObject* c = cap.ptr();
  if (PyCapsule_IsValid(c, kVersionedName)) {
    auto* managed = static_cast<VersionedTensor*>(PyCapsule_GetPointer(c, kVersionedName));
    if (managed->version.major > 1) {
      // The spec: a consumer must not read a tensor of a newer major version
      // (the capsule keeps ownership and frees it).
      throw py::buffer_error("DLPack: capsule version " + std::to_string(managed->version.major) +
                             " is newer than this consumer (1)");
    }
    if (PyCapsule_SetName(c, kVersionedUsed) != 0) throw py::error_already_set();
    return import_dl(managed->dl_tensor, releaser(managed), (managed->flags & kFlagReadOnly) != 0);
  }
  if (PyCapsule_IsValid(c, kLegacyName)) {
    auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(c, kLegacyName));
    if (PyCapsule_SetName(c, kLegacyUsed) != 0) throw py::error_already_set();
    return import_dl(managed->dl_tensor, releaser(managed), false);
  }
  throw py::value_error("from_dlpack: not a DLPack capsule, or one already consumed");
}

}  // namespace

void bind_dlpack(py::module_& m, TensorClass& cls) {
  cls.def("__dlpack__", &export_tensor, py::kw_only(), py::arg("stream") = py::none(),
          py::arg("max_version") = py::none(), py::arg("dl_device") = py::none(), py::arg("copy") = py::none(),
          "A DLPack capsule over this tensor's memory (no copy).")
      .def("__dlpack_device__", [](const Tensor& t) {
        const DLDevice d = to_dl_device(t.device());
        return py::make_tuple(static_cast<int>(d.device_type), d.device_id);
      });

  m.def(
      "from_dlpack",
      [](py::object obj) {
        if (PyCapsule_CheckExact(obj.ptr())) return from_capsule(obj);
        if (py::isinstance<Tensor>(obj)) return obj.cast<Tensor>();
        if (!py::hasattr(obj, "__dlpack__")) {
          throw py::type_error("from_dlpack: the object has no __dlpack__ method");
        }
        // The consumer's stream (the spec's `stream` argument): for a CUDA
        // producer, our current stream on its device, so it orders its work
        // before ours; the legacy default stream is spelled 1 (0 is
        // ambiguous in the spec). None for the CPU.
        py::object stream = py::none();
        if (py::hasattr(obj, "__dlpack_device__")) {
          auto dev = obj.attr("__dlpack_device__")().cast<py::tuple>();
          if (dev[0].cast<int>() == kDLCUDA) {
            const auto id = cuda::current_stream(dev[1].cast<int>()).id();
            stream = py::int_(id == 0 ? std::uintptr_t{1} : static_cast<std::uintptr_t>(id));
          }
        }
        py::object capsule;
        try {
          capsule = obj.attr("__dlpack__")(py::arg("stream") = stream, py::arg("max_version") = py::make_tuple(1, 0));
        } catch (py::error_already_set& e) {
          // Producers before DLPack 1.0 do not know max_version.
          if (!e.matches(PyExc_TypeError)) throw;
          capsule = obj.attr("__dlpack__")();
        }
        return from_capsule(capsule);
      },
      py::arg("ext_tensor"), "A tensor sharing the memory of any DLPack producer (NumPy, PyTorch, CuPy, ...).");
}

}  // namespace genesis::python
