//===- NameRegex.cpp - ECMAScript patterns over names ---------------------===//
//
// Compiled with exceptions (see CMakeLists.txt): nothing thrown by std::regex
// leaves this file.
//
//===----------------------------------------------------------------------===//

#include "loom/Support/NameRegex.h"

#include <regex>

using namespace mlir::loom;

struct NameRegex::Impl {
  std::regex regex;
};

NameRegex::NameRegex(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}
NameRegex::~NameRegex() = default;

std::unique_ptr<NameRegex> NameRegex::compile(const std::string &pattern,
                                              std::string &error) {
  auto impl = std::make_unique<Impl>();
  try {
    impl->regex = std::regex(pattern, std::regex::ECMAScript);
  } catch (const std::exception &e) {
    error = e.what();
    return nullptr;
  }
  return std::unique_ptr<NameRegex>(new NameRegex(std::move(impl)));
}

bool NameRegex::search(const std::string &name) const {
  try {
    return std::regex_search(name, impl->regex);
  } catch (const std::exception &) {
    return false;
  }
}
