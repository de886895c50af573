// The dtype table (core/dtype.h). Python builds one `genesis.dtype` object
// per entry (python/genesis/_dtype.py); names are parsed here so that Python
// and C++ accept exactly the same spellings.
#include <string>

#include "py_bindings.h"
#include "genesis/core/dtype.h"

namespace genesis::python {

void bind_dtype(py::module_& m) {
  m.def(
      "dtype_table",
      []() {
        py::list out;
        for (int i = 0; i < kNumDTypes; ++i) {
          const auto t = static_cast<DType>(i);
          out.append(py::make_tuple(i, std::string(dtype_name(t)), dtype_size(t), is_floating(t)));
        }
        return out;
      },
      "[(value, name, itemsize, is_floating_point)] for every dtype, in enum order.");
  m.def(
      "dtype_from_name", [](const std::string& name) { return static_cast<int>(dtype_from_name(name)); },
      py::arg("name"), "The enum value of a dtype name or alias; ValueError for unknown names.");
}

}  // namespace genesis::python
