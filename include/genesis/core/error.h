// Typed errors and the check macros that raise them.
//
// Note [Errors]: Genesis never aborts the process on bad input. Every failure
// is a C++ exception derived from genesis::Error; the Python bindings map each
// type onto a Python exception that both NumPy and PyTorch users can catch
// (python/src/py_errors.cpp): OutOfMemoryError and CudaError -> RuntimeError
// subclasses; InvalidArgumentError -> genesis.InvalidArgumentError (a
// ValueError and a RuntimeError); TypeMismatchError ->
// genesis.TypeMismatchError (a TypeError and a RuntimeError);
// DivisionByZeroError -> genesis.DivisionByZeroError (a ZeroDivisionError
// and a RuntimeError); IndexError -> IndexError; FileError -> the OSError
// subclass its errno selects (FileNotFoundError, PermissionError,
// IsADirectoryError, ...), as open() raises; any other Error ->
// RuntimeError. The check macros record file and line so that a report
// points at the check that fired; Python messages leave that location out
// (it means nothing to a Python user) and keep it in `cpp_location`.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace genesis {

/// Base of every Genesis error. `what()` is the full message including the
/// source location; `message()` is the message alone.
class Error : public std::runtime_error {
 public:
  Error(std::string message, const char* file, int line);
  const std::string& message() const noexcept { return message_; }
  const char* file() const noexcept { return file_; }
  int line() const noexcept { return line_; }

 private:
  std::string message_;
  const char* file_;
  int line_;
};

/// The allocator could not satisfy a request even after releasing its cache.
/// On a GPU the message contains "CUDA OOM".
class OutOfMemoryError : public Error {
 public:
  using Error::Error;
};

/// An argument had a wrong value (bad size, unknown device string, double
/// free, ...). Maps to Python's ValueError.
class InvalidArgumentError : public Error {
 public:
  using Error::Error;
};

/// An argument had a wrong type (dtype mismatch, ...). Maps to TypeError.
class TypeMismatchError : public Error {
 public:
  using Error::Error;
};

/// An integer division (floor_divide, remainder, fmod, div with a rounding
/// mode) by zero, which has no integer result. An InvalidArgumentError.
class DivisionByZeroError : public InvalidArgumentError {
 public:
  using InvalidArgumentError::InvalidArgumentError;
};

/// An index was out of range. Maps to Python's IndexError.
class IndexError : public Error {
 public:
  using Error::Error;
};

/// A file could not be opened, read or written. `error_number()` is the
/// errno of the failed call and `path()` the file, so that Python raises the
/// OSError subclass a user of open() expects (FileNotFoundError for a missing
/// file). An InvalidArgumentError, so C++ code that caught bad paths as bad
/// arguments still does.
class FileError : public InvalidArgumentError {
 public:
  FileError(std::string message, int error_number, std::string path, const char* file, int line)
      : InvalidArgumentError(std::move(message), file, line), error_number_(error_number), path_(std::move(path)) {}
  int error_number() const noexcept { return error_number_; }
  const std::string& path() const noexcept { return path_; }

 private:
  int error_number_;
  std::string path_;
};

/// A CUDA runtime or driver call failed. `code()` is the raw cudaError_t /
/// CUresult value.
class CudaError : public Error {
 public:
  CudaError(std::string message, int code, const char* file, int line)
      : Error(std::move(message), file, line), code_(code) {}
  int code() const noexcept { return code_; }

 private:
  int code_;
};

namespace detail {

/// Concatenates any streamable values into one string.
template <typename... Args>
std::string str_cat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

/// Out of line so that the throwing code stays out of callers' hot paths.
[[noreturn]] void throw_invalid_argument(const char* file, int line, const std::string& msg);
[[noreturn]] void throw_type_mismatch(const char* file, int line, const std::string& msg);
[[noreturn]] void throw_index_error(const char* file, int line, const std::string& msg);
[[noreturn]] void throw_out_of_memory(const char* file, int line, const std::string& msg);
[[noreturn]] void throw_file_error(const char* file, int line, const std::string& path, int err,
                                   const std::string& msg);

/// Human-readable byte count: "1.50 GiB", "512 B".
std::string format_bytes(unsigned long long bytes);

/// An address or handle as messages print it: "0x7f12...", lower-case hex.
std::string format_address(unsigned long long value);

}  // namespace detail
}  // namespace genesis

#define GENESIS_LIKELY(x) __builtin_expect(!!(x), 1)
#define GENESIS_UNLIKELY(x) __builtin_expect(!!(x), 0)

/// Throws InvalidArgumentError with the streamed message unless `cond` holds.
#define GENESIS_CHECK(cond, ...)                                               \
  do {                                                                         \
    if (GENESIS_UNLIKELY(!(cond))) {                                           \
      ::genesis::detail::throw_invalid_argument(                               \
          __FILE__, __LINE__, ::genesis::detail::str_cat(__VA_ARGS__));        \
    }                                                                          \
  } while (0)

/// Throws TypeMismatchError unless `cond` holds.
#define GENESIS_CHECK_TYPE(cond, ...)                                          \
  do {                                                                         \
    if (GENESIS_UNLIKELY(!(cond))) {                                           \
      ::genesis::detail::throw_type_mismatch(                                  \
          __FILE__, __LINE__, ::genesis::detail::str_cat(__VA_ARGS__));        \
    }                                                                          \
  } while (0)

/// Throws IndexError unless `cond` holds.
#define GENESIS_CHECK_INDEX(cond, ...)                                         \
  do {                                                                         \
    if (GENESIS_UNLIKELY(!(cond))) {                                           \
      ::genesis::detail::throw_index_error(                                    \
          __FILE__, __LINE__, ::genesis::detail::str_cat(__VA_ARGS__));        \
    }                                                                          \
  } while (0)

/// Throws FileError for `path` and the errno `err`; the message is the
/// streamed text followed by ": " and strerror(err).
#define GENESIS_THROW_FILE(path, err, ...)                                     \
  ::genesis::detail::throw_file_error(__FILE__, __LINE__, (path), (err),       \
                                      ::genesis::detail::str_cat(__VA_ARGS__))

/// Throws the given error type unconditionally.
#define GENESIS_THROW(ErrorType, ...)                                          \
  throw ErrorType(::genesis::detail::str_cat(__VA_ARGS__), __FILE__, __LINE__)
