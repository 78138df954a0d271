//===- PlanParser.cpp - Reads a runtime plan ------------------------------===//
//
// Parses the format of docs/design/plan-format.md. Plans are user input (a
// file on disk, possibly truncated or corrupt), so every problem is reported
// as "<source>:<line>: <what is wrong>" and nothing is trusted: integers are
// overflow-checked, sizes are compared with the bytes actually present before
// anything is allocated from them, and parsing is a single linear pass.
//
// Only syntax and structure are checked here. Whether a kernel exists and
// accepts its operands and attributes is the backend's business.
//
//===----------------------------------------------------------------------===//

#include "loom/Runtime/Plan.h"
#include "loom/Runtime/TensorIO.h"

#include <charconv>
#include <climits>
#include <set>

using namespace loomrt;

namespace {

constexpr std::string_view kMagic = "loom-plan";
constexpr uint64_t kWeightAlignment = 64;

//===----------------------------------------------------------------------===//
// Tokens
//===----------------------------------------------------------------------===//

/// A space-separated piece of a header line. Quoted strings are decoded;
/// `quoted` keeps a string "->" apart from the keyword ->.
struct Token {
  std::string text;
  bool quoted = false;

  bool is(std::string_view keyword) const { return !quoted && text == keyword; }
};

/// `text` for an error message: printable ASCII only, and short, since it may
/// come from a garbage file.
std::string quote(std::string_view text) {
  constexpr size_t kMaxShown = 48;
  std::string result = "'";
  for (size_t i = 0; i < text.size() && i < kMaxShown; ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      result += static_cast<char>(c);
      continue;
    }
    static const char kHex[] = "0123456789abcdef";
    result += "\\x";
    result += kHex[c >> 4];
    result += kHex[c & 15];
  }
  if (text.size() > kMaxShown)
    result += "...";
  return result + "'";
}

bool isSpace(char c) { return c == ' ' || c == '\t' || c == '\r'; }

bool isWordStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

bool isDigit(char c) { return c >= '0' && c <= '9'; }

/// WORD := [A-Za-z_][A-Za-z0-9_.-]*. `inf` and `nan` are numbers.
bool isWord(std::string_view text) {
  if (text.empty() || !isWordStart(text[0]) || text == "inf" || text == "nan")
    return false;
  for (char c : text.substr(1))
    if (!isWordStart(c) && !isDigit(c) && c != '.' && c != '-')
      return false;
  return true;
}

//===----------------------------------------------------------------------===//
// Numbers
//===----------------------------------------------------------------------===//

enum class IntParse { Ok, NotAnInt, OutOfRange };

/// INT := "-"? DIGIT+, within int64.
IntParse parseInt(std::string_view text, int64_t &value) {
  bool negative = !text.empty() && text[0] == '-';
  if (negative)
    text.remove_prefix(1);
  if (text.empty())
    return IntParse::NotAnInt;
  uint64_t limit = negative ? uint64_t(INT64_MAX) + 1 : uint64_t(INT64_MAX);
  uint64_t magnitude = 0;
  bool overflow = false;
  for (char c : text) {
    if (!isDigit(c))
      return IntParse::NotAnInt;
    uint64_t digit = c - '0';
    if (magnitude > (limit - digit) / 10)
      overflow = true;
    else
      magnitude = magnitude * 10 + digit;
  }
  if (overflow)
    return IntParse::OutOfRange;
  // Two's complement negation of the magnitude, without signed overflow at
  // INT64_MIN.
  value = negative ? static_cast<int64_t>(~magnitude + 1)
                   : static_cast<int64_t>(magnitude);
  return IntParse::Ok;
}

/// FLOAT := "-"? (DIGIT+ ("." DIGIT*)? EXP? | "inf" | "nan"), with a '.' or
/// an exponent so that it differs from INT; EXP := [eE] [+-]? DIGIT+.
bool isFloatSyntax(std::string_view text) {
  if (!text.empty() && text[0] == '-')
    text.remove_prefix(1);
  if (text == "inf" || text == "nan")
    return true;
  size_t i = 0;
  auto digits = [&] {
    size_t start = i;
    while (i < text.size() && isDigit(text[i]))
      ++i;
    return i - start;
  };
  if (digits() == 0)
    return false;
  bool isFloat = false;
  if (i < text.size() && text[i] == '.') {
    ++i;
    digits();
    isFloat = true;
  }
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '+' || text[i] == '-'))
      ++i;
    if (digits() == 0)
      return false;
    isFloat = true;
  }
  return isFloat && i == text.size();
}

/// Checks that `shape`'s size in bytes fits int64, so that numElements() and
/// TensorRef::bytes() never overflow. Zero dims are skipped: the prefix
/// products numElements() computes must fit as well.
bool fitsInt64Bytes(const std::vector<int64_t> &shape, DType dtype) {
  uint64_t bytes = dtypeSize(dtype);
  for (int64_t dim : shape) {
    if (dim == 0)
      continue;
    if (uint64_t(dim) > uint64_t(INT64_MAX) / bytes)
      return false;
    bytes *= uint64_t(dim);
  }
  return true;
}

/// Byte size of a shape that passed fitsInt64Bytes.
uint64_t byteSize(const std::vector<int64_t> &shape, DType dtype) {
  return uint64_t(numElements(shape)) * dtypeSize(dtype);
}

//===----------------------------------------------------------------------===//
// The parser
//===----------------------------------------------------------------------===//

class Parser {
public:
  Parser(std::string_view bytes, const std::string &source)
      : bytes(bytes), source(source) {}

  Status parse(Plan &plan);

private:
  Status error(int line, const std::string &what) const {
    return Status::error(source + ":" + std::to_string(line) + ": " + what);
  }
  Status error(const std::string &what) const { return error(line, what); }

  // Lines.
  Status nextLine(bool &eof);
  Status tokenize(std::string_view text);
  Status expectLine(const char *expected);
  Status expectTokens(size_t count, const char *usage) const;

  // Pieces of lines.
  Status parseInteger(const Token &token, int64_t min, int64_t max,
                      const char *what, int64_t &value) const;
  Status parseDType(const Token &token, DType &dtype) const;
  Status parseShape(std::string_view text, DType dtype,
                    std::vector<int64_t> &shape) const;
  Status parseIntList(std::string_view text, std::vector<int64_t> &values,
                      const std::string &context) const;
  Status parseRef(const Token &token, const RankProgram &rank,
                  TensorRef &ref) const;
  Status parseAttr(const Token &token, Attributes &attrs) const;
  Status parseValue(const Token &token, int64_t defined, int &value) const;
  Status parseString(const Token &token, const char *what,
                     std::string &text) const;

  // Sections.
  Status parseHeader(Plan &plan);
  Status parseWeight(Plan &plan);
  Status checkCopies(const Plan &plan) const;
  Status checkSlices(const Plan &plan) const;
  Status parseGroups(Plan &plan);
  Status parseRank(Plan &plan);
  Status parseBinding(const RankProgram &rank, std::set<std::string> &names,
                      Binding &binding);
  Status parseKernel(const RankProgram &rank, Instruction &inst,
                     bool &hasBlock);
  Status checkGroups(const Plan &plan) const;
  Status parseProgram(Instruction &inst);
  Status parseProgramOp(Instruction &inst);
  Status parseData(Plan &plan);

  std::string_view bytes;
  const std::string &source;
  /// Start of the next line.
  size_t pos = 0;
  /// Number of the current line (1-based); 0 before the first.
  int line = 0;
  /// Whether the current line ended with a newline.
  bool newline = false;
  std::vector<Token> tokens;
  /// The plan's weights so far, for weight references.
  const std::vector<Weight> *weights = nullptr;
  /// Each weight's line, to blame it when the data section (known only at the
  /// end) does not hold the weight.
  std::vector<int> weightLines;
  /// The line of each group, for errors found once the ranks are known.
  std::vector<int> groupLines;
  /// The plan's version: version 1 has neither groups nor collectives.
  int version = kPlanVersion;
};

/// Reads lines until one has tokens. `eof` is set (and `line` points past
/// the last line) when there are none.
Status Parser::nextLine(bool &eof) {
  eof = false;
  while (pos < bytes.size()) {
    size_t end = bytes.find('\n', pos);
    newline = end != std::string_view::npos;
    if (!newline)
      end = bytes.size();
    std::string_view text = bytes.substr(pos, end - pos);
    pos = newline ? end + 1 : end;
    if (line == INT_MAX - 1)
      return error("too many lines");
    ++line;
    if (Status status = tokenize(text); !status)
      return status;
    if (!tokens.empty())
      return Status::ok();
  }
  ++line;
  eof = true;
  return Status::ok();
}

Status Parser::tokenize(std::string_view text) {
  tokens.clear();
  size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    if (isSpace(c)) {
      ++i;
      continue;
    }
    if (c == '#')
      break;
    Token token;
    if (c == '"') {
      token.quoted = true;
      for (++i;; ++i) {
        if (i == text.size())
          return error("unterminated string");
        if (text[i] == '"')
          break;
        if (text[i] != '\\') {
          token.text += text[i];
          continue;
        }
        if (++i == text.size())
          return error("unterminated string");
        if (text[i] == 'n')
          token.text += '\n';
        else if (text[i] == '"' || text[i] == '\\')
          token.text += text[i];
        else
          return error("unknown escape " + quote(text.substr(i - 1, 2)) +
                       " in a string");
      }
      ++i;
      if (i < text.size() && !isSpace(text[i]) && text[i] != '#')
        return error("expected a space after a string");
    } else {
      size_t start = i;
      while (i < text.size() && !isSpace(text[i]) && text[i] != '#' &&
             text[i] != '"')
        ++i;
      if (i < text.size() && text[i] == '"')
        return error("unexpected '\"' in " +
                     quote(text.substr(start, i + 1 - start)));
      token.text = std::string(text.substr(start, i - start));
    }
    tokens.push_back(std::move(token));
  }
  return Status::ok();
}

/// Reads the next line; the end of the file is an error naming `expected`.
Status Parser::expectLine(const char *expected) {
  bool eof;
  if (Status status = nextLine(eof); !status)
    return status;
  if (eof)
    return error(std::string("unexpected end of file, expected ") + expected);
  return Status::ok();
}

Status Parser::expectTokens(size_t count, const char *usage) const {
  if (tokens.size() != count)
    return error(std::string("expected '") + usage + "'");
  return Status::ok();
}

Status Parser::parseInteger(const Token &token, int64_t min, int64_t max,
                            const char *what, int64_t &value) const {
  IntParse result =
      token.quoted ? IntParse::NotAnInt : parseInt(token.text, value);
  if (result == IntParse::NotAnInt)
    return error(std::string("expected ") + what + ", got " +
                 quote(token.text));
  if (result == IntParse::OutOfRange || value < min || value > max)
    return error(quote(token.text) + " is out of range for " + what);
  return Status::ok();
}

Status Parser::parseDType(const Token &token, DType &dtype) const {
  if (token.quoted || !loomrt::parseDType(token.text, dtype))
    return error("unknown dtype " + quote(token.text) +
                 " (expected f16, bf16, f32, f64, i1, i32 or i64)");
  return Status::ok();
}

Status Parser::parseIntList(std::string_view text, std::vector<int64_t> &values,
                            const std::string &context) const {
  auto bad = [&] {
    return error("expected a list like [1,2,3] in " + context + ", got " +
                 quote(text));
  };
  if (text.size() < 2 || text.front() != '[' || text.back() != ']')
    return bad();
  std::string_view inner = text.substr(1, text.size() - 2);
  values.clear();
  if (inner.empty())
    return Status::ok();
  while (true) {
    size_t comma = inner.find(',');
    std::string_view item = inner.substr(0, comma);
    int64_t value;
    IntParse result = parseInt(item, value);
    if (result == IntParse::NotAnInt)
      return bad();
    if (result == IntParse::OutOfRange)
      return error("integer " + quote(item) + " in " + context +
                   " is out of range");
    values.push_back(value);
    if (comma == std::string_view::npos)
      return Status::ok();
    inner.remove_prefix(comma + 1);
  }
}

Status Parser::parseShape(std::string_view text, DType dtype,
                          std::vector<int64_t> &shape) const {
  if (Status status = parseIntList(text, shape, "a shape"); !status)
    return status;
  for (int64_t dim : shape)
    if (dim < 0)
      return error("negative dimension " + std::to_string(dim) + " in shape " +
                   quote(text));
  if (!fitsInt64Bytes(shape, dtype))
    return error("shape " + quote(text) + " of " + dtypeName(dtype) +
                 " is too large");
  return Status::ok();
}

/// REF := ("a" INT | "w" INT) ":" DTYPE SHAPE, checked against the rank's
/// arena or the plan's weights.
Status Parser::parseRef(const Token &token, const RankProgram &rank,
                        TensorRef &ref) const {
  const std::string &text = token.text;
  size_t colon = text.find(':');
  size_t bracket = text.find('[', colon == std::string::npos ? 0 : colon);
  if (token.quoted || text.size() < 2 || (text[0] != 'a' && text[0] != 'w') ||
      colon == std::string::npos || bracket == std::string::npos)
    return error("expected a tensor reference like a0:f32[8,128] or "
                 "w0:f32[8], got " +
                 quote(text));
  ref.space =
      text[0] == 'a' ? TensorRef::Space::Arena : TensorRef::Space::Weight;
  int64_t number;
  if (Status status = parseInteger(Token{text.substr(1, colon - 1)}, 0,
                                   INT64_MAX, "an offset or weight id", number);
      !status)
    return status;
  ref.offset = uint64_t(number);
  if (Status status = parseDType(
          Token{text.substr(colon + 1, bracket - colon - 1)}, ref.dtype);
      !status)
    return status;
  if (Status status = parseShape(std::string_view(text).substr(bracket),
                                 ref.dtype, ref.shape);
      !status)
    return status;

  uint64_t bytes = ref.bytes();
  if (ref.space == TensorRef::Space::Arena) {
    // Both terms are at most INT64_MAX, so the sum cannot wrap.
    if (ref.offset + bytes > rank.arenaBytes)
      return error("arena reference " + text + " ends at byte " +
                   std::to_string(ref.offset + bytes) +
                   ", past the rank's arena of " +
                   std::to_string(rank.arenaBytes) + " bytes");
    return Status::ok();
  }
  if (ref.offset >= weights->size())
    return error("weight reference " + text + " names weight " +
                 std::to_string(ref.offset) + ", but the plan has " +
                 std::to_string(weights->size()) + " weights");
  const Weight &weight = (*weights)[ref.offset];
  if (bytes != weight.bytes)
    return error("weight reference " + text + " views " +
                 std::to_string(bytes) + " bytes, but weight " +
                 std::to_string(ref.offset) + " has " +
                 std::to_string(weight.bytes) + " bytes");
  return Status::ok();
}

/// attr := KEY "=" (INT | FLOAT | "[" INT ("," INT)* "]" | "[]" | WORD).
Status Parser::parseAttr(const Token &token, Attributes &attrs) const {
  size_t equals = token.quoted ? std::string::npos : token.text.find('=');
  if (equals == std::string::npos)
    return error("expected an attribute like key=value, got " +
                 quote(token.text));
  std::string key = token.text.substr(0, equals);
  std::string_view value = std::string_view(token.text).substr(equals + 1);
  if (!isWord(key))
    return error("bad attribute name " + quote(key));
  if (attrs.count(key))
    return error("duplicate attribute " + quote(key));

  if (!value.empty() && value[0] == '[') {
    std::vector<int64_t> list;
    if (Status status = parseIntList(value, list, "attribute " + quote(key));
        !status)
      return status;
    attrs.emplace(key, std::move(list));
    return Status::ok();
  }
  int64_t integer;
  switch (parseInt(value, integer)) {
  case IntParse::Ok:
    attrs.emplace(key, integer);
    return Status::ok();
  case IntParse::OutOfRange:
    return error("integer " + quote(value) + " of attribute " + quote(key) +
                 " is out of range");
  case IntParse::NotAnInt:
    break;
  }
  if (isFloatSyntax(value)) {
    double number;
    std::from_chars_result result =
        std::from_chars(value.data(), value.data() + value.size(), number);
    if (result.ec != std::errc() || result.ptr != value.data() + value.size())
      return error("float " + quote(value) + " of attribute " + quote(key) +
                   " is out of range");
    attrs.emplace(key, number);
    return Status::ok();
  }
  if (isWord(value)) {
    attrs.emplace(key, std::string(value));
    return Status::ok();
  }
  return error("bad value " + quote(value) + " for attribute " + quote(key) +
               " (expected an integer, a float, a list like [1,2] or a word)");
}

/// A program value "%N" that must be one of the `defined` values so far.
Status Parser::parseValue(const Token &token, int64_t defined,
                          int &value) const {
  if (token.quoted || token.text.empty() || token.text[0] != '%')
    return error("expected a program value like %0, got " + quote(token.text));
  int64_t number;
  if (parseInt(std::string_view(token.text).substr(1), number) !=
          IntParse::Ok ||
      number < 0)
    return error("expected a program value like %0, got " + quote(token.text));
  if (number >= defined || number > INT_MAX)
    return error("program value " + token.text +
                 " is used before it is defined");
  value = static_cast<int>(number);
  return Status::ok();
}

Status Parser::parseString(const Token &token, const char *what,
                           std::string &text) const {
  if (!token.quoted)
    return error(std::string("expected ") + what + " in double quotes, got " +
                 quote(token.text));
  text = token.text;
  return Status::ok();
}

//===----------------------------------------------------------------------===//
// Sections
//===----------------------------------------------------------------------===//

/// "loom-plan" VERSION, then "weights" COUNT and the weight lines.
Status Parser::parseHeader(Plan &plan) {
  if (bytes.empty())
    return error(1, "empty file, expected 'loom-plan " +
                        std::to_string(kPlanVersion) + "'");
  if (!looksLikePlan(bytes))
    return error(1, "not a plan: the file does not start with 'loom-plan'");
  if (Status status = expectLine("'loom-plan'"); !status)
    return status;
  if (!tokens[0].is(kMagic))
    return error("expected 'loom-plan VERSION', got " + quote(tokens[0].text));
  if (Status status = expectTokens(2, "loom-plan VERSION"); !status)
    return status;
  int64_t version;
  if (Status status = parseInteger(tokens[1], INT64_MIN, INT64_MAX,
                                   "a plan version", version);
      !status)
    return status;
  if (version > kPlanVersion)
    return error("plan version " + std::to_string(version) +
                 " is newer than this runtime (" +
                 std::to_string(kPlanVersion) + ")");
  if (version < 1)
    return error("unsupported plan version " + std::to_string(version));
  plan.version = static_cast<int>(version);

  if (Status status = expectLine("'weights COUNT'"); !status)
    return status;
  if (!tokens[0].is("weights"))
    return error("expected 'weights COUNT', got " + quote(tokens[0].text));
  if (Status status = expectTokens(2, "weights COUNT"); !status)
    return status;
  int64_t count;
  if (Status status =
          parseInteger(tokens[1], 0, INT64_MAX, "a weight count", count);
      !status)
    return status;
  // No reserve(count): the count is untrusted, and every weight needs a line.
  for (int64_t id = 0; id < count; ++id) {
    if (Status status = expectLine("a 'weight' line"); !status)
      return status;
    if (!tokens[0].is("weight"))
      return error("expected " + std::to_string(count) + " weight lines, got " +
                   quote(tokens[0].text));
    if (Status status = parseWeight(plan); !status)
      return status;
  }
  if (Status status = checkCopies(plan); !status)
    return status;
  return checkSlices(plan);
}

/// checkWeightSlices, blaming the line of the weight it names.
Status Parser::checkSlices(const Plan &plan) const {
  size_t culprit = 0;
  if (Status status = checkWeightSlices(plan, &culprit); !status)
    return error(weightLines[culprit], status.message());
  return Status::ok();
}

/// A `cast_of` copy is bf16 of its source's shape (or a block of the same
/// tensor), and its source an f32 or f64 weight that is no copy itself;
/// both are state or neither (the runtime rewrites a copy when its source
/// is set).
Status Parser::checkCopies(const Plan &plan) const {
  for (size_t id = 0; id < plan.weights.size(); ++id) {
    const Weight &copy = plan.weights[id];
    if (copy.castOf < 0)
      continue;
    std::string what = "weight " + std::to_string(id) + " is a cast of ";
    if (uint64_t(copy.castOf) >= plan.weights.size() ||
        uint64_t(copy.castOf) == id)
      return error(weightLines[id],
                   what + "weight " + std::to_string(copy.castOf) +
                       ", which is not another weight of the plan");
    const Weight &source = plan.weights[copy.castOf];
    what += "weight " + std::to_string(copy.castOf) + " ";
    if (copy.dtype != DType::BF16 ||
        (source.dtype != DType::F32 && source.dtype != DType::F64) ||
        source.castOf >= 0)
      return error(weightLines[id],
                   what + "(" + dtypeName(source.dtype) +
                       "), but copies are "
                       "bf16 casts of f32 or f64 weights that are no "
                       "copies themselves");
    // (Whether a copy of another block than its source's is a block of
    // the same tensor is checked with the slices, checkWeightSlices.)
    if ((copy.shape != source.shape && !copy.isSlice() && !source.isSlice()) ||
        copy.state != source.state)
      return error(weightLines[id],
                   what + "of another shape or another kind (state or not)");
  }
  return Status::ok();
}

/// "weight" ID STRING DTYPE SHAPE "offset" INT "bytes" INT "state"?
/// ("cast_of" ID)? ("slice" OFFSETS "of" SHAPE)?.
Status Parser::parseWeight(Plan &plan) {
  const char *usage = "weight ID \"NAME\" DTYPE SHAPE offset INT bytes INT "
                      "[state] [cast_of ID] [slice [OFFSET,...] of SHAPE]";
  size_t next = 9;
  Weight weight;
  if (tokens.size() > next && tokens[next].is("state")) {
    weight.state = true;
    ++next;
  }
  if (tokens.size() >= next + 2 && tokens[next].is("cast_of")) {
    if (Status status = parseInteger(tokens[next + 1], 0, INT64_MAX,
                                     "a weight id", weight.castOf);
        !status)
      return status;
    next += 2;
  }
  size_t slice = 0;
  if (tokens.size() >= next + 4 && tokens[next].is("slice") &&
      tokens[next + 2].is("of")) {
    slice = next;
    next += 4;
  }
  if (tokens.size() != next || !tokens[5].is("offset") ||
      !tokens[7].is("bytes"))
    return error(std::string("expected '") + usage + "'");
  int64_t id, offset, bytes;
  if (Status status = parseInteger(tokens[1], 0, INT64_MAX, "a weight id", id);
      !status)
    return status;
  if (uint64_t(id) != plan.weights.size())
    return error("weight id " + std::to_string(id) + " where " +
                 std::to_string(plan.weights.size()) +
                 " was expected (ids count up from 0)");
  if (Status status = parseString(tokens[2], "a weight name", weight.name);
      !status)
    return status;
  if (Status status = parseDType(tokens[3], weight.dtype); !status)
    return status;
  if (Status status = parseShape(tokens[4].text, weight.dtype, weight.shape);
      !status)
    return status;
  if (Status status =
          parseInteger(tokens[6], 0, INT64_MAX, "a weight offset", offset);
      !status)
    return status;
  if (Status status =
          parseInteger(tokens[8], 0, INT64_MAX, "a weight byte count", bytes);
      !status)
    return status;
  weight.offset = uint64_t(offset);
  weight.bytes = uint64_t(bytes);
  if (weight.offset % kWeightAlignment != 0)
    return error("weight " + std::to_string(id) + " offset " +
                 std::to_string(offset) + " is not a multiple of " +
                 std::to_string(kWeightAlignment));
  uint64_t expected = byteSize(weight.shape, weight.dtype);
  if (weight.bytes != expected)
    return error("weight " + std::to_string(id) + " has " +
                 std::to_string(bytes) + " bytes, but " +
                 dtypeName(weight.dtype) + shapeString(weight.shape) +
                 " needs " + std::to_string(expected));
  if (slice) {
    // Bounds and ranks are checked with the other slices (checkSlices).
    if (plan.version < 4)
      return error("'slice' needs plan version 4");
    if (Status status = parseIntList(tokens[slice + 1].text,
                                     weight.sliceOffsets, "a slice's offsets");
        !status)
      return status;
    for (int64_t offset : weight.sliceOffsets)
      if (offset < 0)
        return error("negative offset " + std::to_string(offset) +
                     " in slice " + quote(tokens[slice + 1].text));
    if (Status status = parseShape(tokens[slice + 3].text, weight.dtype,
                                   weight.globalShape);
        !status)
      return status;
    if (weight.globalShape.empty())
      return error("weight " + std::to_string(id) +
                   " is a slice of a scalar; only tensors have slices");
  }
  plan.weights.push_back(std::move(weight));
  weightLines.push_back(line);
  return Status::ok();
}

/// "groups" COUNT, then COUNT lines "group" ID "[" RANK ("," RANK)* "]".
Status Parser::parseGroups(Plan &plan) {
  if (version < 2)
    return error("'groups' needs plan version 2");
  if (Status status = expectTokens(2, "groups COUNT"); !status)
    return status;
  int64_t count;
  if (Status status =
          parseInteger(tokens[1], 0, INT64_MAX, "a group count", count);
      !status)
    return status;
  for (int64_t id = 0; id < count; ++id) {
    if (Status status = expectLine("a 'group' line"); !status)
      return status;
    if (!tokens[0].is("group"))
      return error("expected " + std::to_string(count) + " group lines, got " +
                   quote(tokens[0].text));
    if (Status status = expectTokens(3, "group ID [RANK,...]"); !status)
      return status;
    int64_t number;
    if (Status status =
            parseInteger(tokens[1], 0, INT64_MAX, "a group id", number);
        !status)
      return status;
    if (uint64_t(number) != plan.groups.size())
      return error("group id " + std::to_string(number) + " where " +
                   std::to_string(plan.groups.size()) +
                   " was expected (ids count up from 0)");
    std::vector<int64_t> members;
    std::string context = "group " + std::to_string(number);
    if (Status status = parseIntList(tokens[2].text, members, context); !status)
      return status;
    if (members.empty())
      return error(context + " has no ranks");
    std::vector<int> ranks;
    for (int64_t member : members) {
      if (member < 0 || member > INT_MAX)
        return error(context + " has rank " + std::to_string(member) +
                     ", out of range");
      if (!ranks.empty() && member <= ranks.back())
        return error(context + " must list ranks in increasing order, once");
      ranks.push_back(static_cast<int>(member));
    }
    plan.groups.push_back(std::move(ranks));
    groupLines.push_back(line);
  }
  return Status::ok();
}

/// Every group's ranks exist (groups precede the ranks in the file).
Status Parser::checkGroups(const Plan &plan) const {
  for (size_t id = 0; id < plan.groups.size(); ++id)
    if (size_t(plan.groups[id].back()) >= plan.ranks.size())
      return error(groupLines[id],
                   "group " + std::to_string(id) + " names rank " +
                       std::to_string(plan.groups[id].back()) +
                       ", but the plan has " +
                       std::to_string(plan.ranks.size()) + " ranks");
  return Status::ok();
}

/// "rank" INT "arena" INT ["gradients" INT], inputs, outputs, instructions,
/// "end".
Status Parser::parseRank(Plan &plan) {
  const char *usage = "rank INT arena INT [gradients INT]";
  if (tokens.size() != 6)
    if (Status status = expectTokens(4, usage); !status)
      return status;
  if (!tokens[2].is("arena") ||
      (tokens.size() == 6 && !tokens[4].is("gradients")))
    return error(std::string("expected '") + usage + "'");
  RankProgram rank;
  int64_t number, arena;
  if (Status status =
          parseInteger(tokens[1], 0, INT64_MAX, "a rank number", number);
      !status)
    return status;
  if (uint64_t(number) != plan.ranks.size())
    return error("rank " + std::to_string(number) + " where rank " +
                 std::to_string(plan.ranks.size()) +
                 " was expected (ranks appear in order from 0)");
  if (Status status =
          parseInteger(tokens[3], 0, INT64_MAX, "an arena size", arena);
      !status)
    return status;
  rank.rank = static_cast<int>(number);
  rank.arenaBytes = uint64_t(arena);
  if (tokens.size() == 6)
    if (Status status = parseInteger(tokens[5], 0, INT64_MAX, "a gradient size",
                                     rank.gradientBytes);
        !status)
      return status;

  enum class Section {
    Inputs,
    Outputs,
    Instructions
  } section = Section::Inputs;
  std::set<std::string> inputNames, outputNames;
  std::string endOfRank = "'end' of rank " + std::to_string(number);
  while (true) {
    if (Status status = expectLine(endOfRank.c_str()); !status)
      return status;
    const Token &keyword = tokens[0];
    if (keyword.is("end")) {
      if (Status status = expectTokens(1, "end"); !status)
        return status;
      plan.ranks.push_back(std::move(rank));
      return Status::ok();
    }
    if (keyword.is("input")) {
      if (section != Section::Inputs)
        return error("'input' after 'output' or 'kernel' lines");
      Binding binding;
      if (Status status = parseBinding(rank, inputNames, binding); !status)
        return status;
      // Inputs are copied into the arena before the first instruction.
      if (binding.ref.space != TensorRef::Space::Arena)
        return error("input " + quote(binding.name) +
                     " must be an arena reference");
      rank.inputs.push_back(std::move(binding));
    } else if (keyword.is("output")) {
      if (section == Section::Instructions)
        return error("'output' after 'kernel' lines");
      section = Section::Outputs;
      Binding binding;
      if (Status status = parseBinding(rank, outputNames, binding); !status)
        return status;
      rank.outputs.push_back(std::move(binding));
    } else if (keyword.is("kernel") || keyword.is("collective")) {
      section = Section::Instructions;
      Instruction inst;
      inst.line = line;
      if (keyword.is("collective")) {
        if (version < 2)
          return error("'collective' needs plan version 2");
        inst.kind = Instruction::Kind::Collective;
      }
      bool hasBlock;
      if (Status status = parseKernel(rank, inst, hasBlock); !status)
        return status;
      if (hasBlock) {
        if (inst.kind == Instruction::Kind::Collective)
          return error("a collective has no '{' block");
        if (Status status = parseProgram(inst); !status)
          return status;
      }
      rank.instructions.push_back(std::move(inst));
    } else if (keyword.is("rank") || keyword.is("data")) {
      return error("missing 'end' of rank " + std::to_string(number) +
                   " before '" + keyword.text + "'");
    } else {
      return error("expected 'input', 'output', 'kernel', 'collective' or "
                   "'end', got " +
                   quote(keyword.text));
    }
  }
}

/// ("input" | "output") STRING REF, with names unique per rank; an input
/// may end with "rows=" INT (version 3).
Status Parser::parseBinding(const RankProgram &rank,
                            std::set<std::string> &names, Binding &binding) {
  const std::string &keyword = tokens[0].text;
  std::string usage = keyword + " \"NAME\" REF";
  if (tokens.size() != 3 && !(keyword == "input" && tokens.size() == 4))
    return error("expected '" + usage + "'");
  if (Status status = parseString(tokens[1], "a name", binding.name); !status)
    return status;
  if (!names.insert(binding.name).second)
    return error("duplicate " + keyword + " " + quote(binding.name));
  if (Status status = parseRef(tokens[2], rank, binding.ref); !status)
    return status;
  if (tokens.size() == 3)
    return Status::ok();
  const Token &rows = tokens[3];
  if (rows.quoted || rows.text.compare(0, 5, "rows=") != 0)
    return error("expected 'rows=OFFSET' after input " + quote(binding.name) +
                 ", got " + quote(rows.text));
  if (version < 3)
    return error("'rows=' needs plan version 3");
  if (binding.ref.shape.empty())
    return error("input " + quote(binding.name) +
                 " is a scalar and has no batch rows");
  Token offset;
  offset.text = rows.text.substr(5);
  return parseInteger(offset, 0, INT64_MAX, "a batch row offset",
                      binding.batchOffset);
}

/// "kernel" NAME REF* "->" REF* attr* ("loc" STRING)? ("action" STRING)?
/// "{"?
Status Parser::parseKernel(const RankProgram &rank, Instruction &inst,
                           bool &hasBlock) {
  size_t count = tokens.size();
  if (count < 2 || tokens[1].quoted || !isWord(tokens[1].text))
    return error("expected a name after '" + tokens[0].text + "'");
  inst.kernel = tokens[1].text;
  size_t i = 2;
  for (; i < count && !tokens[i].is("->"); ++i) {
    TensorRef ref;
    if (Status status = parseRef(tokens[i], rank, ref); !status)
      return status;
    inst.inputs.push_back(std::move(ref));
  }
  if (i == count)
    return error("missing '->' between a kernel's inputs and outputs");
  auto isAttr = [&](size_t k) {
    return !tokens[k].quoted && tokens[k].text.find('=') != std::string::npos;
  };
  for (++i; i < count && !tokens[i].is("loc") && !tokens[i].is("action") &&
            !tokens[i].is("{") && !isAttr(i);
       ++i) {
    TensorRef ref;
    if (Status status = parseRef(tokens[i], rank, ref); !status)
      return status;
    if (ref.space == TensorRef::Space::Weight && !(*weights)[ref.offset].state)
      return error("kernel output " + tokens[i].text + " writes weight " +
                   std::to_string(ref.offset) +
                   ", which is not marked 'state' (read-only)");
    inst.outputs.push_back(std::move(ref));
  }
  for (; i < count && isAttr(i); ++i)
    if (Status status = parseAttr(tokens[i], inst.attrs); !status)
      return status;
  if (i < count && tokens[i].is("loc")) {
    if (i + 1 == count)
      return error("missing string after 'loc'");
    if (Status status = parseString(tokens[i + 1], "a loc", inst.loc); !status)
      return status;
    i += 2;
  }
  if (i < count && tokens[i].is("action")) {
    if (i + 1 == count)
      return error("missing string after 'action'");
    if (Status status = parseString(tokens[i + 1], "an action", inst.action);
        !status)
      return status;
    i += 2;
  }
  hasBlock = i < count && tokens[i].is("{");
  if (hasBlock)
    ++i;
  if (i < count)
    return error("unexpected " + quote(tokens[i].text) +
                 " in a kernel line (expected inputs -> outputs, then "
                 "attributes, 'loc \"...\"', 'action \"...\"' and '{')");
  return Status::ok();
}

/// The lines of a "{" ... "}" block: ops, then one "yield".
Status Parser::parseProgram(Instruction &inst) {
  bool yielded = false;
  while (true) {
    bool eof;
    if (Status status = nextLine(eof); !status)
      return status;
    if (eof)
      return error(inst.line, "program block without a closing '}'");
    if (tokens[0].is("}")) {
      if (Status status = expectTokens(1, "}"); !status)
        return status;
      if (!yielded)
        return error("program block without 'yield'");
      return Status::ok();
    }
    if (yielded)
      return error("expected '}' after 'yield'");
    if (!tokens[0].is("yield")) {
      if (Status status = parseProgramOp(inst); !status)
        return status;
      continue;
    }
    if (tokens.size() < 2)
      return error("'yield' needs at least one value");
    int64_t defined =
        int64_t(inst.inputs.size()) + int64_t(inst.program.size());
    for (size_t i = 1; i < tokens.size(); ++i) {
      int value;
      if (Status status = parseValue(tokens[i], defined, value); !status)
        return status;
      inst.yields.push_back(value);
    }
    yielded = true;
  }
}

/// "%" INT "=" OP DTYPE ("%" INT)* attr*.
Status Parser::parseProgramOp(Instruction &inst) {
  const char *usage = "expected '%N = OP DTYPE OPERANDS ATTRIBUTES', "
                      "'yield VALUES' or '}' in a program block";
  if (tokens.size() < 4 || !tokens[1].is("=") || tokens[0].quoted ||
      tokens[0].text.empty() || tokens[0].text[0] != '%')
    return error(usage);
  int64_t defined = int64_t(inst.inputs.size()) + int64_t(inst.program.size());
  int64_t number;
  if (parseInt(std::string_view(tokens[0].text).substr(1), number) !=
      IntParse::Ok)
    return error(usage);
  if (number != defined)
    return error("program line defines " + tokens[0].text + ", expected %" +
                 std::to_string(defined) + " (values are numbered in order)");
  if (defined >= INT_MAX)
    return error("too many program values");
  ProgramOp op;
  if (tokens[2].quoted || !isWord(tokens[2].text))
    return error("bad program op " + quote(tokens[2].text));
  op.op = tokens[2].text;
  if (Status status = parseDType(tokens[3], op.dtype); !status)
    return status;
  size_t i = 4;
  for (; i < tokens.size() && !tokens[i].quoted &&
         tokens[i].text.find('=') == std::string::npos;
       ++i) {
    int value;
    if (Status status = parseValue(tokens[i], defined, value); !status)
      return status;
    op.operands.push_back(value);
  }
  for (; i < tokens.size(); ++i)
    if (Status status = parseAttr(tokens[i], op.attrs); !status)
      return status;
  inst.program.push_back(std::move(op));
  return Status::ok();
}

/// "data" BYTES, then exactly BYTES raw bytes to the end of the file.
Status Parser::parseData(Plan &plan) {
  if (Status status = expectTokens(2, "data BYTES"); !status)
    return status;
  int64_t size;
  if (Status status =
          parseInteger(tokens[1], 0, INT64_MAX, "a data size", size);
      !status)
    return status;
  if (!newline)
    return error("missing newline after the data line");
  uint64_t expected = uint64_t(size), actual = bytes.size() - pos;
  if (actual < expected)
    return error("truncated file: the data section should have " +
                 std::to_string(expected) + " bytes, but only " +
                 std::to_string(actual) + " follow the data line");
  if (actual > expected)
    return error("the data section should have " + std::to_string(expected) +
                 " bytes, but " + std::to_string(actual) +
                 " follow the data line");
  for (size_t id = 0; id < plan.weights.size(); ++id) {
    const Weight &weight = plan.weights[id];
    // offset and bytes are at most INT64_MAX each: the sum cannot wrap.
    if (weight.offset + weight.bytes > expected)
      return error(weightLines[id],
                   "weight " + std::to_string(id) + " ends at byte " +
                       std::to_string(weight.offset + weight.bytes) +
                       ", past the data section of " +
                       std::to_string(expected) + " bytes");
  }
  plan.data.assign(bytes.begin() + pos, bytes.end());
  return Status::ok();
}

Status Parser::parse(Plan &plan) {
  if (Status status = parseHeader(plan); !status)
    return status;
  weights = &plan.weights;
  version = plan.version;
  if (Status status = expectLine("'groups' or 'rank'"); !status)
    return status;
  if (tokens[0].is("groups")) {
    if (Status status = parseGroups(plan); !status)
      return status;
    if (Status status = expectLine("'rank'"); !status)
      return status;
  }
  while (tokens[0].is("rank")) {
    if (Status status = parseRank(plan); !status)
      return status;
    if (Status status = expectLine("'rank' or 'data'"); !status)
      return status;
  }
  if (tokens[0].is("weight"))
    return error("more weight lines than the " +
                 std::to_string(plan.weights.size()) + " announced");
  if (!tokens[0].is("data"))
    return error("expected 'rank' or 'data', got " + quote(tokens[0].text));
  if (plan.ranks.empty())
    return error("a plan needs at least one rank");
  if (Status status = checkGroups(plan); !status)
    return status;
  return parseData(plan);
}

} // namespace

StatusOr<Plan> loomrt::parsePlan(std::string_view bytes,
                                 const std::string &sourceName) {
  Plan plan;
  if (Status status = Parser(bytes, sourceName).parse(plan); !status)
    return status;
  return plan;
}

StatusOr<Plan> loomrt::loadPlan(const std::string &path) {
  StatusOr<std::string> bytes = readFile(path);
  if (!bytes)
    return bytes.status();
  return parsePlan(*bytes, path);
}

bool loomrt::looksLikePlan(std::string_view bytes) {
  return bytes.substr(0, kMagic.size()) == kMagic;
}
