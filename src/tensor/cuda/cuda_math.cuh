// Device math on the compute types (float for float16/bfloat16/float32,
// double for float64), spelled out per type so that float stays float
// (expf, not exp) and nothing relies on std:: overloads in device code.
// Full-precision library functions, never the fast intrinsics (__expf):
// results then differ from the CPU's libm by at most an ulp or two.
#pragma once

#include <cuda_runtime.h>

namespace genesis::kernels::cuda_impl::dmath {

__device__ __forceinline__ float exp(float x) { return ::expf(x); }
__device__ __forceinline__ double exp(double x) { return ::exp(x); }
__device__ __forceinline__ float log(float x) { return ::logf(x); }
__device__ __forceinline__ double log(double x) { return ::log(x); }
__device__ __forceinline__ float sqrt(float x) { return ::sqrtf(x); }
__device__ __forceinline__ double sqrt(double x) { return ::sqrt(x); }
__device__ __forceinline__ float tanh(float x) { return ::tanhf(x); }
__device__ __forceinline__ double tanh(double x) { return ::tanh(x); }
__device__ __forceinline__ float sin(float x) { return ::sinf(x); }
__device__ __forceinline__ double sin(double x) { return ::sin(x); }
__device__ __forceinline__ float cos(float x) { return ::cosf(x); }
__device__ __forceinline__ double cos(double x) { return ::cos(x); }
__device__ __forceinline__ float fabs(float x) { return ::fabsf(x); }
__device__ __forceinline__ double fabs(double x) { return ::fabs(x); }
__device__ __forceinline__ float fmod(float x, float y) { return ::fmodf(x, y); }
__device__ __forceinline__ double fmod(double x, double y) { return ::fmod(x, y); }
__device__ __forceinline__ float trunc(float x) { return ::truncf(x); }
__device__ __forceinline__ double trunc(double x) { return ::trunc(x); }
__device__ __forceinline__ float floor(float x) { return ::floorf(x); }
__device__ __forceinline__ double floor(double x) { return ::floor(x); }
__device__ __forceinline__ float copysign(float x, float y) { return ::copysignf(x, y); }
__device__ __forceinline__ double copysign(double x, double y) { return ::copysign(x, y); }
__device__ __forceinline__ float pow(float x, float y) { return ::powf(x, y); }
__device__ __forceinline__ double pow(double x, double y) { return ::pow(x, y); }

}  // namespace genesis::kernels::cuda_impl::dmath
