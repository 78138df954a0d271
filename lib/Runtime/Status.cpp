//===- Status.cpp - Errors of the Loom runtime ----------------------------===//

#include "loom/Runtime/Status.h"

using namespace loomrt;

Status Status::error(std::string message) {
  Status status;
  status.message_ = std::move(message);
  return status;
}

const std::string &Status::message() const {
  static const std::string empty;
  return message_ ? *message_ : empty;
}

Status Status::withContext(const std::string &context) const {
  if (isOk())
    return *this;
  return error(context + ": " + *message_);
}
