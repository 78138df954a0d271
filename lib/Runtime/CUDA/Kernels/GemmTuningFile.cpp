//===- GemmTuningFile.cpp - Matmul tuning kept between runs ---------------===//
//
// `loom-run --tuning-file FILE`: what --tune-matmuls chose, kept in a text
// file so that later runs take the same algorithms without timing them
// again (and so compute the same bytes from run to run). cuBLASLt documents
// its algorithm structure as trivially serializable for the same library
// version, so the file says which library and GPU it was made with, and a
// file made with others is not used.
//
//   loom-matmul-tuning 1
//   context cublasLt=130200 sm=90 workspace=33554432 gpu=NVIDIA H200
//   <8 words of the algorithm, hex> <heuristic s> <chosen s> <problem key>
//   ...
//
//===----------------------------------------------------------------------===//

#include "CUDA/CUDAKernels.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <unistd.h>

using namespace loomrt;
using namespace loomrt::cuda;

static const char *const kMagic = "loom-matmul-tuning 1";

std::string cuda::tuningContext(int computeCapability, size_t workspaceBytes,
                                const std::string &gpuName) {
  return "cublasLt=" + std::to_string(cublasLtGetVersion()) +
         " sm=" + std::to_string(computeCapability) +
         " workspace=" + std::to_string(workspaceBytes) + " gpu=" + gpuName;
}

/// `text` without trailing blanks (a file edited on Windows ends its lines
/// with \r).
static std::string trimmed(std::string text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.pop_back();
  return text;
}

Status cuda::readTuningFile(const std::string &path, const std::string &context,
                            MatmulTuning &tuning, std::string &warning) {
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT)
      return Status::ok(); // nothing kept yet: the run makes it
    return Status::error("cannot read " + path + ": " + std::strerror(errno));
  }
  auto bad = [&](int line, const std::string &what) {
    return Status::error(path + ":" + std::to_string(line) +
                         ": not a matmul tuning file: " + what);
  };
  std::string text;
  if (!std::getline(in, text) || trimmed(text) != kMagic)
    return bad(1, std::string("the first line is not '") + kMagic + "'");
  if (!std::getline(in, text) || trimmed(text).rfind("context ", 0) != 0)
    return bad(2, "no 'context' line");
  if (trimmed(text).substr(8) != context) {
    warning = path + " was made with " + trimmed(text).substr(8) + ", not " +
              context + ": its algorithms are not used, and it is made again";
    return Status::ok();
  }
  std::map<std::string, MatmulTuning::Choice> read;
  for (int line = 3; std::getline(in, text); ++line) {
    text = trimmed(text);
    if (text.find_first_not_of(" \t") == std::string::npos)
      continue;
    std::istringstream fields(text);
    MatmulTuning::Choice choice{};
    for (uint64_t &word : choice.algo.data) {
      std::string hex;
      if (!(fields >> hex) || hex.size() != 16 ||
          hex.find_first_not_of("0123456789abcdef") != std::string::npos)
        return bad(line, "expected 8 words of 16 hexadecimal digits (an "
                         "algorithm)");
      word = std::strtoull(hex.c_str(), nullptr, 16);
    }
    if (!(fields >> choice.heuristicSeconds >> choice.chosenSeconds) ||
        !(choice.heuristicSeconds >= 0) || !(choice.chosenSeconds >= 0) ||
        !std::isfinite(choice.heuristicSeconds) ||
        !std::isfinite(choice.chosenSeconds))
      return bad(line, "expected two times in seconds after the algorithm");
    std::string key;
    std::getline(fields >> std::ws, key);
    if (key.empty())
      return bad(line, "no problem key");
    if (!read.emplace(key, choice).second)
      return bad(line, "a second line for problem '" + key + "'");
  }
  if (in.bad())
    return Status::error("cannot read " + path + ": " + std::strerror(errno));
  tuning.chosen.insert(read.begin(), read.end());
  return Status::ok();
}

Status cuda::writeTuningFile(const std::string &path,
                             const std::string &context,
                             const MatmulTuning &tuning) {
  // Written aside and renamed, so that a reader never sees half a file.
  const std::string temporary =
      path + ".tmp." + std::to_string(getpid()) + "." +
      std::to_string(reinterpret_cast<uintptr_t>(&tuning));
  auto failed = [&](const std::string &what) {
    std::string reason = std::strerror(errno);
    std::remove(temporary.c_str());
    return Status::error("cannot write " + path + " (" + what + "): " + reason);
  };
  std::ofstream out(temporary);
  if (!out)
    return failed("creating " + temporary);
  out << kMagic << "\ncontext " << context << "\n";
  char word[17];
  for (const auto &[key, choice] : tuning.chosen) {
    for (uint64_t data : choice.algo.data) {
      std::snprintf(word, sizeof word, "%016llx",
                    static_cast<unsigned long long>(data));
      out << word << ' ';
    }
    char times[64];
    std::snprintf(times, sizeof times, "%.9g %.9g ", choice.heuristicSeconds,
                  choice.chosenSeconds);
    out << times << key << '\n';
  }
  out.close();
  if (!out)
    return failed("writing " + temporary);
  if (std::rename(temporary.c_str(), path.c_str()) != 0)
    return failed("renaming " + temporary);
  return Status::ok();
}
