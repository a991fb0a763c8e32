#include "train/tensorboard.h"

#include <chrono>
#include <cstring>

#include "common/checksum.h"
#include "common/logging.h"
#include "common/status.h"

namespace pbert::train {
namespace {

// Protocol buffer wire format (protobuf.dev, Encoding): a field is a key,
// (number << 3) | wire type, then its value: a varint (type 0), 8 bytes
// little-endian (type 1), a varint length and the bytes (type 2), or 4
// bytes little-endian (type 5).
void PutVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

template <class T>
void PutLittleEndian(std::string& out, T value) {
  uint8_t bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));  // x86-64 and AArch64 Linux are little-endian
  out.append(reinterpret_cast<const char*>(bytes), sizeof(T));
}

void PutKey(std::string& out, int field, int wire_type) {
  PutVarint(out, static_cast<uint64_t>(field) << 3 | static_cast<uint64_t>(wire_type));
}

void PutBytes(std::string& out, int field, const std::string& bytes) {
  PutKey(out, field, 2);
  PutVarint(out, bytes.size());
  out += bytes;
}

// tensorflow/core/util/event.proto: Event { double wall_time = 1; int64 step
// = 2; oneof what { string file_version = 3; Summary summary = 5; ... } }.
std::string EventHeader(double wall_time, int64_t step) {
  std::string event;
  PutKey(event, 1, 1);
  PutLittleEndian(event, wall_time);
  PutKey(event, 2, 0);
  PutVarint(event, static_cast<uint64_t>(step));
  return event;
}

// tensorflow/core/framework/summary.proto: Summary { repeated Value value =
// 1; }, Value { string tag = 1; float simple_value = 2; ... }.
std::string SummaryOf(const std::vector<Scalar>& scalars) {
  std::string summary;
  for (const auto& [tag, value] : scalars) {
    std::string v;
    PutBytes(v, 1, tag);
    PutKey(v, 2, 5);
    PutLittleEndian(v, static_cast<float>(value));
    PutBytes(summary, 1, v);
  }
  return summary;
}

uint32_t MaskedCrc(absl::string_view bytes) {
  return MaskCrc32c(Crc32c({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}));
}

// TFRecord framing (tensorflow/core/lib/io/record_writer.h): the length as
// uint64, its masked CRC-32C, the data, the data's masked CRC-32C, all
// little-endian.
std::string Record(const std::string& data) {
  std::string length;
  PutLittleEndian(length, static_cast<uint64_t>(data.size()));
  std::string record = length;
  PutLittleEndian(record, MaskedCrc(length));
  record += data;
  PutLittleEndian(record, MaskedCrc(data));
  return record;
}

}  // namespace

uint64_t WholeTfRecords(absl::string_view text) {
  uint64_t at = 0;
  while (text.size() - at >= 12) {
    uint64_t length;
    uint32_t length_crc;
    std::memcpy(&length, text.data() + at, 8);
    std::memcpy(&length_crc, text.data() + at + 8, 4);
    if (length_crc != MaskedCrc(text.substr(at, 8)) ||
        length > text.size() - at - 16) {
      break;
    }
    uint32_t data_crc;
    std::memcpy(&data_crc, text.data() + at + 12 + length, 4);
    if (data_crc != MaskedCrc(text.substr(at + 12, length))) break;
    at += 16 + length;
  }
  return at;
}

absl::StatusOr<std::unique_ptr<TensorBoardLog>> TensorBoardLog::Open(const std::string& path,
                                                                     uint64_t keep_bytes) {
  ASSIGN_OR_RETURN(std::unique_ptr<AppendLog> file,
                   AppendLog::Open(path, keep_bytes, WholeTfRecords));
  if (!file->recovery().empty()) logging::Get("train")->warn("{}", file->recovery());
  std::unique_ptr<TensorBoardLog> log(new TensorBoardLog(std::move(file)));
  if (log->file_->bytes() == 0) {
    const double now =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    std::string event = EventHeader(now, 0);
    PutBytes(event, 3, "brain.Event:2");
    RETURN_IF_ERROR(log->file_->Write(Record(event)));
  }
  return log;
}

absl::Status TensorBoardLog::Write(int64_t step, const std::vector<Scalar>& scalars,
                                   double wall_time) {
  std::string event = EventHeader(wall_time, step);
  PutBytes(event, 5, SummaryOf(scalars));
  return file_->Write(Record(event));
}

}  // namespace pbert::train
