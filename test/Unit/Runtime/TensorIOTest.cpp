//===- TensorIOTest.cpp - .npy and TensorProto files ----------------------===//
//
// Parses bytes that NumPy and the onnx Python package wrote (embedded below;
// see the generator comment), checks that writeNpy reproduces NumPy's bytes,
// and that corrupt or unsupported files are errors, never crashes.
//
//===----------------------------------------------------------------------===//

#include "loom/Runtime/TensorIO.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

using namespace loomrt;

namespace {

// Generated with NumPy 1.24 and onnx 1.12, e.g.
//   np.save(f, np.arange(6, dtype=np.float32).reshape(2, 3))
//   numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3),
//                           name='x').SerializeToString()
//   helper.make_tensor('f', TensorProto.FLOAT, [2, 2], [1, 2, 3, 4.5])
// kNpyVersion2 was written with np.lib.format.write_array(version=(2, 0)) and
// kProtoExternal is a FLOAT tensor with data_location EXTERNAL and an
// external_data entry location=w.bin.
constexpr char kNpyF32[] =
    "\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'sh"
    "ape': (2, 3), }                                                   "
    "       \x0a\x00\x00\x00\x00\x00\x00\x80\x3f\x00\x00\x00@\x00\x00@@"
    "\x00\x00\x80@\x00\x00\xa0@";

constexpr char kNpyBool[] =
    "\x93NUMPY\x01\x00v\x00{'descr': '|b1', 'fortran_order': False, 'sh"
    "ape': (3,), }                                                     "
    "       \x0a\x01\x00\x01";

constexpr char kNpyScalarF64[] =
    "\x93NUMPY\x01\x00v\x00{'descr': '<f8', 'fortran_order': False, 'sh"
    "ape': (), }                                                       "
    "       \x0a\x00\x00\x00\x00\x00\x00\x0c@";

constexpr char kNpyEmptyI64[] =
    "\x93NUMPY\x01\x00v\x00{'descr': '<i8', 'fortran_order': False, 'sh"
    "ape': (0, 4), }                                                   "
    "       \x0a";

constexpr char kNpyI32[] =
    "\x93NUMPY\x01\x00v\x00{'descr': '<i4', 'fortran_order': False, 'sh"
    "ape': (2,), }                                                     "
    "       \x0a\xff\xff\xff\xff\x02\x00\x00\x00";

constexpr char kNpyF16[] =
    "\x93NUMPY\x01\x00v\x00{'descr': '<f2', 'fortran_order': False, 'sh"
    "ape': (2,), }                                                     "
    "       \x0a\x00<\x00\xc1";

constexpr char kNpyFortran[] =
    "\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': True, 'sha"
    "pe': (2, 3), }                                                    "
    "       \x0a\x00\x00\x00\x00\x00\x00@@\x00\x00\x80\x3f\x00\x00\x80@"
    "\x00\x00\x00@\x00\x00\xa0@";

constexpr char kNpyBigEndian[] =
    "\x93NUMPY\x01\x00v\x00{'descr': '>f4', 'fortran_order': False, 'sh"
    "ape': (2,), }                                                     "
    "       \x0a\x00\x00\x00\x00\x3f\x80\x00\x00";

constexpr char kNpyU8[] =
    "\x93NUMPY\x01\x00v\x00{'descr': '|u1', 'fortran_order': False, 'sh"
    "ape': (2,), }                                                     "
    "       \x0a\x00\x01";

constexpr char kNpyVersion2[] =
    "\x93NUMPY\x02\x00t\x00\x00\x00{'descr': '<i8', 'fortran_order': Fa"
    "lse, 'shape': (3,), }                                             "
    "             \x0a\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00"
    "\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00";

constexpr char kProtoRawF32[] =
    "\x08\x02\x08\x03\x10\x01"
    "B\x01xJ\x18\x00\x00\x00\x00\x00\x00\x80\x3f\x00\x00\x00@\x00\x00@@"
    "\x00\x00\x80@\x00\x00\xa0@";

constexpr char kProtoFloatData[] =
    "\x08\x02\x08\x02\x10\x01\x22\x10\x00\x00\x80\x3f\x00\x00\x00@\x00"
    "\x00@@\x00\x00\x90@B\x01"
    "f";

constexpr char kProtoInt64Data[] =
    "\x08\x03\x10\x07:\x0c\x01\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01"
    "\x03"
    "B\x01i";

constexpr char kProtoInt32Data[] =
    "\x08\x02\x10\x06*\x0b\xfb\xff\xff\xff\xff\xff\xff\xff\xff\x01\x07"
    "B\x01n";

constexpr char kProtoBool[] = "\x08\x02\x10\x09*\x02\x01\x00"
                              "B\x01"
                              "b";

constexpr char kProtoDoubleData[] =
    "\x08\x02\x10\x0b"
    "B\x01"
    "dR\x10\x00\x00\x00\x00\x00\x00\xe0\x3f\x00\x00\x00\x00\x00\x00\xf4"
    "\xbf";

constexpr char kProtoF16[] = "\x08\x02\x10\x0a*\x05\x80x\x80\x82\x03"
                             "B\x01h";

constexpr char kProtoRawBool[] = "\x08\x02\x08\x01\x10\x09"
                                 "B\x02rbJ\x02\x01\x00";

constexpr char kProtoScalarI64[] = "\x10\x07"
                                   "B\x01sJ\x08*\x00\x00\x00\x00\x00\x00\x00";

constexpr char kProtoU8[] = "\x08\x02\x10\x02"
                            "B\x01uJ\x02\x00\x01";

constexpr char kProtoExternal[] = "\x08\x02\x10\x01"
                                  "B\x01"
                                  "ej\x11\x0a\x08location\x12\x05w.binp\x01";

template <size_t N> std::string_view bytesOf(const char (&literal)[N]) {
  return std::string_view(literal, N - 1);
}

template <typename T> std::vector<T> valuesOf(const HostTensor &tensor) {
  std::vector<T> values(tensor.data.size() / sizeof(T));
  if (!values.empty())
    std::memcpy(values.data(), tensor.data.data(), values.size() * sizeof(T));
  return values;
}

template <typename T>
HostTensor makeTensor(DType dtype, std::vector<int64_t> shape,
                      const std::vector<T> &values) {
  HostTensor tensor;
  tensor.dtype = dtype;
  tensor.shape = std::move(shape);
  tensor.data.resize(values.size() * sizeof(T));
  if (!values.empty())
    std::memcpy(tensor.data.data(), values.data(), tensor.data.size());
  return tensor;
}

HostTensor parsedNpy(std::string_view bytes) {
  StatusOr<HostTensor> tensor = parseNpy(bytes);
  EXPECT_TRUE(tensor.isOk()) << tensor.status().message();
  return tensor.isOk() ? *tensor : HostTensor();
}

HostTensor parsedProto(std::string_view bytes) {
  StatusOr<HostTensor> tensor = parseTensorProto(bytes);
  EXPECT_TRUE(tensor.isOk()) << tensor.status().message();
  return tensor.isOk() ? *tensor : HostTensor();
}

std::string npyError(std::string_view bytes) {
  StatusOr<HostTensor> tensor = parseNpy(bytes);
  EXPECT_FALSE(tensor.isOk());
  return tensor.isOk() ? "" : tensor.status().message();
}

std::string protoError(std::string_view bytes) {
  StatusOr<HostTensor> tensor = parseTensorProto(bytes);
  EXPECT_FALSE(tensor.isOk());
  return tensor.isOk() ? "" : tensor.status().message();
}

/// A version 1.0 .npy file with the header dict `dict` (unpadded).
std::string npyWithHeader(const std::string &dict, std::string_view data) {
  std::string bytes = "\x93NUMPY\x01";
  bytes += '\0';
  bytes += static_cast<char>(dict.size() & 0xff);
  bytes += static_cast<char>(dict.size() >> 8);
  return bytes + dict + std::string(data);
}

/// Builds protobuf wire format for hand-made TensorProtos.
class Proto {
public:
  static std::string varint(uint64_t value) {
    std::string out;
    do {
      uint8_t byte = value & 0x7f;
      value >>= 7;
      out += static_cast<char>(byte | (value ? 0x80 : 0));
    } while (value);
    return out;
  }
  Proto &key(uint64_t field, int wireType) {
    bytes += varint(field << 3 | wireType);
    return *this;
  }
  Proto &addVarint(uint64_t field, uint64_t value) {
    key(field, 0);
    bytes += varint(value);
    return *this;
  }
  Proto &addBytes(uint64_t field, std::string_view value) {
    key(field, 2);
    bytes += varint(value.size());
    bytes += value;
    return *this;
  }
  Proto &addFixed32(uint64_t field, uint32_t value) {
    key(field, 5);
    bytes.append(reinterpret_cast<const char *>(&value), 4);
    return *this;
  }
  Proto &addFixed64(uint64_t field, uint64_t value) {
    key(field, 1);
    bytes.append(reinterpret_cast<const char *>(&value), 8);
    return *this;
  }
  Proto &addFloat(uint64_t field, float value) {
    uint32_t bits;
    std::memcpy(&bits, &value, 4);
    return addFixed32(field, bits);
  }

  std::string bytes;
};

enum OnnxField {
  kDims = 1,
  kDataType = 2,
  kSegment = 3,
  kFloatData = 4,
  kInt32Data = 5,
  kInt64Data = 7,
  kName = 8,
  kRawData = 9,
  kDoubleData = 10,
};
enum OnnxType { kFloat = 1, kString = 8, kBool = 9 };

std::string tempPath(const std::string &name) {
  return ::testing::TempDir() + "/loom-tensorio-" + name;
}

void writeBytes(const std::string &path, std::string_view bytes) {
  std::FILE *file = std::fopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr) << path;
  std::fwrite(bytes.data(), 1, bytes.size(), file);
  std::fclose(file);
}

} // namespace

//===----------------------------------------------------------------------===//
// .npy
//===----------------------------------------------------------------------===//

TEST(NpyTest, ParsesNumPyFloat32) {
  HostTensor tensor = parsedNpy(bytesOf(kNpyF32));
  EXPECT_EQ(tensor.dtype, DType::F32);
  EXPECT_EQ(tensor.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(valuesOf<float>(tensor), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  // writeNpy reproduces NumPy's bytes exactly.
  EXPECT_EQ(writeNpy(tensor), bytesOf(kNpyF32));
}

TEST(NpyTest, ParsesNumPyDTypes) {
  HostTensor flags = parsedNpy(bytesOf(kNpyBool));
  EXPECT_EQ(flags.dtype, DType::I1);
  EXPECT_EQ(flags.shape, std::vector<int64_t>{3});
  EXPECT_EQ(flags.data, (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(writeNpy(flags), bytesOf(kNpyBool));

  HostTensor scalar = parsedNpy(bytesOf(kNpyScalarF64));
  EXPECT_EQ(scalar.dtype, DType::F64);
  EXPECT_TRUE(scalar.shape.empty());
  EXPECT_EQ(valuesOf<double>(scalar), std::vector<double>{3.5});
  EXPECT_EQ(writeNpy(scalar), bytesOf(kNpyScalarF64));

  HostTensor empty = parsedNpy(bytesOf(kNpyEmptyI64));
  EXPECT_EQ(empty.dtype, DType::I64);
  EXPECT_EQ(empty.shape, (std::vector<int64_t>{0, 4}));
  EXPECT_TRUE(empty.data.empty());
  EXPECT_EQ(writeNpy(empty), bytesOf(kNpyEmptyI64));

  HostTensor ints = parsedNpy(bytesOf(kNpyI32));
  EXPECT_EQ(ints.dtype, DType::I32);
  EXPECT_EQ(valuesOf<int32_t>(ints), (std::vector<int32_t>{-1, 2}));
  EXPECT_EQ(writeNpy(ints), bytesOf(kNpyI32));

  HostTensor halves = parsedNpy(bytesOf(kNpyF16));
  EXPECT_EQ(halves.dtype, DType::F16);
  EXPECT_EQ(valuesOf<uint16_t>(halves),
            (std::vector<uint16_t>{0x3c00, 0xc100}));
  EXPECT_EQ(writeNpy(halves), bytesOf(kNpyF16));

  HostTensor version2 = parsedNpy(bytesOf(kNpyVersion2));
  EXPECT_EQ(version2.dtype, DType::I64);
  EXPECT_EQ(valuesOf<int64_t>(version2), (std::vector<int64_t>{0, 1, 2}));
}

TEST(NpyTest, RoundTripsEveryDTypeAndShape) {
  const DType dtypes[] = {DType::F16, DType::F32, DType::F64,
                          DType::I1,  DType::I32, DType::I64};
  const std::vector<int64_t> shapes[] = {{},     {0},       {5},
                                         {2, 3}, {3, 0, 2}, {1, 1, 1, 1, 7}};
  for (DType dtype : dtypes) {
    for (const std::vector<int64_t> &shape : shapes) {
      HostTensor tensor;
      tensor.dtype = dtype;
      tensor.shape = shape;
      tensor.data.resize(numElements(shape) * dtypeSize(dtype));
      for (size_t i = 0; i < tensor.data.size(); ++i)
        tensor.data[i] = dtype == DType::I1 ? i % 2 : uint8_t(i * 37 + 5);
      std::string bytes = writeNpy(tensor);
      EXPECT_EQ(bytes.find('\n') + 1, bytes.size() - tensor.data.size());
      EXPECT_EQ((bytes.size() - tensor.data.size()) % 64, 0u);
      HostTensor parsed = parsedNpy(bytes);
      EXPECT_EQ(parsed.dtype, dtype) << dtypeName(dtype);
      EXPECT_EQ(parsed.shape, shape) << dtypeName(dtype);
      EXPECT_EQ(parsed.data, tensor.data) << dtypeName(dtype);
    }
  }
}

TEST(NpyTest, WritesBF16AsF32) {
  // 1.0 and -2.5 in bfloat16: NumPy has no bfloat16, so they widen exactly.
  HostTensor tensor = makeTensor<uint16_t>(DType::BF16, {2}, {0x3f80, 0xc020});
  HostTensor parsed = parsedNpy(writeNpy(tensor));
  EXPECT_EQ(parsed.dtype, DType::F32);
  EXPECT_EQ(valuesOf<float>(parsed), (std::vector<float>{1.0f, -2.5f}));
}

TEST(NpyTest, LongHeadersUseVersion2) {
  HostTensor tensor = makeTensor<float>(DType::F32, {}, {1.5f});
  tensor.shape.assign(30000, 1);
  std::string bytes = writeNpy(tensor);
  EXPECT_EQ(bytes[6], 2);
  HostTensor parsed = parsedNpy(bytes);
  EXPECT_EQ(parsed.shape, tensor.shape);
  EXPECT_EQ(valuesOf<float>(parsed), std::vector<float>{1.5f});
}

TEST(NpyTest, AcceptsOtherHeaderSpellings) {
  // Keys in any order, double quotes, Python 2 longs, no trailing comma.
  HostTensor tensor = parsedNpy(npyWithHeader(
      "{\"shape\": (2L,), 'fortran_order': False, 'descr': '<i4'}\n",
      std::string("\x01\0\0\0\x02\0\0\0", 8)));
  EXPECT_EQ(tensor.shape, std::vector<int64_t>{2});
  EXPECT_EQ(valuesOf<int32_t>(tensor), (std::vector<int32_t>{1, 2}));
}

TEST(NpyTest, Errors) {
  EXPECT_EQ(npyError(bytesOf(kNpyFortran)),
            "Fortran-order .npy arrays are not supported");
  EXPECT_EQ(npyError(bytesOf(kNpyBigEndian)),
            "big-endian .npy dtype '>f4' is not supported");
  EXPECT_EQ(npyError(bytesOf(kNpyU8)),
            "unsupported .npy dtype '|u1' (expected <f2, <f4, <f8, <i4, <i8 "
            "or |b1)");
  std::string_view f32 = bytesOf(kNpyF32);
  EXPECT_EQ(npyError(f32.substr(0, f32.size() - 1)),
            "truncated .npy data: expected 24 bytes, got 23");
  EXPECT_EQ(npyError(std::string(f32) + "x"),
            ".npy file has 25 data bytes, expected 24");
  EXPECT_EQ(npyError(f32.substr(0, 100)), "truncated .npy header");
  EXPECT_EQ(npyError(""), "not a .npy file (bad magic)");
  EXPECT_EQ(npyError("PK\x03\x04"), "not a .npy file (bad magic)");
  EXPECT_EQ(npyError("\x93NUMPY\x04"), "not a .npy file (bad magic)");
  std::string version4(f32);
  version4[6] = 4;
  EXPECT_EQ(npyError(version4), "unsupported .npy format version 4.0");
  std::string version1_1(f32);
  version1_1[7] = 1;
  EXPECT_EQ(npyError(version1_1), "unsupported .npy format version 1.1");

  std::string badBool(bytesOf(kNpyBool));
  badBool[badBool.size() - 2] = 2;
  EXPECT_EQ(npyError(badBool), "bool element 1 is 2, not 0 or 1");

  const std::string data(24, '\0');
  EXPECT_EQ(npyError(npyWithHeader("{'descr': '<f4', 'shape': (6,)}", data)),
            "invalid .npy header: missing 'fortran_order'");
  EXPECT_EQ(npyError(npyWithHeader("{'descr': '<f4', 'fortran_order': "
                                   "False, 'shape': (6,), 'x': 1}",
                                   data)),
            "invalid .npy header: unexpected key 'x'");
  EXPECT_EQ(npyError(npyWithHeader("{'descr': [('a', '<f4')], "
                                   "'fortran_order': False, 'shape': (6,)}",
                                   data)),
            "invalid .npy header: 'descr' is not a simple dtype string; only "
            "<f2, <f4, <f8, <i4, <i8 and |b1 are supported");
  EXPECT_EQ(npyError(npyWithHeader("{'descr': '<f4', 'fortran_order': "
                                   "False, 'shape': (-6,)}",
                                   data)),
            "invalid .npy header: expected a non-negative integer in 'shape'");
  EXPECT_EQ(npyError(npyWithHeader("{'descr': '<f4', 'fortran_order': "
                                   "False, 'shape': (99999999999999999999,)}",
                                   data)),
            "invalid .npy header: dimension out of range");
  EXPECT_EQ(npyError(npyWithHeader("{'descr': '<f4', 'fortran_order': "
                                   "False, 'shape': (4611686018427387904,)}",
                                   data)),
            ".npy shape [4611686018427387904] is too large");
  EXPECT_EQ(npyError(npyWithHeader("{'descr': '<f4', 'fortran_order': "
                                   "0, 'shape': (6,)}",
                                   data)),
            "invalid .npy header: expected True or False for "
            "'fortran_order'");
  EXPECT_EQ(npyError(npyWithHeader("{'descr': '<f4', 'fortran_order': "
                                   "False, 'shape': (6,)} x",
                                   data)),
            "invalid .npy header: unexpected text after the dictionary");
}

TEST(NpyTest, CorruptFilesDoNotCrash) {
  std::string_view valid = bytesOf(kNpyF32);
  for (size_t size = 0; size < valid.size(); ++size)
    EXPECT_FALSE(parseNpy(valid.substr(0, size)).isOk()) << size;
  for (size_t pos = 0; pos < valid.size(); ++pos) {
    for (char c : {'\0', '\xff', '(', ')', ',', '\'', '9', '}'}) {
      std::string mutated(valid);
      mutated[pos] = c;
      (void)parseNpy(mutated);
    }
  }
}

//===----------------------------------------------------------------------===//
// onnx.TensorProto
//===----------------------------------------------------------------------===//

TEST(TensorProtoTest, ParsesOnnxTensors) {
  HostTensor raw = parsedProto(bytesOf(kProtoRawF32));
  EXPECT_EQ(raw.name, "x");
  EXPECT_EQ(raw.dtype, DType::F32);
  EXPECT_EQ(raw.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(valuesOf<float>(raw), (std::vector<float>{0, 1, 2, 3, 4, 5}));

  HostTensor floats = parsedProto(bytesOf(kProtoFloatData));
  EXPECT_EQ(floats.name, "f");
  EXPECT_EQ(floats.shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(valuesOf<float>(floats), (std::vector<float>{1, 2, 3, 4.5}));

  HostTensor int64s = parsedProto(bytesOf(kProtoInt64Data));
  EXPECT_EQ(int64s.dtype, DType::I64);
  EXPECT_EQ(valuesOf<int64_t>(int64s), (std::vector<int64_t>{1, -2, 3}));

  HostTensor int32s = parsedProto(bytesOf(kProtoInt32Data));
  EXPECT_EQ(int32s.dtype, DType::I32);
  EXPECT_EQ(valuesOf<int32_t>(int32s), (std::vector<int32_t>{-5, 7}));

  HostTensor flags = parsedProto(bytesOf(kProtoBool));
  EXPECT_EQ(flags.dtype, DType::I1);
  EXPECT_EQ(flags.data, (std::vector<uint8_t>{1, 0}));

  HostTensor doubles = parsedProto(bytesOf(kProtoDoubleData));
  EXPECT_EQ(doubles.dtype, DType::F64);
  EXPECT_EQ(valuesOf<double>(doubles), (std::vector<double>{0.5, -1.25}));

  HostTensor halves = parsedProto(bytesOf(kProtoF16));
  EXPECT_EQ(halves.dtype, DType::F16);
  EXPECT_EQ(valuesOf<uint16_t>(halves),
            (std::vector<uint16_t>{0x3c00, 0xc100}));

  HostTensor rawFlags = parsedProto(bytesOf(kProtoRawBool));
  EXPECT_EQ(rawFlags.dtype, DType::I1);
  EXPECT_EQ(rawFlags.shape, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(rawFlags.data, (std::vector<uint8_t>{1, 0}));

  HostTensor scalar = parsedProto(bytesOf(kProtoScalarI64));
  EXPECT_TRUE(scalar.shape.empty());
  EXPECT_EQ(valuesOf<int64_t>(scalar), std::vector<int64_t>{42});
}

TEST(TensorProtoTest, UnpackedFieldsAndUnknownFields) {
  Proto proto;
  proto.addVarint(kDims, 2)
      .addVarint(99, 7)
      .addFixed32(100, 1)
      .addFixed64(101, 2)
      .addBytes(12, "a doc string")
      .addVarint(kDataType, kFloat)
      .addFloat(kFloatData, 1.5f)
      .addFloat(kFloatData, -3.0f);
  HostTensor tensor = parsedProto(proto.bytes);
  EXPECT_EQ(tensor.shape, std::vector<int64_t>{2});
  EXPECT_EQ(valuesOf<float>(tensor), (std::vector<float>{1.5f, -3.0f}));
}

TEST(TensorProtoTest, Errors) {
  EXPECT_EQ(protoError(bytesOf(kProtoU8)),
            "unsupported TensorProto data type UINT8");
  EXPECT_EQ(protoError(bytesOf(kProtoExternal)), "external data not supported");
  EXPECT_EQ(protoError(Proto().addVarint(14, 1).bytes),
            "external data not supported");
  EXPECT_EQ(protoError(Proto().addVarint(kDataType, kString).bytes),
            "unsupported TensorProto data type STRING");
  EXPECT_EQ(protoError(Proto().addVarint(kDataType, 99).bytes),
            "unsupported TensorProto data type 99");
  EXPECT_EQ(protoError(Proto().addVarint(kDims, 1).bytes),
            "TensorProto has no data_type");
  EXPECT_EQ(protoError(Proto().addBytes(kSegment, "").bytes),
            "segmented TensorProtos are not supported");

  Proto floats3;
  floats3.addVarint(kDims, 3).addVarint(kDataType, kFloat);
  EXPECT_EQ(
      protoError(
          Proto(floats3).addFloat(kFloatData, 1).addFloat(kFloatData, 2).bytes),
      "float_data holds 2 values, but the shape [3] has 3 elements");
  EXPECT_EQ(protoError(Proto(floats3).addBytes(kRawData, "12345678").bytes),
            "raw_data has 8 bytes, but FLOAT[3] needs 12");
  EXPECT_EQ(protoError(Proto(floats3)
                           .addBytes(kRawData, "123456789012")
                           .addFloat(kFloatData, 1)
                           .bytes),
            "TensorProto has both raw_data and typed data");
  EXPECT_EQ(protoError(Proto(floats3).addVarint(kInt64Data, 1).bytes),
            "TensorProto of type FLOAT has int64_data");
  EXPECT_EQ(protoError(Proto()
                           .addVarint(kDims, 1)
                           .addVarint(kDataType, kBool)
                           .addVarint(kInt32Data, 2)
                           .bytes),
            "int32_data value 2 is out of range for BOOL");
  EXPECT_EQ(protoError(Proto()
                           .addVarint(kDims, 1)
                           .addVarint(kDataType, kBool)
                           .addBytes(kRawData, "\x03")
                           .bytes),
            "bool element 0 is 3, not 0 or 1");
  EXPECT_EQ(protoError(Proto()
                           .addVarint(kDims, uint64_t(-1))
                           .addVarint(kDataType, kFloat)
                           .bytes),
            "TensorProto dims [-1] are negative or too large");
  EXPECT_EQ(protoError(Proto()
                           .addVarint(kDims, 1ull << 40)
                           .addVarint(kDims, 1ull << 40)
                           .addVarint(kDataType, kFloat)
                           .bytes),
            "TensorProto dims [1099511627776,1099511627776] are negative or "
            "too large");
  // A large shape with little data is an error, not an allocation.
  EXPECT_EQ(protoError(Proto()
                           .addVarint(kDims, 1ull << 40)
                           .addVarint(kDataType, kFloat)
                           .addBytes(kRawData, "1234")
                           .bytes),
            "raw_data has 4 bytes, but FLOAT[1099511627776] needs "
            "4398046511104");
}

TEST(TensorProtoTest, WireFormatErrors) {
  EXPECT_EQ(protoError(Proto().key(kDims, 3).bytes),
            "unsupported protobuf wire type 3 in field 1");
  EXPECT_EQ(protoError(Proto().key(0, 0).bytes + Proto::varint(1)),
            "invalid TensorProto field number 0");
  EXPECT_EQ(protoError("\x08"), "truncated TensorProto (bad varint)");
  EXPECT_EQ(protoError("\x80"), "truncated TensorProto (bad field key)");
  EXPECT_EQ(protoError("\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02"),
            "truncated TensorProto (bad varint)");
  EXPECT_EQ(protoError("\x4a\x05"
                       "abc"),
            "truncated TensorProto (field 9 runs past the end)");
  EXPECT_EQ(protoError("\x4a\xff\xff\xff\xff\xff\xff\xff\xff\x7f"),
            "truncated TensorProto (field 9 runs past the end)");
  EXPECT_EQ(protoError(Proto().addFixed32(kDataType, 1).bytes),
            "TensorProto field data_type is not a varint");
  EXPECT_EQ(protoError(Proto().addBytes(kFloatData, "abc").bytes),
            "TensorProto field float_data has the wrong wire type or size");
  EXPECT_EQ(protoError(Proto().addBytes(kInt64Data, "\x80").bytes),
            "truncated packed int64_data");
}

TEST(TensorProtoTest, CorruptBytesDoNotCrash) {
  for (std::string_view valid :
       {bytesOf(kProtoRawF32), bytesOf(kProtoFloatData),
        bytesOf(kProtoInt64Data), bytesOf(kProtoExternal)}) {
    for (size_t size = 0; size < valid.size(); ++size)
      (void)parseTensorProto(valid.substr(0, size));
    for (size_t pos = 0; pos < valid.size(); ++pos) {
      for (char c : {'\0', '\x01', '\x7f', '\x80', '\xff', '\x0a', '\x22'}) {
        std::string mutated(valid);
        mutated[pos] = c;
        (void)parseTensorProto(mutated);
      }
    }
  }
}

//===----------------------------------------------------------------------===//
// Files
//===----------------------------------------------------------------------===//

TEST(TensorFileTest, ReadsByContentOrExtension) {
  std::string npyPath = tempPath("x.npy"), pbPath = tempPath("x.pb");
  writeBytes(npyPath, bytesOf(kNpyF32));
  writeBytes(pbPath, bytesOf(kProtoRawF32));
  StatusOr<HostTensor> npy = readTensorFile(npyPath);
  ASSERT_TRUE(npy.isOk()) << npy.status().message();
  EXPECT_EQ(valuesOf<float>(*npy), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  StatusOr<HostTensor> pb = readTensorFile(pbPath);
  ASSERT_TRUE(pb.isOk()) << pb.status().message();
  EXPECT_EQ(pb->name, "x");

  // .npy content is recognized whatever the file is called.
  std::string renamed = tempPath("x.bin");
  writeBytes(renamed, bytesOf(kNpyF32));
  EXPECT_TRUE(readTensorFile(renamed).isOk());
  std::string text = tempPath("x.txt");
  writeBytes(text, "1 2 3");
  EXPECT_EQ(readTensorFile(text).status().message(),
            "unknown tensor file format for '" + text +
                "' (expected .npy or .pb)");

  std::string corrupt = tempPath("bad.pb");
  writeBytes(corrupt, "\x08");
  EXPECT_EQ(readTensorFile(corrupt).status().message(),
            corrupt + ": truncated TensorProto (bad varint)");
  std::string notNpy = tempPath("bad.npy");
  writeBytes(notNpy, "hello");
  EXPECT_EQ(readTensorFile(notNpy).status().message(),
            notNpy + ": not a .npy file (bad magic)");
  for (const std::string &path :
       {npyPath, pbPath, renamed, text, corrupt, notNpy})
    std::remove(path.c_str());
}

TEST(TensorFileTest, WritesNpyFiles) {
  std::string path = tempPath("written.npy");
  HostTensor tensor = makeTensor<int64_t>(DType::I64, {3}, {7, -8, 9});
  Status status = writeNpyFile(path, tensor);
  ASSERT_TRUE(status.isOk()) << status.message();
  StatusOr<HostTensor> read = readTensorFile(path);
  ASSERT_TRUE(read.isOk()) << read.status().message();
  EXPECT_EQ(valuesOf<int64_t>(*read), (std::vector<int64_t>{7, -8, 9}));
  std::remove(path.c_str());
}

TEST(TensorFileTest, FileErrorsNameThePath) {
  EXPECT_EQ(readTensorFile("/nonexistent/x.npy").status().message(),
            "cannot open '/nonexistent/x.npy': No such file or directory");
  EXPECT_EQ(readFile("/nonexistent/x.pb").status().message(),
            "cannot open '/nonexistent/x.pb': No such file or directory");
  EXPECT_EQ(writeNpyFile("/nonexistent/x.npy", HostTensor()).message(),
            "cannot open '/nonexistent/x.npy' for writing: No such file or "
            "directory");
  std::string directory = ::testing::TempDir();
  EXPECT_EQ(readFile(directory).status().message(),
            "cannot read '" + directory + "': Is a directory");
}
