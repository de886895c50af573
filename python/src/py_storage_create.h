// create_storage(data, device, dtype) from Python data: nested
// lists and tuples of numbers, anything with the buffer protocol (NumPy
// arrays of any layout, bytes, bytearray, memoryview, array.array), and
// other storages.
#pragma once

#include <pybind11/pybind11.h>

#include <optional>

#include "genesis/storage/storage.h"

namespace genesis::python {

namespace py = pybind11;

/// A new storage on `device` holding `data` converted to `dtype`.
///
/// Nested sequences give the shape ([[1, 2], [3, 4]] -> (2, 2); a bare number
/// -> ()); the default dtype follows torch.tensor: float32 if any element is
/// a float, else int64 if any is an int, else bool; [] is float32 of shape
/// (0,). Buffers keep their shape and element type (unsigned 16/32/64-bit
/// integers, which Genesis has no dtype for, become int64). Raises ValueError
/// for ragged nesting, TypeError for elements that are not numbers, and
/// OverflowError for integers beyond int64 into an integer dtype. Needs the
/// GIL; records the Python caller as the allocation site.
Storage storage_from_data(py::handle data, Device device, std::optional<DType> dtype);

}  // namespace genesis::python
