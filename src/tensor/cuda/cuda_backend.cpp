// Installs the CUDA kernels into the CUDA table (Note [Kernel tables]).
//
// None are written yet: every entry stays null and the tensor layer answers
// "<op> is not available on cuda yet". A CUDA kernel file (src/tensor/cuda/
// *.cu, compiled only with CUDA) defines e.g.
//   void cuda_binary(const KernelContext&, BinaryOp, const StridedOperand&,
//                    const StridedOperand&, const StridedOperand&);
// and registers it here with one line inside the #if:
//   t.binary = &cuda_binary;
//
// What a CUDA kernel file can reuse (all host/device code, checked to
// compile with nvcc for sm_90): StridedOperand and the contracts in
// genesis/tensor/backend.h; cast<D>(S) and scalar_to<T>(Scalar) in
// genesis/tensor/cast.h (the same conversions as the CPU); and
// random_element<T>(params, i) in genesis/tensor/random_element.h, which
// makes a random fill identical to the CPU's. Work goes on ctx.stream
// (resolve kCurrentStream as the storage layer does); nothing may
// synchronise. tests/tensor/gpu_tensor_test.cpp is the place for tests
// that compare each CUDA entry with the CPU result.
#include "genesis/tensor/backend.h"

namespace genesis::kernels {

void install_cuda_kernels([[maybe_unused]] KernelTable& t) {
#if GENESIS_WITH_CUDA
  // t.fill = &cuda_fill;  ... one line per kernel.
#endif
}

}  // namespace genesis::kernels
