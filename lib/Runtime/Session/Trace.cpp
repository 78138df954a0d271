//===- Trace.cpp - A run as a Chrome/Perfetto trace -----------------------===//

#include "loom/Runtime/Session/Trace.h"

#include <algorithm>
#include <climits>
#include <cstdio>

using namespace loomrt;

namespace {

/// `text` as a JSON string.
std::string quoted(const std::string &text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string micros(int64_t ns) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3f", double(ns) / 1e3);
  return text;
}

/// The instruction of `event` in `program`, if any.
const Instruction *instructionOf(const std::vector<Instruction> *program,
                                 const TraceEvent &event) {
  return program && event.index < program->size() ? &(*program)[event.index]
                                                  : nullptr;
}

} // namespace

std::string loomrt::describeAction(const std::string &action) {
  size_t dot = action.find('.');
  size_t digit = action.find_first_of("0123456789");
  if (dot == std::string::npos || digit == std::string::npos || digit > dot)
    return action;
  return action.substr(0, digit) + " s" + action.substr(digit, dot - digit) +
         " mb" + action.substr(dot + 1);
}

double loomrt::measuredBubble(const Plan &plan, int rank,
                              const std::vector<TraceEvent> &events) {
  const std::vector<Instruction> *program =
      rank >= 0 && size_t(rank) < plan.ranks.size()
          ? &plan.ranks[size_t(rank)].instructions
          : nullptr;
  int64_t first = INT64_MAX, last = INT64_MIN, busy = 0;
  for (const TraceEvent &event : events) {
    const Instruction *inst = instructionOf(program, event);
    if (event.collective || !inst || inst->action.empty())
      continue;
    int64_t end = std::max(event.endNs, event.startNs);
    first = std::min(first, event.startNs);
    last = std::max(last, end);
    busy += end - event.startNs;
  }
  if (first == INT64_MAX || last <= first)
    return -1;
  return std::max(0.0, 1.0 - double(busy) / double(last - first));
}

std::string
loomrt::formatTrace(const Plan &plan,
                    const std::vector<std::vector<TraceEvent>> &events) {
  int64_t origin = INT64_MAX;
  for (const std::vector<TraceEvent> &rank : events)
    for (const TraceEvent &event : rank)
      origin = std::min(origin, event.startNs);
  if (origin == INT64_MAX)
    origin = 0;
  std::string out = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [";
  bool first = true;
  auto add = [&](const std::string &event) {
    out += first ? "\n  " : ",\n  ";
    out += event;
    first = false;
  };
  for (size_t rank = 0; rank < events.size(); ++rank) {
    std::string pid = std::to_string(rank);
    add("{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": " + pid +
        ", \"args\": {\"name\": \"rank " + pid + "\"}}");
    add("{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": " + pid +
        ", \"tid\": 0, \"args\": {\"name\": \"compute\"}}");
    add("{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": " + pid +
        ", \"tid\": 1, \"args\": {\"name\": \"communication\"}}");
    const std::vector<Instruction> *program =
        rank < plan.ranks.size() ? &plan.ranks[rank].instructions : nullptr;
    // Pipeline actions: consecutive kernels of one action make a slice.
    std::string action;
    int64_t actionStart = 0, actionEnd = 0;
    bool anyAction = false;
    auto flushAction = [&] {
      if (action.empty())
        return;
      add("{\"ph\": \"X\", \"name\": " + quoted(describeAction(action)) +
          ", \"cat\": \"pipeline\", \"pid\": " + pid +
          ", \"tid\": 2, \"ts\": " + micros(actionStart - origin) +
          ", \"dur\": " + micros(actionEnd - actionStart) + "}");
      action.clear();
    };
    for (const TraceEvent &event : events[rank]) {
      const Instruction *inst = instructionOf(program, event);
      if (event.collective || !inst)
        continue;
      if (inst->action != action) {
        flushAction();
        action = inst->action;
        actionStart = event.startNs;
      }
      actionEnd = std::max(event.endNs, event.startNs);
      anyAction |= !action.empty();
    }
    flushAction();
    if (anyAction)
      add("{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": " + pid +
          ", \"tid\": 2, \"args\": {\"name\": \"pipeline\"}}");
    for (const TraceEvent &event : events[rank]) {
      std::string name = "instruction " + std::to_string(event.index);
      if (program && event.index < program->size()) {
        const Instruction &inst = (*program)[event.index];
        name = inst.kernel + (inst.loc.empty() ? "" : " " + inst.loc);
      }
      int64_t end = std::max(event.endNs, event.startNs);
      add("{\"ph\": \"X\", \"name\": " + quoted(name) + ", \"cat\": \"" +
          (event.collective ? "communication" : "compute") + "\", \"pid\": " +
          pid + ", \"tid\": " + (event.collective ? "1" : "0") +
          ", \"ts\": " + micros(event.startNs - origin) +
          ", \"dur\": " + micros(end - event.startNs) +
          ", \"args\": {\"index\": " + std::to_string(event.index) + "}}");
    }
  }
  out += "\n]}\n";
  return out;
}
