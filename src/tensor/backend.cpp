// The per-device-type kernel tables (Note [Kernel tables]).
#include "genesis/tensor/backend.h"

namespace genesis::kernels {
namespace {

struct Tables {
  KernelTable cpu;
  KernelTable cuda;
  Tables() {
    install_cpu_kernels(cpu);
    install_cuda_kernels(cuda);
  }
};

const Tables& tables() {
  static const Tables t;  // thread-safe initialisation (C++11 magic statics)
  return t;
}

}  // namespace

const KernelTable& kernels_for(DeviceType type) {
  return type == DeviceType::kCUDA ? tables().cuda : tables().cpu;
}

const char* op_name(UnaryOp op) noexcept {
  switch (op) {
    case UnaryOp::kNeg: return "neg";
    case UnaryOp::kAbs: return "abs";
    case UnaryOp::kRelu: return "relu";
    case UnaryOp::kExp: return "exp";
    case UnaryOp::kLog: return "log";
    case UnaryOp::kSqrt: return "sqrt";
    case UnaryOp::kSigmoid: return "sigmoid";
    case UnaryOp::kTanh: return "tanh";
    case UnaryOp::kSin: return "sin";
    case UnaryOp::kCos: return "cos";
    case UnaryOp::kLogicalNot: return "logical_not";
    case UnaryOp::kBitwiseNot: return "bitwise_not";
  }
  return "unary";
}

const char* op_name(BinaryOp op) noexcept {
  switch (op) {
    case BinaryOp::kAdd: return "add";
    case BinaryOp::kSub: return "sub";
    case BinaryOp::kMul: return "mul";
    case BinaryOp::kDiv: return "div";
    case BinaryOp::kFloorDiv: return "floor_divide";
    case BinaryOp::kRemainder: return "remainder";
    case BinaryOp::kPow: return "pow";
    case BinaryOp::kMaximum: return "maximum";
    case BinaryOp::kMinimum: return "minimum";
    case BinaryOp::kTruncDiv: return "div(rounding_mode='trunc')";
    case BinaryOp::kFmod: return "fmod";
    case BinaryOp::kBitwiseAnd: return "bitwise_and";
    case BinaryOp::kBitwiseOr: return "bitwise_or";
    case BinaryOp::kBitwiseXor: return "bitwise_xor";
    case BinaryOp::kLeftShift: return "bitwise_left_shift";
    case BinaryOp::kRightShift: return "bitwise_right_shift";
    case BinaryOp::kEq: return "eq";
    case BinaryOp::kNe: return "ne";
    case BinaryOp::kLt: return "lt";
    case BinaryOp::kLe: return "le";
    case BinaryOp::kGt: return "gt";
    case BinaryOp::kGe: return "ge";
    case BinaryOp::kLogicalAnd: return "logical_and";
    case BinaryOp::kLogicalOr: return "logical_or";
  }
  return "binary";
}

const char* op_name(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kProd: return "prod";
    case ReduceOp::kMean: return "mean";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kAny: return "any";
    case ReduceOp::kAll: return "all";
  }
  return "reduce";
}

}  // namespace genesis::kernels
