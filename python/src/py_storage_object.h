// The Python object behind genesis.Storage, and how CPU storages and views
// hand their memory to NumPy (and memoryview, bytes, ...) without a copy.
//
// Note [Python storage objects]: a genesis.Storage holds one strong
// reference (genesis::Storage) to its StorageImpl (Note [Storage ownership]);
// `del s` drops it, and the block goes back to the pool at once when that
// was the last reference. SharedStorage and MappedStorage are subclasses
// whose Storage was made with from_blob around the mapping, so everything a
// Storage does (to, copy_, clone, views, inspect_storage, BatchStorage)
// works on them too. close() drops the object's reference; the mapping is
// released when nothing else (a NumPy array, a view, another handle) still
// uses it, so a closed storage can never leave a dangling array behind.
//
// Note [Read-only storages]: a MappedStorage opened with mode 'r' maps its
// pages PROT_READ, where a write would kill the process with SIGSEGV. The
// Python object carries a flag: exported buffers are read-only, and every
// binding that writes (copy_, copy_storage, batch_copy targets) checks
// writable_storage_arg() first, with a message about the mode; the C++ storage
// is marked read-only as well (Note [Read-only memory] in storage.h).
//
// Note [Buffer export]: the buffer protocol is implemented here rather than
// with pybind11's def_buffer, whose getbuffer can neither refuse an export
// with a Python error (a C++ exception thrown there would cross CPython's C
// frames) nor keep the memory alive on its own. Each export holds a strong
// genesis::Storage in Py_buffer::internal until the consumer releases it, so
// a NumPy array stays valid after `del storage` or close(). CUDA storages,
// closed storages and bfloat16 (no buffer format exists for it) refuse with
// BufferError; the numpy() methods turn that into a message that says what to
// do.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <vector>

#include "genesis/storage/storage.h"
#include "genesis/storage/storage_view.h"

namespace genesis::python {

namespace py = pybind11;

/// genesis.Storage (Note [Python storage objects]).
struct PyStorage {
  PyStorage() = default;
  explicit PyStorage(Storage s, bool read_only = false) : storage(std::move(s)), readonly(read_only) {}
  virtual ~PyStorage() = default;
  PyStorage(const PyStorage&) = delete;
  PyStorage& operator=(const PyStorage&) = delete;

  /// The storage; ValueError when the object was closed.
  const Storage& get() const;
  /// The class name for messages ("Storage", "SharedStorage", ...).
  virtual const char* kind() const { return "Storage"; }

  Storage storage;        // null after close()
  bool readonly = false;  // Note [Read-only storages]
};

/// genesis.StorageView: the C++ view plus the Python base object (returned by
/// .base, and the source of the read-only flag).
struct PyStorageView {
  StorageView view;
  py::object base;
  bool readonly = false;
};

/// The C++ object behind `obj`, an instance of a bound storage class `T`.
/// TypeError when `obj` is something else, or when its __init__ never ran
/// (`genesis.Storage.__new__(genesis.Storage)`), where pybind11 would hand a
/// method a reference to nothing: every storage method goes through here.
/// True when `obj` (an instance of a bound storage class) was initialised:
/// pybind11's tp_new hands out uninitialised memory for the C++ object, and
/// only a constructed holder says that __init__ ran.
bool is_initialised(py::handle obj);

template <typename T>
T& self_of(py::handle obj) {
  if (!py::isinstance<T>(obj))
    throw py::type_error("expected a " + std::string(py::str(py::type::of<T>().attr("__name__"))) + ", got " +
                         std::string(py::str(py::type::of(obj).attr("__name__"))));
  if (!is_initialised(obj))
    throw py::type_error(std::string(py::str(py::type::of(obj).attr("__name__"))) +
                         " object is not initialised (its __init__ was not called)");
  return *obj.cast<T*>();
}

/// The storage of a genesis.Storage argument; TypeError naming `what` for
/// anything else, ValueError when closed.
const Storage& storage_arg(py::handle obj, const char* what);
/// As storage_arg, and ValueError when the storage is read-only.
const Storage& writable_storage_arg(py::handle obj, const char* what);
/// Wraps a C++ storage in a new genesis.Storage.
py::object wrap_storage(Storage s);

/// The PEP 3118 format character of a dtype; nullptr for bfloat16.
const char* buffer_format(DType t) noexcept;

/// Installs the buffer protocol of Note [Buffer export] on a class whose C++
/// type is PyStorage (or a subclass) or PyStorageView.
void setup_storage_buffer(PyHeapTypeObject* type);
void setup_view_buffer(PyHeapTypeObject* type);

/// The checks behind numpy(): TypeError (CUDA: "call .cpu() first"; bfloat16)
/// or ValueError (closed) before NumPy is asked for anything.
void check_numpy_exportable(const Storage& s, const char* kind);

/// numpy.asarray(memoryview(obj)): a zero-copy array that keeps obj's memory
/// alive. NumPy is imported on first use, so genesis works without it.
py::object as_numpy(py::handle obj);

}  // namespace genesis::python
