// The DLPack C ABI for py_dlpack.cpp.
//
// Debian's libdlpack-dev provides <dlpack/dlpack.h> (scripts/setup.sh
// installs it). Machines without it (the GPU image, where packages cannot be
// installed) get the declarations below instead: the subset of the DLPack
// ABI we use, written from the DLPack specification (the struct layouts are
// the interface every producer and consumer shares, so they must match it
// field for field).
#pragma once

#include <cstdint>

#if __has_include(<dlpack/dlpack.h>)
#include <dlpack/dlpack.h>
#else
extern "C" {
typedef enum {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
} DLDeviceType;

typedef struct {
  DLDeviceType device_type;
  int32_t device_id;
} DLDevice;

typedef enum {
  kDLInt = 0U,
  kDLUInt = 1U,
  kDLFloat = 2U,
  kDLBfloat = 4U,
} DLDataTypeCode;

typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; NULL = compact row-major
  uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensor* self);
} DLManagedTensor;
}
#endif
