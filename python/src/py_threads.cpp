// genesis.set_num_threads / get_num_threads (Note [Thread count] in
// include/genesis/core/threads.h), with PyTorch's names.
#include <string>

#include "py_bindings.h"
#include "genesis/core/error.h"
#include "genesis/core/threads.h"
#include "py_tensor_args.h"

namespace genesis::python {

void bind_threads(py::module_& m) {
  m.def(
      "set_num_threads",
      [](py::handle n) {
        std::int64_t v = 0;
        bool fits = true;
        try {
          v = to_int64(n, "set_num_threads()");  // TypeError for anything but an integer
        } catch (py::error_already_set& e) {
          if (!e.matches(PyExc_OverflowError)) throw;
          fits = false;  // beyond int64
        }
        // Out of int range: the message genesis::set_num_threads gives.
        GENESIS_CHECK(fits && v >= 1 && v <= kMaxThreads, "set_num_threads: expected a thread count from 1 to ",
                      kMaxThreads, ", got ", std::string(py::str(n)));
        set_num_threads(static_cast<int>(v));
      },
      py::arg("n"),
      "Threads the CPU backend uses from now on (1 .. 1024); a forked child inherits the setting.");
  m.def("get_num_threads", &get_num_threads,
        "Threads the CPU backend uses: set_num_threads(), else GENESIS_NUM_THREADS, else the CPUs this process "
        "may use (affinity and cgroup quota), at most 64.");
  m.def("available_cpus", &available_cpus, "CPUs this process may run on (affinity and cgroup CPU quota).");
  m.def("_cgroup_cpu_limit", &cgroup_cpu_limit, py::arg("root") = "",
        "The cgroup CPU limit read under `root` (0: none); for tests.");
}

}  // namespace genesis::python
