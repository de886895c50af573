// inspect_storage and StorageTracker, over storage/inspect.h.
// Results go to Python as plain dicts; python/genesis/_storage_inspect.py
// turns them into StorageInfo / TrackedStorage objects.
#include <pybind11/stl.h>

#include <cstdint>
#include <string>

#include "py_bindings.h"
#include "genesis/storage/inspect.h"
#include "py_values.h"
#include "py_storage_object.h"

namespace genesis::python {

namespace {

py::dict info_to_dict(const StorageInfo& i) {
  py::dict d;
  d["shape"] = dims_to_py(i.shape);
  d["stride"] = dims_to_py(i.stride);
  d["dtype"] = dtype_object(i.dtype);
  d["device"] = device_object(i.device);
  d["nbytes"] = i.nbytes;
  d["contiguous"] = i.contiguous;
  d["data_ptr"] = i.data_ptr;
  d["use_count"] = i.use_count;
  d["pooled"] = i.pooled;
  d["pinned"] = i.pinned;
  d["pool"] = i.pool;
  d["block_size"] = i.block_size;
  d["location"] = i.location;
  d["pool_allocated"] = i.pool_allocated;
  d["pool_reserved"] = i.pool_reserved;
  d["pool_fragmentation"] = i.pool_fragmentation;
  d["text"] = i.to_string();
  return d;
}

const Storage& tracked_arg(py::handle obj, const char* what) {
  if (py::isinstance<PyStorageView>(obj)) return self_of<PyStorageView>(obj).view.base();
  return storage_arg(obj, what);
}

}  // namespace

void bind_storage_inspect(py::module_& m) {
  m.def(
      "inspect_storage",
      [](py::handle obj) {
        StorageInfo info;
        if (py::isinstance<PyStorageView>(obj)) {
          const StorageView& v = self_of<PyStorageView>(obj).view;
          py::gil_scoped_release release;
          info = inspect_storage(v);
        } else {
          const Storage s = storage_arg(obj, "inspect_storage(storage)");
          py::gil_scoped_release release;
          info = inspect_storage(s);
        }
        return info_to_dict(info);
      },
      py::arg("storage"), "StorageInfo fields as a dict, plus 'text' (the readable form).");

  py::class_<StorageTracker>(m, "StorageTracker", "C++ StorageTracker (see genesis.StorageTracker).")
      .def(py::init<>())
      .def(
          "register_storage",
          [](StorageTracker& t, py::handle s, const std::string& label) {
            t.register_storage(tracked_arg(s, "register(storage)"), label);
          },
          py::arg("storage"), py::arg("label") = "")
      .def(
          "unregister_storage",
          [](StorageTracker& t, py::handle s) { return t.unregister_storage(tracked_arg(s, "unregister(storage)")); },
          py::arg("storage"))
      .def("count", &StorageTracker::count)
      .def("total_allocated", &StorageTracker::total_allocated, py::call_guard<py::gil_scoped_release>())
      .def("clear", &StorageTracker::clear)
      .def("check_leaks", [](StorageTracker& t) {
        std::vector<TrackedStorage> leaks;
        {
          py::gil_scoped_release release;
          leaks = t.check_leaks();
        }
        py::list out;
        for (const TrackedStorage& l : leaks) {
          py::dict d;
          d["label"] = l.label;
          d["data_ptr"] = l.data_ptr;
          d["nbytes"] = l.nbytes;
          d["block_size"] = l.block_size;
          d["device"] = device_object(l.device);
          d["location"] = l.location;
          d["age_seconds"] = l.age_seconds;
          out.append(std::move(d));
        }
        return out;
      });
}

}  // namespace genesis::python
