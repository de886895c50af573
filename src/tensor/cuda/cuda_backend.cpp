// Installs the CUDA kernels into the CUDA table (Note [Kernel tables]).
//
// None are written yet: every entry stays null and the tensor layer answers
// "<op> is not available on cuda yet". A CUDA kernel file (src/tensor/cuda/
// *.cu, compiled only with CUDA) defines e.g.
//   void cuda_binary(const KernelContext&, BinaryOp, const StridedOperand&,
//                    const StridedOperand&, const StridedOperand&);
// and registers it here with one line inside the #if:
//   t.binary = &cuda_binary;
#include "genesis/tensor/backend.h"

namespace genesis::kernels {

void install_cuda_kernels([[maybe_unused]] KernelTable& t) {
#if GENESIS_WITH_CUDA
  // t.fill = &cuda_fill;  ... one line per kernel.
#endif
}

}  // namespace genesis::kernels
