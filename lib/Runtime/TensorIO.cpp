//===- TensorIO.cpp - .npy and TensorProto files --------------------------===//
//
// Reads and writes the tensors `loom-run` consumes and produces. Both readers
// take untrusted bytes: sizes are overflow-checked and compared with the
// bytes actually present before anything is allocated from them.
//
// Tensor data is kept in the host's byte order, and both formats store
// little-endian data, so the runtime assumes a little-endian host (as every
// platform it targets is).
//
//===----------------------------------------------------------------------===//

#include "loom/Runtime/TensorIO.h"

#include "CPU/BFloat16.h"

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>

using namespace loomrt;

namespace {

/// The byte size of `shape` of `dtype`, false when it does not fit int64 (so
/// that numElements() never overflows; zero dims are skipped because the
/// prefix products numElements() computes must fit as well).
bool checkedByteSize(const std::vector<int64_t> &shape, DType dtype,
                     uint64_t &bytes) {
  uint64_t product = dtypeSize(dtype);
  for (int64_t dim : shape) {
    if (dim < 0)
      return false;
    if (dim == 0)
      continue;
    if (uint64_t(dim) > uint64_t(INT64_MAX) / product)
      return false;
    product *= uint64_t(dim);
  }
  bytes = uint64_t(numElements(shape)) * dtypeSize(dtype);
  return true;
}

/// i1 tensors hold one byte per element that is 0 or 1.
Status checkBools(const std::vector<uint8_t> &data) {
  for (size_t i = 0; i < data.size(); ++i)
    if (data[i] > 1)
      return Status::error("bool element " + std::to_string(i) + " is " +
                           std::to_string(data[i]) + ", not 0 or 1");
  return Status::ok();
}

bool endsWith(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() &&
         text.substr(text.size() - suffix.size()) == suffix;
}

//===----------------------------------------------------------------------===//
// .npy
//===----------------------------------------------------------------------===//

constexpr std::string_view kNpyMagic = "\x93NUMPY";

struct NpyDType {
  const char *descr;
  DType dtype;
};
constexpr NpyDType kNpyDTypes[] = {
    {"<f2", DType::F16}, {"<f4", DType::F32}, {"<f8", DType::F64},
    {"<i4", DType::I32}, {"<i8", DType::I64}, {"|b1", DType::I1},
};

/// The header is the repr() of a Python dict such as
/// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }. This parses
/// the subset of Python literals numpy writes there: strings, booleans and
/// tuples of integers.
class NpyHeaderParser {
public:
  explicit NpyHeaderParser(std::string_view text) : text(text) {}

  Status parse(std::string &descr, bool &fortranOrder,
               std::vector<int64_t> &shape);

private:
  Status error(const std::string &what) const {
    return Status::error("invalid .npy header: " + what);
  }
  void skipSpace() {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t' ||
                                 text[pos] == '\n' || text[pos] == '\r'))
      ++pos;
  }
  bool consume(char c) {
    skipSpace();
    if (pos < text.size() && text[pos] == c) {
      ++pos;
      return true;
    }
    return false;
  }
  bool consumeWord(std::string_view word) {
    skipSpace();
    if (text.substr(pos, word.size()) != word)
      return false;
    pos += word.size();
    return true;
  }
  Status parseString(std::string &value);
  Status parseBool(bool &value);
  Status parseShape(std::vector<int64_t> &shape);

  std::string_view text;
  size_t pos = 0;
};

Status NpyHeaderParser::parseString(std::string &value) {
  skipSpace();
  if (pos == text.size() || (text[pos] != '\'' && text[pos] != '"'))
    return error("expected a string");
  char quote = text[pos++];
  size_t end = text.find(quote, pos);
  if (end == std::string_view::npos)
    return error("unterminated string");
  value = std::string(text.substr(pos, end - pos));
  pos = end + 1;
  return Status::ok();
}

Status NpyHeaderParser::parseBool(bool &value) {
  if (consumeWord("True"))
    value = true;
  else if (consumeWord("False"))
    value = false;
  else
    return error("expected True or False for 'fortran_order'");
  return Status::ok();
}

/// A tuple of non-negative integers: (), (5,), (2, 3). Python 2 numpy wrote
/// long integers with an 'L' suffix.
Status NpyHeaderParser::parseShape(std::vector<int64_t> &shape) {
  if (!consume('('))
    return error("expected a tuple for 'shape'");
  shape.clear();
  while (!consume(')')) {
    skipSpace();
    int64_t dim = 0;
    size_t start = pos;
    for (; pos < text.size() && text[pos] >= '0' && text[pos] <= '9'; ++pos) {
      int digit = text[pos] - '0';
      if (dim > (INT64_MAX - digit) / 10)
        return error("dimension out of range");
      dim = dim * 10 + digit;
    }
    if (pos == start)
      return error("expected a non-negative integer in 'shape'");
    if (pos < text.size() && text[pos] == 'L')
      ++pos;
    shape.push_back(dim);
    if (!consume(',')) {
      if (!consume(')'))
        return error("expected ',' or ')' in 'shape'");
      break;
    }
  }
  return Status::ok();
}

Status NpyHeaderParser::parse(std::string &descr, bool &fortranOrder,
                              std::vector<int64_t> &shape) {
  bool seenDescr = false, seenOrder = false, seenShape = false;
  if (!consume('{'))
    return error("expected '{'");
  while (!consume('}')) {
    std::string key;
    if (Status status = parseString(key); !status)
      return status;
    if (!consume(':'))
      return error("expected ':' after '" + key + "'");
    Status status = Status::ok();
    if (key == "descr" && !seenDescr) {
      seenDescr = true;
      status = parseString(descr);
      if (!status)
        return error("'descr' is not a simple dtype string; only <f2, <f4, "
                     "<f8, <i4, <i8 and |b1 are supported");
    } else if (key == "fortran_order" && !seenOrder) {
      seenOrder = true;
      status = parseBool(fortranOrder);
    } else if (key == "shape" && !seenShape) {
      seenShape = true;
      status = parseShape(shape);
    } else {
      return error("unexpected key '" + key + "'");
    }
    if (!status)
      return status;
    if (!consume(',')) {
      if (!consume('}'))
        return error("expected ',' or '}'");
      break;
    }
  }
  skipSpace();
  if (pos != text.size())
    return error("unexpected text after the dictionary");
  if (!seenDescr || !seenOrder || !seenShape)
    return error("missing '" +
                 std::string(!seenDescr   ? "descr"
                             : !seenOrder ? "fortran_order"
                                          : "shape") +
                 "'");
  return Status::ok();
}

Status npyDType(const std::string &descr, DType &dtype) {
  for (const NpyDType &entry : kNpyDTypes) {
    if (descr == entry.descr) {
      dtype = entry.dtype;
      return Status::ok();
    }
  }
  if (descr.size() > 1 && descr[0] == '>')
    return Status::error("big-endian .npy dtype '" + descr +
                         "' is not supported");
  return Status::error("unsupported .npy dtype '" + descr +
                       "' (expected <f2, <f4, <f8, <i4, <i8 or |b1)");
}

const char *npyDescr(DType dtype) {
  for (const NpyDType &entry : kNpyDTypes)
    if (entry.dtype == dtype)
      return entry.descr;
  return nullptr;
}

uint32_t readLE(std::string_view bytes, size_t offset, size_t size) {
  uint32_t value = 0;
  for (size_t i = 0; i < size; ++i)
    value |= uint32_t(uint8_t(bytes[offset + i])) << (8 * i);
  return value;
}

void appendLE(std::string &out, uint32_t value, size_t size) {
  for (size_t i = 0; i < size; ++i)
    out += static_cast<char>((value >> (8 * i)) & 0xff);
}

/// NumPy has no bfloat16, so bf16 tensors are written as the f32 values they
/// widen to exactly.
HostTensor widenBF16(const HostTensor &tensor) {
  HostTensor wide;
  wide.dtype = DType::F32;
  wide.shape = tensor.shape;
  wide.data.resize(tensor.data.size() * 2);
  for (size_t i = 0; i + 1 < tensor.data.size(); i += 2) {
    wide.data[2 * i + 2] = tensor.data[i];
    wide.data[2 * i + 3] = tensor.data[i + 1];
  }
  return wide;
}

/// The header dict exactly as NumPy 1.24 writes it, so that files compare
/// equal: keys sorted, spare spaces for growing the first axis.
std::string npyHeaderDict(const HostTensor &tensor) {
  std::string shape = "(";
  for (size_t i = 0; i < tensor.shape.size(); ++i) {
    if (i)
      shape += ", ";
    shape += std::to_string(tensor.shape[i]);
  }
  shape += tensor.shape.size() == 1 ? ",)" : ")";
  std::string dict = std::string("{'descr': '") + npyDescr(tensor.dtype) +
                     "', 'fortran_order': False, 'shape': " + shape + ", }";
  constexpr size_t kGrowthAxisMaxDigits = 21;
  if (!tensor.shape.empty()) {
    size_t digits = std::to_string(tensor.shape[0]).size();
    if (digits < kGrowthAxisMaxDigits)
      dict.append(kGrowthAxisMaxDigits - digits, ' ');
  }
  return dict;
}

//===----------------------------------------------------------------------===//
// Protobuf wire format and onnx.TensorProto
//===----------------------------------------------------------------------===//

enum WireType { Varint = 0, Fixed64 = 1, LengthDelimited = 2, Fixed32 = 5 };

/// Reads protobuf wire-format primitives from untrusted bytes; every read
/// fails rather than running past the end.
class WireReader {
public:
  explicit WireReader(std::string_view bytes) : bytes(bytes) {}

  bool atEnd() const { return pos == bytes.size(); }

  bool readVarint(uint64_t &value) {
    value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos == bytes.size())
        return false;
      uint8_t byte = uint8_t(bytes[pos++]);
      // The tenth byte may only contribute the top bit.
      if (shift == 63 && byte > 1)
        return false;
      value |= uint64_t(byte & 0x7f) << shift;
      if (!(byte & 0x80))
        return true;
    }
    return false;
  }

  bool readBytes(size_t size, std::string_view &value) {
    if (size > bytes.size() - pos)
      return false;
    value = bytes.substr(pos, size);
    pos += size;
    return true;
  }

private:
  std::string_view bytes;
  size_t pos = 0;
};

/// One field as read off the wire: a varint, or the bytes of a fixed or
/// length-delimited value.
struct WireField {
  uint64_t number = 0;
  WireType type = Varint;
  uint64_t varint = 0;
  std::string_view bytes;
};

Status readField(WireReader &reader, WireField &field) {
  uint64_t key;
  if (!reader.readVarint(key))
    return Status::error("truncated TensorProto (bad field key)");
  field.number = key >> 3;
  if (field.number == 0 || field.number > (1u << 29) - 1)
    return Status::error("invalid TensorProto field number " +
                         std::to_string(field.number));
  uint64_t size;
  switch (key & 7) {
  case Varint:
    field.type = Varint;
    if (!reader.readVarint(field.varint))
      return Status::error("truncated TensorProto (bad varint)");
    return Status::ok();
  case Fixed64:
    field.type = Fixed64;
    size = 8;
    break;
  case LengthDelimited:
    field.type = LengthDelimited;
    if (!reader.readVarint(size))
      return Status::error("truncated TensorProto (bad length)");
    break;
  case Fixed32:
    field.type = Fixed32;
    size = 4;
    break;
  default:
    return Status::error("unsupported protobuf wire type " +
                         std::to_string(key & 7) + " in field " +
                         std::to_string(field.number));
  }
  if (!reader.readBytes(size, field.bytes))
    return Status::error("truncated TensorProto (field " +
                         std::to_string(field.number) + " runs past the end)");
  return Status::ok();
}

/// onnx.TensorProto.DataType values and names, for the supported types and
/// for naming the others in errors.
struct OnnxType {
  int number;
  const char *name;
  bool supported;
  DType dtype;
};
constexpr OnnxType kOnnxTypes[] = {
    {0, "UNDEFINED", false, DType::F32},
    {1, "FLOAT", true, DType::F32},
    {2, "UINT8", false, DType::F32},
    {3, "INT8", false, DType::F32},
    {4, "UINT16", false, DType::F32},
    {5, "INT16", false, DType::F32},
    {6, "INT32", true, DType::I32},
    {7, "INT64", true, DType::I64},
    {8, "STRING", false, DType::F32},
    {9, "BOOL", true, DType::I1},
    {10, "FLOAT16", true, DType::F16},
    {11, "DOUBLE", true, DType::F64},
    {12, "UINT32", false, DType::F32},
    {13, "UINT64", false, DType::F32},
    {14, "COMPLEX64", false, DType::F32},
    {15, "COMPLEX128", false, DType::F32},
    {16, "BFLOAT16", true, DType::BF16},
    {17, "FLOAT8E4M3FN", false, DType::F32},
    {18, "FLOAT8E4M3FNUZ", false, DType::F32},
    {19, "FLOAT8E5M2", false, DType::F32},
    {20, "FLOAT8E5M2FNUZ", false, DType::F32},
    {21, "UINT4", false, DType::F32},
    {22, "INT4", false, DType::F32},
    {23, "FLOAT4E2M1", false, DType::F32},
};

/// The fields of a TensorProto as read, before they are checked against
/// each other.
struct TensorProtoFields {
  std::vector<int64_t> dims;
  uint64_t dataType = 0;
  std::string name;
  bool hasRaw = false;
  std::string_view raw;
  /// float_data and double_data as their little-endian bytes.
  std::string floatBytes, doubleBytes;
  std::vector<uint64_t> int32Data, int64Data;
};

/// Appends a repeated varint field's values, packed or not.
Status appendVarints(const WireField &field, const char *name,
                     std::vector<uint64_t> &values) {
  if (field.type == Varint) {
    values.push_back(field.varint);
    return Status::ok();
  }
  if (field.type != LengthDelimited)
    return Status::error(std::string("TensorProto field ") + name +
                         " has the wrong wire type");
  WireReader packed(field.bytes);
  while (!packed.atEnd()) {
    uint64_t value;
    if (!packed.readVarint(value))
      return Status::error(std::string("truncated packed ") + name);
    values.push_back(value);
  }
  return Status::ok();
}

/// Appends a repeated fixed-width field's bytes, packed or not.
Status appendFixed(const WireField &field, const char *name, WireType single,
                   size_t width, std::string &bytes) {
  if (field.type != single &&
      (field.type != LengthDelimited || field.bytes.size() % width != 0))
    return Status::error(std::string("TensorProto field ") + name +
                         " has the wrong wire type or size");
  bytes.append(field.bytes);
  return Status::ok();
}

Status readTensorProtoFields(std::string_view bytes,
                             TensorProtoFields &fields) {
  WireReader reader(bytes);
  while (!reader.atEnd()) {
    WireField field;
    if (Status status = readField(reader, field); !status)
      return status;
    Status status = Status::ok();
    switch (field.number) {
    case 1: {
      std::vector<uint64_t> dims;
      status = appendVarints(field, "dims", dims);
      for (uint64_t dim : dims)
        fields.dims.push_back(static_cast<int64_t>(dim));
      break;
    }
    case 2:
      if (field.type != Varint)
        return Status::error("TensorProto field data_type is not a varint");
      fields.dataType = field.varint;
      break;
    case 3:
      return Status::error("segmented TensorProtos are not supported");
    case 4:
      status = appendFixed(field, "float_data", Fixed32, 4, fields.floatBytes);
      break;
    case 5:
      status = appendVarints(field, "int32_data", fields.int32Data);
      break;
    case 7:
      status = appendVarints(field, "int64_data", fields.int64Data);
      break;
    case 8:
      if (field.type != LengthDelimited)
        return Status::error("TensorProto field name is not a string");
      fields.name = std::string(field.bytes);
      break;
    case 9:
      if (field.type != LengthDelimited)
        return Status::error("TensorProto field raw_data is not bytes");
      fields.hasRaw = true;
      fields.raw = field.bytes;
      break;
    case 10:
      status =
          appendFixed(field, "double_data", Fixed64, 8, fields.doubleBytes);
      break;
    case 13:
      return Status::error("external data not supported");
    case 14:
      // data_location: 1 is EXTERNAL.
      if (field.type == Varint && field.varint == 1)
        return Status::error("external data not supported");
      break;
    default:
      // doc_string, string_data, uint64_data, metadata_props and fields
      // added later: not needed for the supported types.
      break;
    }
    if (!status)
      return status;
  }
  return Status::ok();
}

/// Converts the typed *_data field of `tensor`'s type into its bytes.
Status typedData(const TensorProtoFields &fields, const OnnxType &type,
                 HostTensor &tensor) {
  size_t count = static_cast<size_t>(tensor.elements());
  size_t floats = fields.floatBytes.size() / 4,
         doubles = fields.doubleBytes.size() / 8;
  struct Field {
    const char *name;
    size_t size;
    bool holds;
  } candidates[] = {
      {"float_data", floats, tensor.dtype == DType::F32},
      {"double_data", doubles, tensor.dtype == DType::F64},
      {"int64_data", fields.int64Data.size(), tensor.dtype == DType::I64},
      {"int32_data", fields.int32Data.size(),
       tensor.dtype == DType::I32 || tensor.dtype == DType::I1 ||
           tensor.dtype == DType::F16 || tensor.dtype == DType::BF16},
  };
  for (const Field &field : candidates)
    if (!field.holds && field.size != 0)
      return Status::error(std::string("TensorProto of type ") + type.name +
                           " has " + field.name);
  for (const Field &field : candidates) {
    if (field.holds && field.size != count)
      return Status::error(
          std::string(field.name) + " holds " + std::to_string(field.size) +
          " values, but the shape " + shapeString(tensor.shape) + " has " +
          std::to_string(count) + " elements");
  }

  size_t width = dtypeSize(tensor.dtype);
  tensor.data.resize(count * width);
  auto store = [&](size_t index, uint64_t value) {
    for (size_t i = 0; i < width; ++i)
      tensor.data[index * width + i] = uint8_t(value >> (8 * i));
  };
  if (count == 0)
    return Status::ok();
  switch (tensor.dtype) {
  case DType::F32:
    std::memcpy(tensor.data.data(), fields.floatBytes.data(), count * 4);
    return Status::ok();
  case DType::F64:
    std::memcpy(tensor.data.data(), fields.doubleBytes.data(), count * 8);
    return Status::ok();
  case DType::I64:
    for (size_t i = 0; i < count; ++i)
      store(i, fields.int64Data[i]);
    return Status::ok();
  case DType::I32:
    // Negative int32 values are sign-extended varints; keep the low bits.
    for (size_t i = 0; i < count; ++i)
      store(i, fields.int32Data[i]);
    return Status::ok();
  case DType::I1:
  case DType::F16:
  case DType::BF16: {
    // Bools and 16-bit float bit patterns are stored in int32_data.
    uint64_t max = tensor.dtype == DType::I1 ? 1 : 0xffff;
    for (size_t i = 0; i < count; ++i) {
      if (fields.int32Data[i] > max)
        return Status::error("int32_data value " +
                             std::to_string(fields.int32Data[i]) +
                             " is out of range for " + type.name);
      store(i, fields.int32Data[i]);
    }
    return Status::ok();
  }
  }
  return Status::ok();
}

} // namespace

//===----------------------------------------------------------------------===//
// Public functions
//===----------------------------------------------------------------------===//

StatusOr<HostTensor> loomrt::parseNpy(std::string_view bytes) {
  if (bytes.substr(0, kNpyMagic.size()) != kNpyMagic || bytes.size() < 10)
    return Status::error("not a .npy file (bad magic)");
  int major = uint8_t(bytes[6]), minor = uint8_t(bytes[7]);
  // Version 1 has a 2-byte header length, versions 2 and 3 a 4-byte one.
  size_t lengthSize = major == 1 ? 2 : 4;
  if (major < 1 || major > 3 || minor != 0)
    return Status::error("unsupported .npy format version " +
                         std::to_string(major) + "." + std::to_string(minor));
  size_t headerStart = 8 + lengthSize;
  if (bytes.size() < headerStart)
    return Status::error("truncated .npy header");
  size_t headerSize = readLE(bytes, 8, lengthSize);
  if (headerSize > bytes.size() - headerStart)
    return Status::error("truncated .npy header");

  std::string descr;
  bool fortranOrder = false;
  HostTensor tensor;
  NpyHeaderParser parser(bytes.substr(headerStart, headerSize));
  if (Status status = parser.parse(descr, fortranOrder, tensor.shape); !status)
    return status;
  if (Status status = npyDType(descr, tensor.dtype); !status)
    return status;
  if (fortranOrder)
    return Status::error("Fortran-order .npy arrays are not supported");
  uint64_t expected;
  if (!checkedByteSize(tensor.shape, tensor.dtype, expected))
    return Status::error(".npy shape " + shapeString(tensor.shape) +
                         " is too large");

  std::string_view data = bytes.substr(headerStart + headerSize);
  if (data.size() < expected)
    return Status::error("truncated .npy data: expected " +
                         std::to_string(expected) + " bytes, got " +
                         std::to_string(data.size()));
  if (data.size() > expected)
    return Status::error(".npy file has " + std::to_string(data.size()) +
                         " data bytes, expected " + std::to_string(expected));
  tensor.data.assign(data.begin(), data.end());
  if (tensor.dtype == DType::I1)
    if (Status status = checkBools(tensor.data); !status)
      return status;
  return tensor;
}

std::string loomrt::writeNpy(const HostTensor &tensor) {
  if (tensor.dtype == DType::BF16)
    return writeNpy(widenBF16(tensor));
  std::string dict = npyHeaderDict(tensor);
  // Pad with spaces and a final newline so that the data starts at a
  // multiple of 64, as NumPy does; a header too long for version 1's 2-byte
  // length needs version 2.
  constexpr size_t kAlign = 64;
  size_t lengthSize = 2;
  size_t unpadded = 8 + lengthSize + dict.size() + 1;
  size_t headerSize = dict.size() + 1 + (kAlign - unpadded % kAlign);
  if (headerSize > 0xffff) {
    lengthSize = 4;
    unpadded = 8 + lengthSize + dict.size() + 1;
    headerSize = dict.size() + 1 + (kAlign - unpadded % kAlign);
  }
  std::string out(kNpyMagic);
  out += static_cast<char>(lengthSize == 2 ? 1 : 2);
  out += '\0';
  appendLE(out, static_cast<uint32_t>(headerSize), lengthSize);
  out += dict;
  out.append(headerSize - dict.size() - 1, ' ');
  out += '\n';
  out.append(reinterpret_cast<const char *>(tensor.data.data()),
             tensor.data.size());
  return out;
}

StatusOr<HostTensor> loomrt::parseTensorProto(std::string_view bytes) {
  TensorProtoFields fields;
  if (Status status = readTensorProtoFields(bytes, fields); !status)
    return status;

  const OnnxType *type = nullptr;
  for (const OnnxType &candidate : kOnnxTypes)
    if (uint64_t(candidate.number) == fields.dataType)
      type = &candidate;
  if (!type)
    return Status::error("unsupported TensorProto data type " +
                         std::to_string(fields.dataType));
  if (fields.dataType == 0)
    return Status::error("TensorProto has no data_type");
  if (!type->supported)
    return Status::error(std::string("unsupported TensorProto data type ") +
                         type->name);

  HostTensor tensor;
  tensor.dtype = type->dtype;
  tensor.shape = fields.dims;
  tensor.name = fields.name;
  uint64_t expected;
  if (!checkedByteSize(tensor.shape, tensor.dtype, expected))
    return Status::error("TensorProto dims " + shapeString(tensor.shape) +
                         " are negative or too large");
  if (!fields.hasRaw) {
    if (Status status = typedData(fields, *type, tensor); !status)
      return status;
    return tensor;
  }

  if (!fields.floatBytes.empty() || !fields.doubleBytes.empty() ||
      !fields.int32Data.empty() || !fields.int64Data.empty())
    return Status::error("TensorProto has both raw_data and typed data");
  if (fields.raw.size() != expected)
    return Status::error("raw_data has " + std::to_string(fields.raw.size()) +
                         " bytes, but " + type->name +
                         shapeString(tensor.shape) + " needs " +
                         std::to_string(expected));
  tensor.data.assign(fields.raw.begin(), fields.raw.end());
  if (tensor.dtype == DType::I1)
    if (Status status = checkBools(tensor.data); !status)
      return status;
  return tensor;
}

StatusOr<HostTensor> loomrt::readTensorFile(const std::string &path) {
  StatusOr<std::string> bytes = readFile(path);
  if (!bytes)
    return bytes.status();
  StatusOr<HostTensor> tensor = Status::error("");
  if (bytes->substr(0, kNpyMagic.size()) == kNpyMagic || endsWith(path, ".npy"))
    tensor = parseNpy(*bytes);
  else if (endsWith(path, ".pb"))
    tensor = parseTensorProto(*bytes);
  else
    return Status::error("unknown tensor file format for '" + path +
                         "' (expected .npy or .pb)");
  if (!tensor)
    return tensor.status().withContext(path);
  return tensor;
}

Status loomrt::writeNpyFile(const std::string &path, const HostTensor &tensor) {
  std::string bytes = writeNpy(tensor);
  std::FILE *file = std::fopen(path.c_str(), "wb");
  if (!file)
    return Status::error("cannot open '" + path +
                         "' for writing: " + std::strerror(errno));
  bool failed =
      std::fwrite(bytes.data(), 1, bytes.size(), file) != bytes.size();
  int writeErrno = errno;
  if (std::fclose(file) != 0 && !failed) {
    failed = true;
    writeErrno = errno;
  }
  if (failed)
    return Status::error("cannot write '" + path +
                         "': " + std::strerror(writeErrno));
  return Status::ok();
}

StatusOr<std::string> loomrt::readFile(const std::string &path) {
  std::FILE *file = std::fopen(path.c_str(), "rb");
  if (!file)
    return Status::error("cannot open '" + path + "': " + std::strerror(errno));
  std::string bytes;
  char buffer[1 << 16];
  size_t count;
  while ((count = std::fread(buffer, 1, sizeof(buffer), file)) > 0)
    bytes.append(buffer, count);
  bool failed = std::ferror(file);
  int readErrno = errno;
  std::fclose(file);
  if (failed)
    return Status::error("cannot read '" + path +
                         "': " + std::strerror(readErrno));
  return bytes;
}

StatusOr<HostTensor> loomrt::castTensor(const HostTensor &tensor, DType dtype) {
  if (dtype != DType::BF16 ||
      (tensor.dtype != DType::F32 && tensor.dtype != DType::F64))
    return Status::error(std::string("cannot convert ") +
                         dtypeName(tensor.dtype) + " to " + dtypeName(dtype) +
                         " (only f32 and f64 to bf16)");
  int64_t count = tensor.elements();
  if (tensor.data.size() != uint64_t(count) * dtypeSize(tensor.dtype))
    return Status::error("cannot convert a tensor whose data does not match "
                         "its shape " +
                         shapeString(tensor.shape));
  HostTensor result;
  result.dtype = dtype;
  result.shape = tensor.shape;
  result.name = tensor.name;
  result.data.resize(uint64_t(count) * sizeof(cpu::BF16));
  auto *out = reinterpret_cast<cpu::BF16 *>(result.data.data());
  for (int64_t i = 0; i < count; ++i) {
    // memcpy: the bytes need not be aligned for the wide type.
    if (tensor.dtype == DType::F32) {
      float value;
      std::memcpy(&value, tensor.data.data() + i * sizeof(float),
                  sizeof(value));
      out[i] = cpu::roundToBF16(value);
    } else {
      double value;
      std::memcpy(&value, tensor.data.data() + i * sizeof(double),
                  sizeof(value));
      out[i] = cpu::roundToBF16(value);
    }
  }
  return result;
}

Status loomrt::writeFileAtomically(const std::string &path,
                                   std::string_view bytes) {
  std::string temporary = path + ".tmp";
  FILE *file = std::fopen(temporary.c_str(), "wb");
  bool ok =
      file && std::fwrite(bytes.data(), 1, bytes.size(), file) == bytes.size();
  if (file && std::fclose(file) != 0)
    ok = false;
  if (!ok || std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::string reason = std::strerror(errno);
    std::remove(temporary.c_str());
    return Status::error("cannot write " + path + ": " + reason);
  }
  return Status::ok();
}
