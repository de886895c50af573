// The CPU kernel entries (installed by cpu_backend.cpp); contracts in
// genesis/tensor/backend.h.
#pragma once

#include "genesis/tensor/backend.h"

namespace genesis::kernels::cpu {

void fill(const KernelContext& ctx, const StridedOperand& out, Scalar value);
void copy(const KernelContext& ctx, const StridedOperand& dst, const StridedOperand& src);
void iota(const KernelContext& ctx, const StridedOperand& out, Scalar start, Scalar step);
void random(const KernelContext& ctx, const StridedOperand& out, const RandomParams& params);
void unary(const KernelContext& ctx, UnaryOp op, const StridedOperand& out, const StridedOperand& in);
void binary(const KernelContext& ctx, BinaryOp op, const StridedOperand& out, const StridedOperand& a,
            const StridedOperand& b);
void where(const KernelContext& ctx, const StridedOperand& out, const StridedOperand& cond,
           const StridedOperand& a, const StridedOperand& b);
void reduce(const KernelContext& ctx, ReduceOp op, const StridedOperand& out, const StridedOperand& in);
void arg_reduce(const KernelContext& ctx, ArgReduceOp op, const StridedOperand& values,
                const StridedOperand& indices, const StridedOperand& in, int dim);
void gather(const KernelContext& ctx, const StridedOperand& out, const StridedOperand& src, const IndexArgs& index);
void scatter(const KernelContext& ctx, const StridedOperand& dst, const StridedOperand& values,
             const IndexArgs& index, bool accumulate);
void nonzero(const KernelContext& ctx, const StridedOperand& out, const StridedOperand& mask);
void masked_select(const KernelContext& ctx, const StridedOperand& out, const StridedOperand& src,
                   const StridedOperand& mask);
void matmul(const KernelContext& ctx, const StridedOperand& out, const StridedOperand& a, const StridedOperand& b,
            const MatmulParams& params);

}  // namespace genesis::kernels::cpu
