// Installs the CPU kernels into the CPU table (Note [Kernel tables]).
#include "cpu_kernels.h"

namespace genesis::kernels {

void install_cpu_kernels(KernelTable& t) {
  t.fill = &cpu::fill;
  t.copy = &cpu::copy;
  t.iota = &cpu::iota;
  t.random = &cpu::random;
  t.unary = &cpu::unary;
  t.binary = &cpu::binary;
  t.where = &cpu::where;
  t.reduce = &cpu::reduce;
  t.arg_reduce = &cpu::arg_reduce;
  t.gather = &cpu::gather;
  t.scatter = &cpu::scatter;
  t.nonzero = &cpu::nonzero;
  t.masked_select = &cpu::masked_select;
  t.matmul = &cpu::matmul;
}

}  // namespace genesis::kernels
