//===- HostDevice.h - Functions both backends compile ----------*- C++ -*-===//
//
// LOOM_HOST_DEVICE marks a function that the CPU backend and the CUDA
// emulator compile as host C++ and nvcc as host and device code, so that
// both backends run the same arithmetic (CumsumLine.h, DropoutMask.h).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_LIB_RUNTIME_HOSTDEVICE_H
#define LOOM_LIB_RUNTIME_HOSTDEVICE_H

#if defined(__CUDACC__)
#define LOOM_HOST_DEVICE __host__ __device__
#else
#define LOOM_HOST_DEVICE
#endif

#endif // LOOM_LIB_RUNTIME_HOSTDEVICE_H
