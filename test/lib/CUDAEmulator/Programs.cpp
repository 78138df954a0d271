//===- Programs.cpp - Run-time compiled programs in the emulator ----------===//
//
// The elementwise kernels are CUDA C++ generated at run time and compiled by
// NVRTC. In the emulator, the NVRTC calls compile the same source with the
// host C++ compiler into a shared library (ProgramPrelude.h standing in for
// the device environment), and the runtime's library calls load it:
//   - nvrtcCompileProgram writes the source, the prelude and, per
//     `extern "C" __global__` kernel, an entry `<name>_emulated(args,
//     position)` that unpacks cudaLaunchKernel's argument array; its
//     "CUBIN" is the shared library's path;
//   - cudaLibraryLoadData opens that library, cudaLibraryGetKernel finds an
//     entry, and cudaLaunchKernel runs it through emulator::launch.
//
//===----------------------------------------------------------------------===//

#include "Emulator.h"

#include "CUDAEmulator/Device.h"

#include <cuda_runtime_api.h>
#include <nvrtc.h>

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

using namespace loomrt::cuda;

namespace {

/// What an NVRTC program is here: its source, then its log and library.
struct Program {
  std::string source;
  std::string log;
  std::string library; // the path, once compiled
};

/// A kernel found in a loaded library.
struct EmulatedKernel {
  using Entry = void (*)(void **, const void *(*)());
  Entry entry;
  /// Its parameters' sizes, 0-terminated.
  const unsigned long long *sizes = nullptr;
};

/// The directory the compiled programs go to (removed at exit).
std::string workDirectory() {
  static std::once_flag once;
  static std::string directory;
  std::call_once(once, [] {
    const char *tmp = std::getenv("TMPDIR");
    std::string pattern =
        std::string(tmp && *tmp ? tmp : "/tmp") + "/loom-emulator-XXXXXX";
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    if (mkdtemp(buffer.data()))
      directory = buffer.data();
    std::atexit([] {
      if (!directory.empty())
        std::system(("rm -rf '" + directory + "'").c_str());
    });
  });
  return directory;
}

/// The entries that unpack cudaLaunchKernel's argument array for every
/// `extern "C" __global__` kernel of `source` (whose parameters are
/// `type name` pairs without parentheses, as the generator writes them).
std::string entryPoints(const std::string &source) {
  static const std::regex kernel(
      R"(extern "C" __global__ void (?:__launch_bounds__\([^)]*\) )?(\w+)\(([^)]*)\))");
  static const std::regex parameter(R"(^\s*(.*?)\s*\b\w+\s*$)");
  std::ostringstream os;
  for (std::sregex_iterator it(source.begin(), source.end(), kernel), end;
       it != end; ++it) {
    const std::string name = (*it)[1], params = (*it)[2];
    os << "extern \"C\" void " << name
       << "_emulated(void **args, const void *(*position)()) {\n"
       << "  loomEmulatorPosition = position;\n  " << name << "(";
    std::stringstream list(params);
    std::string param, sizes;
    for (int i = 0; std::getline(list, param, ','); ++i) {
      std::smatch match;
      if (!std::regex_match(param, match, parameter))
        continue;
      os << (i ? ", " : "") << "*(" << match[1].str() << " *)args[" << i << "]";
      sizes += "sizeof(" + match[1].str() + "), ";
    }
    os << ");\n}\n";
    // What cudaLaunchKernel copies out of the argument array, 0-terminated.
    os << "extern \"C\" const unsigned long long " << name
       << "_emulated_sizes[] = {" << sizes << "0};\n";
  }
  return os.str();
}

nvrtcResult compile(Program &program) {
  const std::string directory = workDirectory();
  if (directory.empty()) {
    program.log = "emulator: no temporary directory for the program";
    return NVRTC_ERROR_INTERNAL_ERROR;
  }
  static std::atomic<int> counter{0};
  const std::string stem =
      directory + "/program" + std::to_string(counter.fetch_add(1));
  {
    std::ofstream out(stem + ".cpp");
    out << "#include \"" << LOOM_EMULATOR_PRELUDE << "\"\n"
        << program.source << "\n"
        << entryPoints(program.source);
  }
  // -ffp-contract=off: NVRTC runs with -fmad=false.
  const std::string command =
      std::string("'") + LOOM_EMULATOR_CXX +
      "' -std=c++17 -O1 -ffp-contract=off -fPIC -shared -w -o '" + stem +
      ".so' '" + stem + ".cpp' > '" + stem + ".log' 2>&1";
  const int status = std::system(command.c_str());
  std::ifstream log(stem + ".log");
  program.log.assign(std::istreambuf_iterator<char>(log),
                     std::istreambuf_iterator<char>());
  if (status != 0)
    return NVRTC_ERROR_COMPILATION;
  program.library = stem + ".so";
  return NVRTC_SUCCESS;
}

/// The loaded program's `void *` handle's kernels outlive it (libraries are
/// never unloaded: the elementwise cache keeps them for the process).
std::mutex kernelsMutex;
std::vector<std::unique_ptr<EmulatedKernel>> kernels;

} // namespace

extern "C" {

//===----------------------------------------------------------------------===//
// NVRTC
//===----------------------------------------------------------------------===//

const char *nvrtcGetErrorString(nvrtcResult result) {
  switch (result) {
  case NVRTC_SUCCESS:
    return "NVRTC_SUCCESS";
  case NVRTC_ERROR_COMPILATION:
    return "NVRTC_ERROR_COMPILATION (the emulator's host compiler)";
  default:
    return "an NVRTC error in the emulator";
  }
}

nvrtcResult nvrtcGetNumSupportedArchs(int *count) {
  *count = 1;
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetSupportedArchs(int *archs) {
  archs[0] = 90; // the emulated device's
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcCreateProgram(nvrtcProgram *program, const char *source,
                               const char *, int, const char *const *,
                               const char *const *) {
  auto *p = new Program;
  p->source = source;
  *program = reinterpret_cast<nvrtcProgram>(p);
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcDestroyProgram(nvrtcProgram *program) {
  delete reinterpret_cast<Program *>(*program);
  *program = nullptr;
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcCompileProgram(nvrtcProgram program, int,
                                const char *const *) {
  emulator::count(emulator::Call::Compile);
  return compile(*reinterpret_cast<Program *>(program));
}

nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram program, size_t *size) {
  *size = reinterpret_cast<Program *>(program)->log.size() + 1;
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetProgramLog(nvrtcProgram program, char *log) {
  const std::string &text = reinterpret_cast<Program *>(program)->log;
  std::memcpy(log, text.c_str(), text.size() + 1);
  return NVRTC_SUCCESS;
}

// The "image" is the compiled library's path, NUL-terminated.
nvrtcResult nvrtcGetCUBINSize(nvrtcProgram program, size_t *size) {
  *size = reinterpret_cast<Program *>(program)->library.size() + 1;
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetCUBIN(nvrtcProgram program, char *image) {
  const std::string &path = reinterpret_cast<Program *>(program)->library;
  std::memcpy(image, path.c_str(), path.size() + 1);
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetPTXSize(nvrtcProgram program, size_t *size) {
  return nvrtcGetCUBINSize(program, size);
}

nvrtcResult nvrtcGetPTX(nvrtcProgram program, char *image) {
  return nvrtcGetCUBIN(program, image);
}

//===----------------------------------------------------------------------===//
// Libraries and launches
//===----------------------------------------------------------------------===//

cudaError_t cudaLibraryLoadData(cudaLibrary_t *library, const void *image,
                                cudaJitOption *, void **, unsigned int,
                                cudaLibraryOption *, void **, unsigned int) {
  void *handle = dlopen(static_cast<const char *>(image), RTLD_NOW);
  if (!handle) {
    std::fprintf(stderr, "emulator: %s\n", dlerror());
    return cudaErrorInvalidKernelImage;
  }
  *library = reinterpret_cast<cudaLibrary_t>(handle);
  return cudaSuccess;
}

cudaError_t cudaLibraryGetKernel(cudaKernel_t *kernel, cudaLibrary_t library,
                                 const char *name) {
  void *symbol = dlsym(reinterpret_cast<void *>(library),
                       (std::string(name) + "_emulated").c_str());
  if (!symbol)
    return cudaErrorSymbolNotFound;
  auto found = std::make_unique<EmulatedKernel>();
  found->entry = reinterpret_cast<EmulatedKernel::Entry>(symbol);
  found->sizes = static_cast<const unsigned long long *>(
      dlsym(reinterpret_cast<void *>(library),
            (std::string(name) + "_emulated_sizes").c_str()));
  if (!found->sizes)
    return cudaErrorSymbolNotFound;
  std::lock_guard<std::mutex> lock(kernelsMutex);
  kernels.push_back(std::move(found));
  *kernel = reinterpret_cast<cudaKernel_t>(kernels.back().get());
  return cudaSuccess;
}

// Only kernels from cudaLibraryGetKernel: the nvcc-compiled ones launch
// through launchKernel.
cudaError_t cudaLaunchKernel(const void *function, dim3 grid, dim3 block,
                             void **args, size_t shared, cudaStream_t stream) {
  const auto *kernel = static_cast<const EmulatedKernel *>(function);
  // The arguments are copied at the launch, as a device's are, each into
  // maximally aligned room. Their total is held to 4 KiB, the limit every
  // driver and architecture takes (newer ones take 32 KiB).
  size_t count = 0, units = 0, bytes = 0;
  constexpr size_t kUnit = sizeof(std::max_align_t);
  for (; kernel->sizes[count]; ++count) {
    units += (kernel->sizes[count] + kUnit - 1) / kUnit;
    bytes += kernel->sizes[count];
  }
  if (bytes > 4096)
    return cudaErrorInvalidValue;
  auto storage = std::make_shared<std::vector<std::max_align_t>>(units + 1);
  auto pointers = std::make_shared<std::vector<void *>>(count);
  for (size_t i = 0, unit = 0; i < count; ++i) {
    (*pointers)[i] = storage->data() + unit;
    std::memcpy((*pointers)[i], args[i], kernel->sizes[i]);
    unit += (kernel->sizes[i] + kUnit - 1) / kUnit;
  }
  emulator::launch(function, grid, block, shared, stream,
                   [kernel, storage, pointers] {
                     kernel->entry(pointers->data(), emulator::positionAddress);
                   });
  return emulator::takeLastError();
}

} // extern "C"
