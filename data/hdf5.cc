#include "data/hdf5.h"

#include <H5Cpp.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "common/atomic_file.h"
#include "common/status.h"

namespace pbert::data {
namespace {

constexpr const char* kMatrices[] = {"input_ids", "input_mask", "segment_ids"};
constexpr const char* kPredictions[] = {"masked_lm_positions", "masked_lm_ids"};
constexpr const char* kLabels = "next_sentence_labels";

absl::Status Hdf5Error(const std::string& path, const H5::Exception& e) {
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": HDF5 error in ", e.getFuncName(), ": ", e.getDetailMsg()));
}

}  // namespace

struct Hdf5Reader::Impl {
  H5::H5File file;
};

Hdf5Reader::Hdf5Reader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Hdf5Reader::~Hdf5Reader() = default;

absl::StatusOr<std::unique_ptr<Hdf5Reader>> Hdf5Reader::Open(const std::string& path) {
  H5::Exception::dontPrint();
  RETURN_IF_ERROR(CheckReadableFile(path, "HDF5 file"));
  if (!H5::H5File::isHdf5(path)) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not an HDF5 file"));
  }
  try {
    auto impl = std::make_unique<Impl>();
    impl->file.openFile(path, H5F_ACC_RDONLY);
    std::unique_ptr<Hdf5Reader> reader(new Hdf5Reader(std::move(impl)));
    reader->path_ = path;
    auto dims_of = [&](const char* name, int rank) -> absl::StatusOr<std::vector<hsize_t>> {
      if (!reader->impl_->file.nameExists(name)) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": no dataset '", name,
                         "'; an MLPerf BERT file has input_ids, input_mask, "
                         "segment_ids, masked_lm_positions, masked_lm_ids, next_sentence_labels"));
      }
      H5::DataSet set = reader->impl_->file.openDataSet(name);
      if (set.getTypeClass() != H5T_INTEGER) {
        // HDF5 would convert floats to integers silently, truncating them.
        return absl::InvalidArgumentError(absl::StrCat(
            path, ": dataset '", name, "' does not hold integers; MLPerf BERT files store ids, ",
            "masks, positions and labels as integers (int8 to int64)"));
      }
      H5::DataSpace space = set.getSpace();
      if (space.getSimpleExtentNdims() != rank) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": dataset '", name, "' has rank ",
                                                       space.getSimpleExtentNdims(), ", expected ",
                                                       rank));
      }
      std::vector<hsize_t> dims(rank);
      space.getSimpleExtentDims(dims.data());
      return dims;
    };
    ASSIGN_OR_RETURN(auto labels, dims_of(kLabels, 1));
    reader->rows_ = static_cast<int64_t>(labels[0]);
    // All [N,width] datasets of a group share one width: max_len for the
    // token matrices, max_predictions for the MLM slots.
    auto check_group = [&](absl::Span<const char* const> names, int* width) -> absl::Status {
      for (const char* name : names) {
        ASSIGN_OR_RETURN(auto dims, dims_of(name, 2));
        if (*width == 0) *width = static_cast<int>(dims[1]);
        if (static_cast<int64_t>(dims[0]) != reader->rows_ || static_cast<int>(dims[1]) != *width) {
          return absl::InvalidArgumentError(
              absl::StrCat(path, ": dataset '", name, "' does not match the others' shape"));
        }
      }
      return absl::OkStatus();
    };
    RETURN_IF_ERROR(check_group(kMatrices, &reader->max_len_));
    RETURN_IF_ERROR(check_group(kPredictions, &reader->max_predictions_));
    return reader;
  } catch (const H5::Exception& e) {
    return Hdf5Error(path, e);
  }
}

absl::StatusOr<std::vector<Instance>> Hdf5Reader::Read(int64_t begin, int64_t count) {
  if (begin < 0 || count < 0 || begin + count > rows_) {
    return absl::OutOfRangeError(absl::StrCat(path_, ": rows [", begin, ", ", begin + count,
                                              ") outside the file's ", rows_));
  }
  try {
    auto read = [&](const char* name, int width) {
      H5::DataSet set = impl_->file.openDataSet(name);
      H5::DataSpace file_space = set.getSpace();
      std::vector<hsize_t> offset = {static_cast<hsize_t>(begin), 0};
      std::vector<hsize_t> shape = {static_cast<hsize_t>(count), static_cast<hsize_t>(width)};
      int rank = width == 0 ? 1 : 2;
      file_space.selectHyperslab(H5S_SELECT_SET, shape.data(), offset.data());
      H5::DataSpace memory(rank, shape.data());
      std::vector<int32_t> out(count * std::max(width, 1));
      set.read(out.data(), H5::PredType::NATIVE_INT32, memory, file_space);
      return out;
    };
    const int S = max_len_, P = max_predictions_;
    auto ids = read("input_ids", S), mask = read("input_mask", S),
         segments = read("segment_ids", S);
    auto positions = read("masked_lm_positions", P), masked = read("masked_lm_ids", P);
    auto labels = read(kLabels, 0);
    std::vector<Instance> out(count);
    for (int64_t r = 0; r < count; ++r) {
      Instance& in = out[r];
      // input_mask: 1 for the sequence's tokens, then 0 for the padding.
      int length = 0;
      while (length < S && mask[r * S + length] == 1) ++length;
      for (int i = length; i < S; ++i) {
        if (mask[r * S + i] != 0) {
          return absl::DataLossError(absl::StrCat(
              path_, ": row ", begin + r, ": input_mask is not 1s followed by 0s (value ",
              mask[r * S + i], " at ", i, "); the file is damaged or not MLPerf BERT data"));
        }
      }
      in.input_ids.assign(ids.begin() + r * S, ids.begin() + r * S + length);
      in.segment_ids.assign(segments.begin() + r * S, segments.begin() + r * S + length);
      for (int p = 0; p < P; ++p) {
        int32_t position = positions[r * P + p];
        if (position == 0) continue;  // padding: [CLS] at 0 is never masked
        if (position >= length) {
          return absl::DataLossError(absl::StrCat(path_, ": row ", begin + r, " masks position ",
                                                  position, " beyond its length ", length));
        }
        in.masked_positions.push_back(position);
        in.masked_ids.push_back(masked[r * P + p]);
      }
      in.next_sentence_label = labels[r];
    }
    return out;
  } catch (const H5::Exception& e) {
    return Hdf5Error(path_, e);
  }
}

absl::Status WriteHdf5(const std::string& path, const std::vector<Instance>& instances, int max_len,
                       int max_predictions) {
  H5::Exception::dontPrint();
  const hsize_t N = instances.size(), S = max_len, P = max_predictions;
  std::vector<int32_t> ids(N * S, 0), positions(N * P, 0), masked(N * P, 0);
  std::vector<int8_t> mask(N * S, 0), segments(N * S, 0), labels(N, 0);
  for (hsize_t r = 0; r < N; ++r) {
    const Instance& in = instances[r];
    if (in.length() > max_len || in.masked_positions.size() > P) {
      return absl::InvalidArgumentError(absl::StrCat(
          "instance ", r, " has ", in.length(), " tokens and ", in.masked_positions.size(),
          " masked; the file allows ", max_len, " and ", max_predictions));
    }
    for (int i = 0; i < in.length(); ++i) {
      ids[r * S + i] = in.input_ids[i];
      mask[r * S + i] = 1;
      segments[r * S + i] = static_cast<int8_t>(in.segment_ids[i]);
    }
    for (size_t p = 0; p < in.masked_positions.size(); ++p) {
      positions[r * P + p] = in.masked_positions[p];
      masked[r * P + p] = in.masked_ids[p];
    }
    labels[r] = static_cast<int8_t>(in.next_sentence_label);
  }
  // HDF5 writes by file name: into the atomic writer's temporary file, which
  // Commit() then fsyncs and renames over the target.
  ASSIGN_OR_RETURN(AtomicFileWriter writer, AtomicFileWriter::Create(path));
  try {
    H5::H5File file(writer.temp_path(), H5F_ACC_TRUNC);
    auto write = [&](const char* name, const void* data, const H5::PredType& type,
                     std::vector<hsize_t> dims) {
      H5::DSetCreatPropList properties;
      std::vector<hsize_t> chunk = dims;
      chunk[0] = std::max<hsize_t>(1, std::min<hsize_t>(dims[0], 1024));
      if (dims[0] > 0) {
        properties.setChunk(static_cast<int>(dims.size()), chunk.data());
        properties.setDeflate(4);
      }
      H5::DataSpace space(static_cast<int>(dims.size()), dims.data());
      file.createDataSet(name, type, space, properties).write(data, type);
    };
    write("input_ids", ids.data(), H5::PredType::NATIVE_INT32, {N, S});
    write("input_mask", mask.data(), H5::PredType::NATIVE_INT8, {N, S});
    write("segment_ids", segments.data(), H5::PredType::NATIVE_INT8, {N, S});
    write("masked_lm_positions", positions.data(), H5::PredType::NATIVE_INT32, {N, P});
    write("masked_lm_ids", masked.data(), H5::PredType::NATIVE_INT32, {N, P});
    write(kLabels, labels.data(), H5::PredType::NATIVE_INT8, {N});
    file.close();
  } catch (const H5::Exception& e) {
    return Hdf5Error(path, e);
  }
  return writer.Commit();
}

}  // namespace pbert::data
