//===- Device.h - Where a plan runs -----------------------------*- C++ -*-===//
//
// A plan is device-neutral: the same file runs on the CPU backend (the
// reference) and on the CUDA backend. The executor is told which to use.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_DEVICE_H
#define LOOM_RUNTIME_DEVICE_H

#include <string>
#include <string_view>
#include <vector>

namespace loomrt {

enum class Device : unsigned char { CPU, CUDA };

/// "cpu" or "cuda" (the `loom-run --device` spelling).
const char *deviceName(Device device);
/// Parses a deviceName spelling; false when `name` is none.
bool parseDevice(std::string_view name, Device &device);

/// Whether this runtime was built with the CUDA backend.
bool haveCUDA();
/// The CUDA devices this process can use: 0 without the CUDA backend, a
/// driver or a GPU. `why` (if given) says why there are none.
int cudaDeviceCount(std::string *why = nullptr);
/// One line per CUDA device: "GPU 0: NVIDIA H200, 139.8 GiB, compute
/// capability 9.0" (`loom-run --list-devices`).
std::vector<std::string> describeCUDADevices();

/// How an executor runs its rank.
/// The CUDA backend's own options; the CPU backend ignores them.
struct CUDAOptions {
  /// The GPU ordinal; -1 picks the current device of the calling thread
  /// (the NCCL engine makes each rank's GPU current).
  int gpu = -1;
  /// f32 GEMMs may use TF32 tensor cores (10-bit mantissa products, as
  /// torch.backends.cuda.matmul.allow_tf32). Off by default: f32 stays f32.
  bool allowTF32 = false;
  /// Record a run's launches once as a CUDA graph and replay it in later
  /// runs (one launch per step instead of one per kernel). Plans with
  /// communication, and profiled runs, launch kernel by kernel.
  bool graphs = false;
  /// Launch consecutive independent elementwise kernels that run one
  /// program (an optimizer's per-parameter updates) as one group kernel
  /// (`loom-run --no-elementwise-groups` turns it off, to compare).
  bool groupElementwise = true;
  /// Before its first launch, time each matmul with several of cuBLASLt's
  /// algorithms on its own operands and keep the fastest (`loom-run
  /// --tune-matmuls`). The first run then launches kernel by kernel (tuning
  /// waits for the device), and results may differ from an untuned run in
  /// the last bits (another algorithm sums in another order).
  bool tuneMatmuls = false;
  /// A file that keeps tuning's choices between runs (`loom-run
  /// --tuning-file`; implies tuneMatmuls): problems it holds are not timed
  /// again, new ones are added to it after a run. One made with another
  /// cuBLASLt or GPU is not used, and is made again.
  std::string tuningFile;

  /// Whether matmuls are tuned (tuneMatmuls, or a tuningFile).
  bool tunesMatmuls() const { return tuneMatmuls || !tuningFile.empty(); }
};

struct ExecutorOptions {
  Device device = Device::CPU;
  /// Used when `device` is CUDA.
  CUDAOptions cuda;
};

} // namespace loomrt

#endif // LOOM_RUNTIME_DEVICE_H
