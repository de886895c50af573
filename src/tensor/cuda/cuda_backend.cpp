// Installs the CUDA kernels into the CUDA table (Note [Kernel tables]).
// The kernels live in src/tensor/cuda/*.cu (compiled only with CUDA); this
// file is plain C++ so that the CPU-only build leaves every entry null and
// the tensor layer answers "<op> is not available on cuda".
#include "genesis/tensor/backend.h"

#if GENESIS_WITH_CUDA
#include "cuda_kernels.h"
#endif

namespace genesis::kernels {

void install_cuda_kernels([[maybe_unused]] KernelTable& t) {
#if GENESIS_WITH_CUDA
  t.fill = &cuda_impl::fill;
  t.copy = &cuda_impl::copy;
  t.iota = &cuda_impl::iota;
  t.random = &cuda_impl::random;
  t.unary = &cuda_impl::unary;
  t.binary = &cuda_impl::binary;
  t.where = &cuda_impl::where;
  t.reduce = &cuda_impl::reduce;
  t.arg_reduce = &cuda_impl::arg_reduce;
  t.gather = &cuda_impl::gather;
  t.gather_checks_bounds = true;  // Note [Asynchronous kernel errors]
  t.scatter = &cuda_impl::scatter;
  t.scatter_checks_bounds = true;
  t.nonzero = &cuda_impl::nonzero;
  t.masked_select = &cuda_impl::masked_select;
  t.matmul = &cuda_impl::matmul;
#endif
}

}  // namespace genesis::kernels
