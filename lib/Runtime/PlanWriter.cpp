//===- PlanWriter.cpp - Serializes a runtime plan -------------------------===//
//
// Writes the text header and binary data section described in
// docs/design/plan-format.md. The writer trusts its input: plans come from
// the compiler, so a malformed one (an attribute word that would not parse
// back) is a compiler bug and aborts rather than producing a file that the
// parser rejects later.
//
//===----------------------------------------------------------------------===//

#include "loom/Runtime/Plan.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <type_traits>

using namespace loomrt;

namespace {

/// Data sections start at file offsets that are multiples of this, so that a
/// loader may map weights in place with any vector alignment.
constexpr size_t kDataAlignment = 64;

[[noreturn]] void fatal(const std::string &message) {
  std::fprintf(stderr, "loom: writePlan: %s\n", message.c_str());
  std::abort();
}

/// The parser's WORD: [A-Za-z_][A-Za-z0-9_.-]*, and not a spelling the parser
/// reads as a number.
bool isWord(std::string_view text) {
  if (text.empty() || text == "inf" || text == "nan")
    return false;
  auto isAlpha = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  };
  if (!isAlpha(text[0]))
    return false;
  for (char c : text.substr(1))
    if (!isAlpha(c) && !(c >= '0' && c <= '9') && c != '.' && c != '-')
      return false;
  return true;
}

void writeWord(std::string &out, std::string_view word, const char *what) {
  if (!isWord(word))
    fatal(std::string(what) + " '" + std::string(word) +
          "' is not a bare word");
  out += word;
}

void writeString(std::string &out, std::string_view text) {
  out += '"';
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  out += '"';
}

/// The shortest spelling that parses back to the same double, always with a
/// '.' or an exponent so that it reads as FLOAT rather than INT.
void writeDouble(std::string &out, double value) {
  if (std::isnan(value)) {
    out += "nan";
    return;
  }
  if (std::isinf(value)) {
    out += value < 0 ? "-inf" : "inf";
    return;
  }
  char buffer[64];
  std::to_chars_result result =
      std::to_chars(buffer, buffer + sizeof(buffer), value);
  std::string_view text(buffer, result.ptr - buffer);
  out += text;
  if (text.find_first_of(".e") == std::string_view::npos)
    out += ".0";
}

void writeIntList(std::string &out, const std::vector<int64_t> &values) {
  out += '[';
  for (size_t i = 0; i < values.size(); ++i) {
    if (i)
      out += ',';
    out += std::to_string(values[i]);
  }
  out += ']';
}

void writeAttributes(std::string &out, const Attributes &attrs) {
  // std::map iterates in sorted key order, which keeps plans diffable.
  for (const auto &[key, value] : attrs) {
    out += ' ';
    writeWord(out, key, "attribute name");
    out += '=';
    std::visit(
        [&](const auto &v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, int64_t>)
            out += std::to_string(v);
          else if constexpr (std::is_same_v<T, double>)
            writeDouble(out, v);
          else if constexpr (std::is_same_v<T, std::vector<int64_t>>)
            writeIntList(out, v);
          else
            writeWord(out, v, "attribute value");
        },
        value);
  }
}

void writeRef(std::string &out, const TensorRef &ref) {
  out += ref.space == TensorRef::Space::Arena ? 'a' : 'w';
  out += std::to_string(ref.offset);
  out += ':';
  out += dtypeName(ref.dtype);
  out += shapeString(ref.shape);
}

void writeValue(std::string &out, int value) {
  out += " %";
  out += std::to_string(value);
}

void writeProgram(std::string &out, const Instruction &inst) {
  out += " {\n";
  int next = static_cast<int>(inst.inputs.size());
  for (const ProgramOp &op : inst.program) {
    out += "  %" + std::to_string(next++) + " = ";
    writeWord(out, op.op, "program op");
    out += ' ';
    out += dtypeName(op.dtype);
    for (int operand : op.operands)
      writeValue(out, operand);
    writeAttributes(out, op.attrs);
    out += '\n';
  }
  out += "  yield";
  for (int value : inst.yields)
    writeValue(out, value);
  out += "\n}";
}

void writeInstruction(std::string &out, const Instruction &inst) {
  out += inst.kind == Instruction::Kind::Collective ? "collective " : "kernel ";
  writeWord(out, inst.kernel, "kernel name");
  for (const TensorRef &ref : inst.inputs) {
    out += ' ';
    writeRef(out, ref);
  }
  out += " ->";
  for (const TensorRef &ref : inst.outputs) {
    out += ' ';
    writeRef(out, ref);
  }
  writeAttributes(out, inst.attrs);
  if (!inst.loc.empty()) {
    out += " loc ";
    writeString(out, inst.loc);
  }
  if (!inst.action.empty()) {
    out += " action ";
    writeString(out, inst.action);
  }
  // A program block always yields; an instruction with neither program nor
  // yields is not elementwise and has no block.
  if (!inst.program.empty() || !inst.yields.empty())
    writeProgram(out, inst);
  out += '\n';
}

void writeBinding(std::string &out, const char *keyword,
                  const Binding &binding) {
  out += keyword;
  out += ' ';
  writeString(out, binding.name);
  out += ' ';
  writeRef(out, binding.ref);
  if (binding.batchOffset >= 0)
    out += " rows=" + std::to_string(binding.batchOffset);
  out += '\n';
}

void writeRank(std::string &out, const RankProgram &rank) {
  out += "rank " + std::to_string(rank.rank) + " arena " +
         std::to_string(rank.arenaBytes);
  if (rank.gradientBytes >= 0)
    out += " gradients " + std::to_string(rank.gradientBytes);
  out += "\n";
  for (const Binding &input : rank.inputs)
    writeBinding(out, "input", input);
  for (const Binding &output : rank.outputs)
    writeBinding(out, "output", output);
  for (const Instruction &inst : rank.instructions)
    writeInstruction(out, inst);
  out += "end\n";
}

void writeWeight(std::string &out, size_t id, const Weight &weight) {
  out += "weight " + std::to_string(id) + ' ';
  writeString(out, weight.name);
  out += ' ';
  out += dtypeName(weight.dtype);
  out += ' ';
  out += shapeString(weight.shape);
  out += " offset " + std::to_string(weight.offset) + " bytes " +
         std::to_string(weight.bytes);
  if (weight.state)
    out += " state";
  if (weight.castOf >= 0)
    out += " cast_of " + std::to_string(weight.castOf);
  if (weight.isSlice())
    out += " " + sliceString(weight.sliceOffsets, weight.globalShape);
  out += "\n";
}

/// Appends a comment line of spaces and the data line so that the data
/// starts at a multiple of kDataAlignment.
void writeDataLine(std::string &out, size_t dataBytes) {
  std::string dataLine = "data " + std::to_string(dataBytes) + "\n";
  // The comment line is at least "#\n".
  size_t unpadded = out.size() + 2 + dataLine.size();
  size_t spaces = (kDataAlignment - unpadded % kDataAlignment) % kDataAlignment;
  out += '#';
  out.append(spaces, ' ');
  out += '\n';
  out += dataLine;
}

} // namespace

std::string loomrt::writePlan(const Plan &plan) {
  std::string out = "loom-plan " + std::to_string(kPlanVersion) + "\n";
  out += "weights " + std::to_string(plan.weights.size()) + "\n";
  for (size_t id = 0; id < plan.weights.size(); ++id)
    writeWeight(out, id, plan.weights[id]);
  if (!plan.groups.empty()) {
    out += "groups " + std::to_string(plan.groups.size()) + "\n";
    for (size_t id = 0; id < plan.groups.size(); ++id) {
      out += "group " + std::to_string(id) + " [";
      for (size_t i = 0; i < plan.groups[id].size(); ++i)
        out += (i ? "," : "") + std::to_string(plan.groups[id][i]);
      out += "]\n";
    }
  }
  for (const RankProgram &rank : plan.ranks)
    writeRank(out, rank);
  writeDataLine(out, plan.data.size());
  out.append(reinterpret_cast<const char *>(plan.data.data()),
             plan.data.size());
  return out;
}
