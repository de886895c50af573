// genesis._C.SimulatedAllocator: a CachingAllocator over a SimulatedDevice (a
// fake GPU of any capacity whose addresses have no memory behind them), so
// that tests exercise statistics, snapshots, out-of-memory errors, profiling
// and leak reports through Python on machines without a GPU. Addresses it
// returns must never be dereferenced (Python only passes them back).
#include <cstddef>
#include <memory>
#include <string>

#include "py_bindings.h"
#include "genesis/memory/alloc_conf.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/simulated_device.h"

namespace genesis::python {

namespace {

struct SimulatedAllocator {
  std::shared_ptr<memory::SimulatedDevice> device;
  std::unique_ptr<memory::CachingAllocator> allocator;
};

// expandable: None (the allocator's default for the simulated device: on),
// True or False. conf: configuration text (genesis/memory/alloc_conf.h)
// applied first; the two arguments after it.
std::unique_ptr<SimulatedAllocator> make_simulated_allocator(std::size_t capacity, int index, py::object expandable,
                                                             bool thread_cache, const std::string& conf) {
  auto s = std::make_unique<SimulatedAllocator>();
  s->device = std::make_shared<memory::SimulatedDevice>(capacity, index);
  memory::AllocatorOptions opts = memory::parse_alloc_conf(conf, {}, "SimulatedAllocator(conf=...)");
  if (!thread_cache) opts.thread_cache = false;
  if (!expandable.is_none())
    opts.expandable_segments = expandable.cast<bool>() ? memory::AllocatorOptions::Expandable::kOn
                                                        : memory::AllocatorOptions::Expandable::kOff;
  s->allocator = std::make_unique<memory::CachingAllocator>(s->device, opts);
  return s;
}

}  // namespace

void bind_simulated(py::module_& m) {
  py::class_<SimulatedAllocator>(m, "SimulatedAllocator")
      .def(py::init(&make_simulated_allocator), py::arg("capacity"), py::arg("index") = 0,
           py::arg("expandable") = py::none(), py::arg("thread_cache") = true, py::arg("conf") = "")
      .def_property_readonly(
          "allocator", [](SimulatedAllocator& s) -> memory::CachingAllocator& { return *s.allocator; },
          py::return_value_policy::reference_internal)
      .def_property_readonly("capacity", [](const SimulatedAllocator& s) { return s.device->capacity(); })
      .def_property_readonly("device_bytes_in_use", [](const SimulatedAllocator& s) { return s.device->bytes_in_use(); })
      .def("create_stream", [](SimulatedAllocator& s) { return s.device->create_stream(); })
      .def(
          "submit_work", [](SimulatedAllocator& s, memory::StreamId st) { return s.device->submit_work(st); },
          py::arg("stream"))
      .def("complete_all", [](SimulatedAllocator& s) { s.device->complete_all(); })
      .def(
          "pending_work",
          [](const SimulatedAllocator& s, memory::StreamId st) {
            return s.device->submitted_work(st) - s.device->completed_work(st);
          },
          py::arg("stream"))
      .def(
          "fail_next_allocations", [](SimulatedAllocator& s, std::size_t n) { s.device->fail_next_allocations(n); },
          py::arg("n"));
}

}  // namespace genesis::python
