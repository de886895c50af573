// Pinned host memory from Python: genesis.allocate_pinned(n)
// returns a PinnedBuffer that owns a block of the pinned pool, exposes it
// through the buffer protocol (memoryview, numpy.frombuffer) and gives it back
// when the last reference (including views) is gone. genesis.is_pinned(addr) asks CUDA about any
// address. All of it needs a GPU, except is_pinned (False without one).
#include <cstddef>
#include <cstdint>

#include "py_bindings.h"
#include "genesis/memory/device_allocators.h"

namespace genesis::python {

namespace {

/// Owns one block of the pinned pool for the life of the Python object.
///
/// There is deliberately no explicit free(): memoryviews and numpy arrays
/// made through the buffer protocol keep a reference to this object, so
/// tying the memory to the object's lifetime makes a dangling view
/// impossible (pybind11 gives no hook for "last view released").
class PinnedBuffer {
 public:
  explicit PinnedBuffer(std::size_t nbytes) : nbytes_(nbytes) {
    GENESIS_CHECK(nbytes > 0, "allocate_pinned: nbytes must be positive");
    ptr_ = memory::allocate_pinned(nbytes);
  }
  ~PinnedBuffer() {
    try {
      memory::free_pinned(ptr_);
    } catch (...) {
      // free_pinned throws only for a pointer the pool does not own, which
      // cannot happen for ours; a destructor must not throw.
    }
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  void* ptr() const noexcept { return ptr_; }
  std::size_t nbytes() const noexcept { return nbytes_; }

 private:
  void* ptr_ = nullptr;  // never null after construction
  std::size_t nbytes_;
};

}  // namespace

void bind_pinned(py::module_& m) {
  py::class_<PinnedBuffer>(m, "PinnedBuffer", py::buffer_protocol(),
                           "A block of pinned (page-locked) host memory from Genesis's pinned pool.")
      .def(py::init<std::size_t>(), py::arg("nbytes"))
      .def("data_ptr", [](const PinnedBuffer& b) { return reinterpret_cast<std::uintptr_t>(b.ptr()); })
      .def_property_readonly("nbytes", &PinnedBuffer::nbytes)
      .def("__len__", &PinnedBuffer::nbytes)
      .def_buffer([](PinnedBuffer& b) {
        return py::buffer_info(b.ptr(), 1, py::format_descriptor<std::uint8_t>::format(), 1,
                               {static_cast<py::ssize_t>(b.nbytes())}, {1});
      });

  m.def(
      "is_pinned", [](std::uintptr_t address) { return memory::is_pinned(reinterpret_cast<const void*>(address)); },
      py::arg("address"));
  m.def("set_pinned_host_memory", &memory::set_pinned_host_memory, py::arg("enabled"));
  m.def("pinned_host_memory_enabled", &memory::pinned_host_memory_enabled);
}

}  // namespace genesis::python
