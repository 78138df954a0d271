//===- NameRegex.h - ECMAScript patterns over names -------------*- C++ -*-===//
//
// Users pick parameters by ECMAScript regular expression (--freeze,
// --padding-idx, and the sharding annotations to come), as they would in
// Python. std::regex reports a bad pattern by throwing, and the compiler is
// built without exceptions, so the one file that calls it (NameRegex.cpp)
// is compiled with them and catches everything here.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_SUPPORT_NAMEREGEX_H
#define LOOM_SUPPORT_NAMEREGEX_H

#include <memory>
#include <string>

namespace mlir {
namespace loom {

class NameRegex {
public:
  /// Compiles `pattern` (ECMAScript); null, with `error` set, when it is not
  /// a valid regular expression.
  static std::unique_ptr<NameRegex> compile(const std::string &pattern,
                                            std::string &error);
  ~NameRegex();

  /// True when the pattern matches anywhere in `name` (std::regex_search).
  /// A match that exceeds std::regex's limits counts as no match.
  bool search(const std::string &name) const;

private:
  struct Impl;
  explicit NameRegex(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

} // namespace loom
} // namespace mlir

#endif // LOOM_SUPPORT_NAMEREGEX_H
