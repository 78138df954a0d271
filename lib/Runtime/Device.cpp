//===- Device.cpp - Device names ------------------------------------------===//

#include "loom/Runtime/Device.h"

using namespace loomrt;

const char *loomrt::deviceName(Device device) {
  return device == Device::CUDA ? "cuda" : "cpu";
}

bool loomrt::parseDevice(std::string_view name, Device &device) {
  if (name == "cpu")
    device = Device::CPU;
  else if (name == "cuda")
    device = Device::CUDA;
  else
    return false;
  return true;
}
