//===- Device.cpp - Device names ------------------------------------------===//

#include "loom/Runtime/Device.h"

using namespace loom::runtime;

const char *loom::runtime::deviceName(Device device) {
  return device == Device::CUDA ? "cuda" : "cpu";
}

bool loom::runtime::parseDevice(std::string_view name, Device &device) {
  if (name == "cpu")
    device = Device::CPU;
  else if (name == "cuda")
    device = Device::CUDA;
  else
    return false;
  return true;
}
