//===- Status.h - Errors of the Loom runtime --------------------*- C++ -*-===//
//
// The runtime reports every failure on user input (a corrupt plan, a missing
// file, a wrong shape) as a Status carrying a message, never by aborting.
// Plain C++17: the runtime builds without LLVM/MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_STATUS_H
#define LOOM_RUNTIME_STATUS_H

#include <optional>
#include <string>
#include <utility>

namespace loomrt {

class [[nodiscard]] Status {
public:
  /// Success.
  Status() = default;
  static Status ok() { return Status(); }
  /// A failure described by `message`.
  static Status error(std::string message);

  bool isOk() const { return !message_.has_value(); }
  explicit operator bool() const { return isOk(); }
  /// The failure's message; empty on success.
  const std::string &message() const;

  /// Prefixes the message with `context` ("loading plan.bin: ...").
  Status withContext(const std::string &context) const;

private:
  std::optional<std::string> message_;
};

/// A value or the Status explaining why there is none.
template <typename T> class [[nodiscard]] StatusOr {
public:
  StatusOr(T value) : value_(std::move(value)) {}
  StatusOr(Status status) : status_(std::move(status)) {}

  bool isOk() const { return status_.isOk(); }
  explicit operator bool() const { return isOk(); }
  const Status &status() const { return status_; }
  T &value() & { return *value_; }
  const T &value() const & { return *value_; }
  T &&value() && { return std::move(*value_); }
  T *operator->() { return &*value_; }
  T &operator*() { return *value_; }

private:
  Status status_;
  std::optional<T> value_;
};

} // namespace loomrt

#endif // LOOM_RUNTIME_STATUS_H
