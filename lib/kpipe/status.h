// Errors are values: the library returns them, and the command-line layer
// reports each once, as one line, and maps it to an exit status (ninja's
// `bool Load(..., std::string* err)`, with the status attached).
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

#include "kpipe/exit_status.h"

namespace kpipe {

struct Error {
  ExitStatus status = ExitStatus::kFailure;
  std::string message;
};

inline Error failure(std::string message) {
  return {ExitStatus::kFailure, std::move(message)};
}
inline Error usage_error(std::string message) {
  return {ExitStatus::kUsage, std::move(message)};
}
inline Error data_error(std::string message) {
  return {ExitStatus::kDataError, std::move(message)};
}
inline Error alert(std::string message) {
  return {ExitStatus::kAlert, std::move(message)};
}

template <typename... Args>
Error failure(fmt::format_string<Args...> f, Args&&... args) {
  return failure(fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Error usage_error(fmt::format_string<Args...> f, Args&&... args) {
  return usage_error(fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
Error data_error(fmt::format_string<Args...> f, Args&&... args) {
  return data_error(fmt::format(f, std::forward<Args>(args)...));
}

// Either nothing (success) or an Error.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error e) : error_(std::move(e)), failed_(true) {}  // NOLINT: implicit by design

  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const Error& error() const { return error_; }
  Error&& take_error() { return std::move(error_); }

 private:
  Error error_;
  bool failed_ = false;
};

// A value or an Error (std::expected arrives with C++23).
template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}                   // NOLINT: implicit by design
  Expected(Error e) : v_(std::move(e)) {}                       // NOLINT: implicit by design
  Expected(Status s) : v_(s.take_error()) { assert(!s.ok()); }  // NOLINT

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
  Error&& take_error() { return std::get<1>(std::move(v_)); }
  Status status() const { return ok() ? Status() : Status(error()); }

 private:
  std::variant<T, Error> v_;
};

}  // namespace kpipe

// Propagates a failed Status or Expected to the caller.
#define KPIPE_TRY(expr)                                                 \
  do {                                                                  \
    auto kpipe_try_result_ = (expr);                                    \
    if (!kpipe_try_result_.ok()) return kpipe_try_result_.take_error(); \
  } while (0)
