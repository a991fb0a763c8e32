// A reader of TensorBoard event files for tests, written from the formats'
// published descriptions and sharing no code with the writer
// (train/tensorboard.cc): TFRecord framing (uint64 length, its masked
// CRC-32C, the data, the data's masked CRC-32C, little-endian) and the
// protocol buffer wire format of the Event and Summary messages.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace pbert::testing {

// CRC-32C bit by bit: the reflected Castagnoli polynomial 0x82F63B78,
// initial value and final xor 0xFFFFFFFF (RFC 3720, B.4).
inline uint32_t BitwiseCrc32c(const std::string& bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char byte : bytes) {
    crc ^= byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return crc ^ 0xFFFFFFFFu;
}

// TFRecord's mask: rotate right by 15 bits and add 0xa282ead8.
inline uint32_t MaskedCrc(const std::string& bytes) {
  const uint32_t crc = BitwiseCrc32c(bytes);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

struct TbEvent {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;
  std::map<std::string, float> scalars;  // tag -> simple_value
};

class ProtoReader {
 public:
  explicit ProtoReader(const std::string& bytes) : bytes_(bytes) {}
  bool done() const { return at_ >= bytes_.size(); }
  uint64_t Varint() {
    uint64_t value = 0;
    for (int shift = 0;; shift += 7) {
      if (at_ >= bytes_.size() || shift > 63) throw std::runtime_error("bad varint");
      const uint8_t b = static_cast<uint8_t>(bytes_[at_++]);
      value |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return value;
    }
  }
  std::string Take(size_t n) {
    if (at_ + n > bytes_.size()) throw std::runtime_error("field past the end");
    std::string out = bytes_.substr(at_, n);
    at_ += n;
    return out;
  }
  template <class T>
  T Fixed() {
    const std::string raw = Take(sizeof(T));
    T value;
    std::memcpy(&value, raw.data(), sizeof(T));
    return value;
  }
  // The next field's number and its value's bytes (varints re-encoded as
  // the decoded number in `varint`).
  struct Field {
    int number = 0, wire_type = 0;
    uint64_t varint = 0;
    std::string bytes;
  };
  Field Next() {
    const uint64_t key = Varint();
    Field f;
    f.number = static_cast<int>(key >> 3);
    f.wire_type = static_cast<int>(key & 7);
    switch (f.wire_type) {
      case 0: f.varint = Varint(); break;
      case 1: f.bytes = Take(8); break;
      case 2: f.bytes = Take(Varint()); break;
      case 5: f.bytes = Take(4); break;
      default: throw std::runtime_error("unknown wire type");
    }
    return f;
  }

 private:
  const std::string& bytes_;
  size_t at_ = 0;
};

inline TbEvent ParseEvent(const std::string& data) {
  TbEvent event;
  ProtoReader event_reader(data);
  while (!event_reader.done()) {
    const auto f = event_reader.Next();
    if (f.number == 1 && f.wire_type == 1) std::memcpy(&event.wall_time, f.bytes.data(), 8);
    if (f.number == 2 && f.wire_type == 0) event.step = static_cast<int64_t>(f.varint);
    if (f.number == 3 && f.wire_type == 2) event.file_version = f.bytes;
    if (f.number != 5 || f.wire_type != 2) continue;
    ProtoReader summary(f.bytes);
    while (!summary.done()) {
      const auto value = summary.Next();
      if (value.number != 1 || value.wire_type != 2) continue;
      ProtoReader fields(value.bytes);
      std::string tag;
      float simple = 0;
      bool has_simple = false;
      while (!fields.done()) {
        const auto v = fields.Next();
        if (v.number == 1 && v.wire_type == 2) tag = v.bytes;
        if (v.number == 2 && v.wire_type == 5) {
          std::memcpy(&simple, v.bytes.data(), 4);
          has_simple = true;
        }
      }
      if (has_simple) event.scalars[tag] = simple;
    }
  }
  return event;
}

// Every event of the file at `path`; throws on a bad CRC or a cut record.
inline std::vector<TbEvent> ReadEvents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<TbEvent> events;
  size_t at = 0;
  while (at < file.size()) {
    if (at + 12 > file.size()) throw std::runtime_error("a record's header is cut");
    const std::string length_bytes = file.substr(at, 8);
    uint64_t length;
    uint32_t length_crc;
    std::memcpy(&length, length_bytes.data(), 8);
    std::memcpy(&length_crc, file.data() + at + 8, 4);
    if (length_crc != MaskedCrc(length_bytes)) throw std::runtime_error("bad length CRC");
    if (at + 12 + length + 4 > file.size()) throw std::runtime_error("a record is cut");
    const std::string data = file.substr(at + 12, length);
    uint32_t data_crc;
    std::memcpy(&data_crc, file.data() + at + 12 + length, 4);
    if (data_crc != MaskedCrc(data)) throw std::runtime_error("bad data CRC");
    events.push_back(ParseEvent(data));
    at += 12 + length + 4;
  }
  return events;
}

}  // namespace pbert::testing
