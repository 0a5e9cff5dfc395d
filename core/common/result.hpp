// memra::Result<T> — how first-party C++ library code returns errors.
// Library code never aborts or throws across module boundaries; it returns a
// Result whose error carries a message that says what went wrong and what to do.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace memra {

enum class ErrorCode {
  invalid_argument,  // the input is malformed
  not_found,         // a named file, key or row is absent
  unsupported,       // valid input we cannot handle (yet)
  io,                // the OS or a file failed us
  corrupt,           // a file is not what it claims to be
  conflict,          // a concurrent or duplicate write
  internal,          // a bug
};

struct Error {
  ErrorCode code = ErrorCode::internal;
  std::string message;
};

inline Error make_error(ErrorCode code, std::string message) { return Error{code, std::move(message)}; }

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}           // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}       // NOLINT
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return error_; }

 private:
  Error error_;
  bool ok_ = true;
};

using Status = Result<void>;

}  // namespace memra

// Propagate an error from an expression returning Result<...>.
#define MEMRA_TRY(expr)                             \
  do {                                              \
    auto&& memra_try_result_ = (expr);              \
    if (!memra_try_result_.ok()) return memra_try_result_.error(); \
  } while (0)
