"""CPU threads: ``genesis.set_num_threads(n)``, ``genesis.get_num_threads()``
(PyTorch's names) and ``genesis.available_cpus()``.

The CPU backend splits large operations over ``get_num_threads()`` threads:
``set_num_threads()`` if called, else the ``GENESIS_NUM_THREADS`` environment
variable, else the CPUs this process may use (its affinity mask and its
cgroup CPU quota, as in a container limited to a few CPUs), at most 64
(Note [Thread count] in include/genesis/core/threads.h). OpenBLAS, which runs
CPU matmuls, follows the same count unless ``OPENBLAS_NUM_THREADS`` is set.
A forked child inherits the setting and starts its own threads.

An invalid ``GENESIS_NUM_THREADS`` (not a whole number from 1 to 1024) makes
``import genesis`` fail with a ValueError naming the variable: a silently
ignored setting would run with a thread count nobody chose.
"""

from . import _C

set_num_threads = _C.set_num_threads
get_num_threads = _C.get_num_threads
available_cpus = _C.available_cpus

get_num_threads()  # an invalid GENESIS_NUM_THREADS fails here, at import

__all__ = ["set_num_threads", "get_num_threads", "available_cpus"]
