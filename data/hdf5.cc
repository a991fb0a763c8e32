#include "data/hdf5.h"

#include <H5Cpp.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "common/atomic_file.h"
#include "common/bytes.h"
#include "common/fault.h"
#include "common/platform.h"
#include "common/status.h"

#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
#include <sanitizer/common_interface_defs.h>
#endif

namespace pbert::data {
namespace {

constexpr const char* kMatrices[] = {"input_ids", "input_mask", "segment_ids"};
constexpr const char* kPredictions[] = {"masked_lm_positions", "masked_lm_ids"};
constexpr const char* kLabels = "next_sentence_labels";

// Held by every use of libhdf5 here, so that no thread is inside it when a
// variable-length file's rows are read in a child process (ReadRowsApart):
// a child forked while another thread holds libhdf5's own lock would wait
// on it forever. libhdf5 runs one call at a time anyway (its thread-safe
// build has one lock), so this costs the readers no parallelism.
std::recursive_mutex& Hdf5Lock() {
  static std::recursive_mutex mu;
  return mu;
}

// HDF5's own words ("H5Fopen failed") name its function, not the cause:
// what packed-bert was doing, what that means, and what to do come first.
absl::Status Hdf5Error(const std::string& path, const H5::Exception& e) {
  const std::string function = e.getFuncName(), detail = e.getDetailMsg();
  const bool opening = function.find("H5File") != std::string::npos ||
                       detail.find("H5Fopen") != std::string::npos;
  return absl::DataLossError(absl::StrCat(
      path, opening ? ": HDF5 cannot open this file" : ": HDF5 cannot read this file",
      " (", function, ": ", detail,
      "); it is cut short or damaged: check it with 'h5ls -r ", path,
      "' and copy or write it again"));
}

// The datasets any layout reads.
constexpr const char* kAllDatasets[] = {
    "input_ids",     "input_mask",           "segment_ids",      "masked_lm_positions",
    "masked_lm_ids", "next_sentence_labels", "packed_input_len", "packed_masked_lm_len"};

// Whether dataset `name` of `file` (`file_bytes` long) stores every entry
// it declares, from its layout alone; `elsewhere` refuses data that lies
// in other files.
absl::Status CheckDatasetStored(H5::H5File& file, const std::string& path, const char* name,
                                uint64_t file_bytes,
                                const std::function<absl::Status(const std::string&)>& elsewhere) {
  H5::DataSet set = file.openDataSet(name);
  const hid_t id = set.getId();
  H5::DataSpace space = set.getSpace();
  const int rank = space.getSimpleExtentNdims();
  std::vector<hsize_t> dims(std::max(rank, 0));
  if (rank > 0) space.getSimpleExtentDims(dims.data());
  uint64_t elements = 1;
  for (hsize_t d : dims) elements = d == 0 || elements <= UINT64_MAX / d ? elements * d : UINT64_MAX;
  auto refuse = [&](const std::string& what) {
    return absl::DataLossError(absl::StrCat(
        path, ": dataset '", name, "' declares ", absl::StrJoin(dims, " x "), " entries but ",
        what, "; the file was not written whole: write it again"));
  };
  const uint64_t stored = H5Dget_storage_size(id);
  if (stored > file_bytes) {
    return refuse(absl::StrCat("claims ", stored, " bytes of storage in a file of ", file_bytes));
  }
  H5::DSetCreatPropList create = set.getCreatePlist();
  switch (create.getLayout()) {
    case H5D_COMPACT:  // in the file's header: there whole, or the file does not open
      break;
    case H5D_CONTIGUOUS: {
      if (create.getExternalCount() > 0) return elsewhere("keeps its data in external files");
      const uint64_t entry = set.getDataType().getSize();
      if (elements > 0 && (entry == 0 || stored / entry < elements)) {
        return refuse(absl::StrCat("stores ", stored, " bytes, room for ",
                                   entry == 0 ? 0 : stored / entry));
      }
      break;
    }
    case H5D_CHUNKED: {
      std::vector<hsize_t> chunk(std::max(rank, 0));
      if (rank > 0) create.getChunk(rank, chunk.data());
      uint64_t needed = elements == 0 ? 0 : 1;
      for (int i = 0; i < rank && needed > 0; ++i) {
        const uint64_t per = chunk[i] == 0 ? 1 : (dims[i] + chunk[i] - 1) / chunk[i];
        needed = needed <= UINT64_MAX / std::max<uint64_t>(per, 1) ? needed * per : UINT64_MAX;
      }
      hsize_t chunks = 0;
      if (H5Dget_num_chunks(id, space.getId(), &chunks) < 0) return refuse("its chunks cannot be counted");
      if (chunks < needed) {
        return refuse(absl::StrCat("stores ", chunks, " of the ", needed, " chunks they take"));
      }
      break;
    }
    default:
      return elsewhere("is a virtual dataset, whose data lies in other files");
  }
  return absl::OkStatus();
}

// Whether each dataset of `file` that a layout reads has all its declared
// rows stored: a file may declare 10^12 rows and store none (HDF5 then
// returns fill values that look like rows), or claim storage past its own
// end. Checked from the datasets' layouts alone, before any row is read.
absl::Status CheckStoredWhole(H5::H5File& file, const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoError(absl::StrCat("cannot stat ", path), errno);
  const uint64_t file_bytes = static_cast<uint64_t>(st.st_size);
  for (const char* name : kAllDatasets) {
    // openDataSet follows a link into another file: the link is read first.
    H5L_info_t link;
    if (H5Lexists(file.getId(), name, H5P_DEFAULT) <= 0) continue;
    if (H5Lget_info(file.getId(), name, &link, H5P_DEFAULT) < 0) {
      return absl::DataLossError(
          absl::StrCat(path, ": the link '", name, "' cannot be read; write the file again"));
    }
    // Data that lies in another file: a link to it, storage in external
    // files, or a virtual dataset.
    auto elsewhere = [&](const std::string& what) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": dataset '", name, "' ", what, "; packed-bert reads only the files it is ",
          "given: write the data into ", path, " itself (h5copy, or h5py's copy)"));
    };
    if (link.type == H5L_TYPE_EXTERNAL) return elsewhere("is an external link to another file");
    if (link.type != H5L_TYPE_HARD && link.type != H5L_TYPE_SOFT) {
      return elsewhere("is a user-defined link");
    }
    RETURN_IF_ERROR(CheckDatasetStored(file, path, name, file_bytes, elsewhere));
  }
  return absl::OkStatus();
}

// The datasets of the variable-length layouts (plus packed_input_len and
// packed_masked_lm_len when packed).
constexpr const char* kVariable[] = {"input_ids", "segment_ids", "masked_lm_positions",
                                     "masked_lm_ids", "next_sentence_labels"};

// Whether libhdf5 survives `path`'s metadata, tried in a child process
// (defined below).
absl::Status VetApart(const std::string& path);

}  // namespace

const char* Hdf5LayoutName(Hdf5Layout layout) {
  switch (layout) {
    case Hdf5Layout::kFixed:
      return "MLPerf fixed-width";
    case Hdf5Layout::kVariable:
      return "NVIDIA variable-length";
    case Hdf5Layout::kPacked:
      return "NVIDIA packed";
  }
  return "?";
}

// Named, not anonymous: Hdf5Reader::Impl, which has external linkage,
// holds them.
namespace hdf5_rows {

// Where HDF5 puts a variable-length file's rows: blocks of a few MB handed
// out in order and freed together, so that a shard's hundreds of thousands
// of rows cost no allocation each.
class Arena {
 public:
  void* Allocate(size_t bytes) {
    bytes = (bytes + 7) / 8 * 8;
    if (blocks_.empty() || used_ + bytes > size_) {
      size_ = std::max<size_t>(bytes, 8 << 20);
      blocks_.push_back(std::make_unique<uint64_t[]>(size_ / 8));
      used_ = 0;
    }
    void* out = reinterpret_cast<char*>(blocks_.back().get()) + used_;
    used_ += bytes;
    return out;
  }

 private:
  std::vector<std::unique_ptr<uint64_t[]>> blocks_;
  size_t used_ = 0, size_ = 0;
};

using IntegerRows = std::vector<absl::Span<const int32_t>>;

}  // namespace hdf5_rows

using hdf5_rows::Arena;
using hdf5_rows::IntegerRows;

struct Hdf5Reader::Impl {
  H5::H5File file;
  // Variable-length layouts: every dataset's rows (in `arena`), and each
  // row's first sequence.
  Arena arena;
  std::vector<IntegerRows> sets;  // by ReadVariable's names
  std::vector<int64_t> row_first;
};

Hdf5Reader::Hdf5Reader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Hdf5Reader::~Hdf5Reader() {
  std::lock_guard<std::recursive_mutex> lock(Hdf5Lock());
  impl_.reset();
}

bool IsHdf5File(const std::string& path) {
  std::lock_guard<std::recursive_mutex> lock(Hdf5Lock());
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  H5::Exception::dontPrint();
  try {
    return H5::H5File::isHdf5(path);
  } catch (const H5::Exception&) {
    return false;
  }
}

absl::StatusOr<Hdf5Shape> Hdf5Reader::Inspect(const std::string& path) {
  std::lock_guard<std::recursive_mutex> lock(Hdf5Lock());
  H5::Exception::dontPrint();
  RETURN_IF_ERROR(CheckReadableFile(path, "HDF5 file"));
  if (!H5::H5File::isHdf5(path)) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not an HDF5 file"));
  }
  RETURN_IF_ERROR(VetApart(path));
  try {
    H5::H5File file(path, H5F_ACC_RDONLY);
    RETURN_IF_ERROR(CheckStoredWhole(file, path));
    Hdf5Shape shape;
    const bool variable =
        file.nameExists("input_ids") && file.openDataSet("input_ids").getTypeClass() == H5T_VLEN;
    if (variable) {
      shape.layout =
          file.nameExists("packed_input_len") ? Hdf5Layout::kPacked : Hdf5Layout::kVariable;
    }
    const char* counted = variable ? "input_ids" : kLabels;
    if (!file.nameExists(counted)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": no dataset '", counted,
                       "'; an MLPerf BERT file has input_ids, input_mask, "
                       "segment_ids, masked_lm_positions, masked_lm_ids, next_sentence_labels"));
    }
    H5::DataSpace space = file.openDataSet(counted).getSpace();
    if (space.getSimpleExtentNdims() < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": dataset '", counted, "' is a scalar, not one entry per row"));
    }
    std::vector<hsize_t> dims(space.getSimpleExtentNdims());
    space.getSimpleExtentDims(dims.data());
    shape.rows = static_cast<int64_t>(dims[0]);
    return shape;
  } catch (const H5::Exception& e) {
    return Hdf5Error(path, e);
  }
}

absl::StatusOr<std::unique_ptr<Hdf5Reader>> Hdf5Reader::Open(const std::string& path) {
  std::lock_guard<std::recursive_mutex> lock(Hdf5Lock());
  H5::Exception::dontPrint();
  RETURN_IF_ERROR(CheckReadableFile(path, "HDF5 file"));
  if (!H5::H5File::isHdf5(path)) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not an HDF5 file"));
  }
  RETURN_IF_ERROR(VetApart(path));
  try {
    auto impl = std::make_unique<Impl>();
    impl->file.openFile(path, H5F_ACC_RDONLY);
    RETURN_IF_ERROR(CheckStoredWhole(impl->file, path));
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
    H5::H5File& file = reader->impl_->file;
    if (file.nameExists("input_ids") &&
        file.openDataSet("input_ids").getTypeClass() == H5T_VLEN) {
      reader->layout_ = file.nameExists("packed_input_len") ? Hdf5Layout::kPacked
                                                            : Hdf5Layout::kVariable;
      RETURN_IF_ERROR(reader->ReadVariable());
      RETURN_IF_ERROR(reader->CheckNotEmpty());
      return reader;
    }
    ASSIGN_OR_RETURN(auto labels, dims_of(kLabels, 1));
    reader->rows_ = static_cast<int64_t>(labels[0]);
    // All [N,width] datasets of a group share one width: max_len for the
    // token matrices, max_predictions for the MLM slots.
    auto check_group = [&](absl::Span<const char* const> names, int* width) -> absl::Status {
      for (const char* name : names) {
        ASSIGN_OR_RETURN(auto dims, dims_of(name, 2));
        if (*width == 0) *width = static_cast<int>(dims[1]);
        if (static_cast<int64_t>(dims[0]) != reader->rows_) {
          return absl::InvalidArgumentError(
              absl::StrCat(path, ": dataset '", name, "' has ", dims[0], " rows where '", kLabels,
                           "' has ", reader->rows_, "; every dataset has one row per sequence"));
        }
        if (static_cast<int>(dims[1]) != *width) {
          return absl::InvalidArgumentError(
              absl::StrCat(path, ": dataset '", name, "' is ", dims[1], " wide where '", names[0],
                           "' is ", *width, "; ", absl::StrJoin(names, ", "), " share one width"));
        }
      }
      return absl::OkStatus();
    };
    RETURN_IF_ERROR(check_group(kMatrices, &reader->max_len_));
    RETURN_IF_ERROR(check_group(kPredictions, &reader->max_predictions_));
    RETURN_IF_ERROR(reader->CheckNotEmpty());
    return reader;
  } catch (const H5::Exception& e) {
    return Hdf5Error(path, e);
  }
}

namespace {

void* ArenaAllocate(size_t bytes, void* arena) {
  return static_cast<Arena*>(arena)->Allocate(bytes);
}
void ArenaFree(void*, void*) {}

// Dataset `name` of a variable-length file as rows of integers (in
// `arena`): vlen rows, or, where `scalars` allows, one value per row
// (NVIDIA's variable-length files keep next_sentence_labels scalar).
// `rows`: the count every dataset must have (-1: the first sets it).
absl::StatusOr<IntegerRows> ReadIntegerRows(H5::H5File& file, const std::string& path,
                                            const char* name, bool scalars, int64_t* rows,
                                            Arena* arena) {
  H5::DataSet set = file.openDataSet(name);
  H5::DataSpace space = set.getSpace();
  if (space.getSimpleExtentNdims() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": dataset '", name,
                                                   "' is not one row per entry (rank ",
                                                   space.getSimpleExtentNdims(), ")"));
  }
  hsize_t n = 0;
  space.getSimpleExtentDims(&n);
  if (*rows < 0) *rows = static_cast<int64_t>(n);
  if (static_cast<int64_t>(n) != *rows) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": dataset '", name, "' has ", n, " rows, input_ids ", *rows));
  }
  IntegerRows out(n);
  if (set.getTypeClass() == H5T_VLEN) {
    if (set.getVarLenType().getSuper().getClass() != H5T_INTEGER) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": dataset '", name, "' holds variable-length rows of non-integers"));
    }
    H5::VarLenType memory(H5::PredType::NATIVE_INT32);
    H5::DSetMemXferPropList transfer;
    H5Pset_vlen_mem_manager(transfer.getId(), ArenaAllocate, arena, ArenaFree, nullptr);
    std::vector<hvl_t> buffer(n);
    if (n > 0) set.read(buffer.data(), memory, H5::DataSpace::ALL, H5::DataSpace::ALL, transfer);
    for (hsize_t r = 0; r < n; ++r) {
      out[r] = {static_cast<const int32_t*>(buffer[r].p), buffer[r].len};
    }
  } else if (set.getTypeClass() == H5T_INTEGER && scalars) {
    auto* values = static_cast<int32_t*>(arena->Allocate(n * sizeof(int32_t)));
    if (n > 0) set.read(values, H5::PredType::NATIVE_INT32);
    for (hsize_t r = 0; r < n; ++r) out[r] = {values + r, 1};
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": dataset '", name, "' does not hold ",
        scalars ? "integers or variable-length integer rows" : "variable-length integer rows"));
  }
  return out;
}

// Writes all of `bytes` to `fd` (a pipe): false if the reader went away.
bool WriteAll(int fd, const void* bytes, size_t size) {
  const char* p = static_cast<const char*>(bytes);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// The child's way of saying `status` (not OK) through RunApart's pipe.
void SendError(int fd, const absl::Status& status) {
  const std::string message =
      absl::StrCat("E", static_cast<int>(status.code()), " ", status.message());
  WriteAll(fd, message.data(), message.size());
}

// The child's side of ReadRowsApart: each dataset's row count, row lengths
// and values ('R'), or an error's message ('E'), into `fd`.
void SendRows(H5::H5File& file, const std::string& path, const std::vector<const char*>& names,
              bool scalars, int fd) {
  Arena arena;
  int64_t rows = -1;
  std::string out = "R";
  for (const char* name : names) {
    absl::StatusOr<IntegerRows> set;
    try {
      set = ReadIntegerRows(file, path, name, scalars, &rows, &arena);
    } catch (const H5::Exception& e) {
      set = Hdf5Error(path, e);
    }
    if (!set.ok()) {
      SendError(fd, set.status());
      return;
    }
    const uint64_t n = set->size();
    out.append(reinterpret_cast<const char*>(&n), sizeof(n));
    for (const auto& row : *set) {
      const uint64_t length = row.size();
      out.append(reinterpret_cast<const char*>(&length), sizeof(length));
      out.append(reinterpret_cast<const char*>(row.data()), row.size() * sizeof(int32_t));
    }
    if (!WriteAll(fd, out.data(), out.size())) return;
    out.clear();
  }
}

// Reads what `child` writes into `fd` until it closes it; true (and the
// child killed) if that takes over `limit_seconds`.
bool ReadFromChild(int fd, pid_t child, int64_t limit_seconds, std::string* got) {
  char buffer[1 << 16];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(limit_seconds);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd ready{fd, POLLIN, 0};
    const int polled = left.count() > 0 ? ::poll(&ready, 1, static_cast<int>(left.count())) : 0;
    if (polled < 0 && errno == EINTR) continue;
    if (polled == 0) {
      ::kill(child, SIGKILL);
      return true;
    }
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    got->append(buffer, static_cast<size_t>(n));
  }
}

// Whether this build runs under AddressSanitizer, whose shadow memory
// takes terabytes of address space: no address-space limit fits it.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

// The child's side of RunApart: `work` into `fd`, then the child's end.
// Its address space is held to `limit_mib` (a lower limit already set
// stays).
[[noreturn]] void RunChild(int fd, int64_t limit_mib, const std::function<void(int fd)>& work) {
  rlimit limit;
  if (!kAddressSanitizer && ::getrlimit(RLIMIT_AS, &limit) == 0) {
    const rlim_t bytes = static_cast<rlim_t>(limit_mib) << 20;
    if (limit.rlim_cur == RLIM_INFINITY || bytes < limit.rlim_cur) {
      limit.rlim_cur = bytes;
      ::setrlimit(RLIMIT_AS, &limit);
    }
  }
  // What the C library says as the child dies of a damaged file (HDF5's
  // own messages are off) would come before the parent's one line.
  const int null = ::open("/dev/null", O_WRONLY);
  if (null >= 0) ::dup2(null, STDERR_FILENO);
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
  // Under a fuzzer, the child inherits its crash handlers, which would
  // write libhdf5's death here (the outcome this child exists for, and
  // the parent's one line) as a finding: it dies as it would in a command.
  __sanitizer_set_death_callback(nullptr);
  for (const int signal : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) ::signal(signal, SIG_DFL);
#endif
  FaultPoint("hdf5-apart", 0);
  try {
    work(fd);
  } catch (...) {  // nothing unwinds into the parent's frames
    ::_exit(1);
  }
  ::_exit(0);
}

// Runs `child` (which writes 'R' and a payload, or an error's 'E' message,
// into the fd it is given) in a child process and returns the payload:
// libhdf5 1.10 trusts what a damaged file says of itself, copies past its
// own buffers or reads through a null pointer (SIGSEGV) or loops without
// end (all found by tests/fuzz's hdf5 target), so such a file ends the
// child, not the command. The child is given 10 s and a second per 10 MB
// of the file, and the address space this process maps now, 1 GiB and 16
// bytes a byte of the file (a variable-length file's values, each at least
// a byte in the file, held as int32 by libhdf5, the rows and the message):
// a damaged file that claims more than it holds ends the child instead of
// taking the machine's memory. `doing` says what it did ("read its
// variable-length rows").
// The caller holds Hdf5Lock, so no other thread is inside libhdf5 at the
// fork; the child takes no lock (a mutex the parent held is not the
// child's: its thread has another id) and runs no destructor of the
// parent's objects.
absl::StatusOr<std::string> RunApart(const std::string& path, const char* doing,
                                     const std::function<void(int fd)>& child_work) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoError(absl::StrCat("cannot stat ", path), errno);
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
  const int64_t base_seconds = 2;  // under the fuzzer's own limit for an input
#else
  const int64_t base_seconds = 10;
#endif
  const int64_t limit_seconds = base_seconds + static_cast<int64_t>(st.st_size) / (10 << 20);
  const int64_t limit_mib = MappedMiB() + 1024 + 16 * static_cast<int64_t>(st.st_size >> 20) + 16;
  int fds[2];
  if (::pipe(fds) != 0) return ErrnoError(absl::StrCat("cannot make a pipe to ", doing), errno);
  const pid_t child = ::fork();
  if (child < 0) {
    const int error = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return ErrnoError(absl::StrCat("cannot start a process to read ", path), error);
  }
  if (child == 0) {
    ::close(fds[0]);
    RunChild(fds[1], limit_mib, child_work);
  }
  ::close(fds[1]);
  std::string got;
  const bool late = ReadFromChild(fds[0], child, limit_seconds, &got);
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (late) {
    return absl::DataLossError(absl::StrCat(
        path, ": HDF5 took over ", limit_seconds, " s to ", doing,
        " and was stopped; the file is damaged: check it with 'h5ls -r ", path,
        "' and copy or write it again"));
  }
  if (WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) != 0) || got.empty()) {
    const std::string how = WIFSIGNALED(status) ? absl::StrCat("signal ", WTERMSIG(status))
                                                : absl::StrCat("exit status ", WEXITSTATUS(status));
    return absl::DataLossError(absl::StrCat(
        path, ": HDF5 failed to ", doing, " (its reader, held to ", limit_mib,
        " MiB of address space, ended with ", how,
        "); the file is damaged: check it with 'h5ls -r ", path, "' and copy or write it again"));
  }
  if (got[0] == 'E') {
    int code = 0;
    const size_t space = got.find(' ');
    if (space == std::string::npos || !absl::SimpleAtoi(got.substr(1, space - 1), &code)) {
      return absl::InternalError(absl::StrCat(path, ": the HDF5 reader's message is damaged"));
    }
    return absl::Status(static_cast<absl::StatusCode>(code), got.substr(space + 1));
  }
  got.erase(0, 1);  // the 'R'
  return got;
}

// The rows of the variable-length datasets `names` of `file`, read apart
// (RunApart): libhdf5 1.10 trusts the sizes a file's global heap gives its
// variable-length rows. Its rows come back through the pipe into `arena`.
// The caller holds Hdf5Lock.
absl::StatusOr<std::vector<IntegerRows>> ReadRowsApart(H5::H5File& file, const std::string& path,
                                                       const std::vector<const char*>& names,
                                                       bool scalars, int64_t* rows, Arena* arena) {
  ASSIGN_OR_RETURN(std::string got,
                   RunApart(path, "read its variable-length rows",
                            [&](int fd) { SendRows(file, path, names, scalars, fd); }));
  // The rows, as SendRows wrote them (the child read them from this very
  // file; a short message means it stopped half-way).
  std::vector<IntegerRows> sets;
  size_t at = 0;
  auto take = [&](void* to, size_t size) {
    if (got.size() - at < size) return false;
    CopyBytes(to, got.data() + at, size);
    at += size;
    return true;
  };
  auto cut = [&]() {
    return absl::DataLossError(
        absl::StrCat(path,
                     ": HDF5's reader stopped part-way through the rows; the file is "
                     "damaged: check it with 'h5ls -r ",
                     path, "' and copy or write it again"));
  };
  for (size_t k = 0; k < names.size(); ++k) {
    uint64_t n = 0;
    if (!take(&n, sizeof(n)) || n > (got.size() - at) / sizeof(uint64_t)) return cut();
    IntegerRows set(n);
    for (uint64_t r = 0; r < n; ++r) {
      uint64_t length = 0;
      if (!take(&length, sizeof(length)) || length > (got.size() - at) / sizeof(int32_t)) {
        return cut();
      }
      auto* values = static_cast<int32_t*>(arena->Allocate(length * sizeof(int32_t)));
      take(values, length * sizeof(int32_t));
      set[r] = {values, length};
    }
    sets.push_back(std::move(set));
  }
  if (at != got.size()) return cut();
  *rows = sets.empty() ? 0 : static_cast<int64_t>(sets[0].size());
  return sets;
}

// Opens `path` and reads all the metadata Inspect and Open read (each
// dataset's link, layout, storage, type and extent), here in the child.
absl::Status ReadMetadata(const std::string& path) {
  try {
    H5::H5File file(path, H5F_ACC_RDONLY);
    RETURN_IF_ERROR(CheckStoredWhole(file, path));
    for (const char* name : kAllDatasets) {
      if (!file.nameExists(name)) continue;
      H5::DataSet set = file.openDataSet(name);
      (void)set.getTypeClass();
      H5::DataSpace space = set.getSpace();
      const int rank = space.getSimpleExtentNdims();
      if (rank > 0) {
        std::vector<hsize_t> dims(rank);
        space.getSimpleExtentDims(dims.data());
      }
    }
    return absl::OkStatus();
  } catch (const H5::Exception& e) {
    return Hdf5Error(path, e);
  }
}

// libhdf5 1.10 reads through a null pointer on some damaged metadata (as
// it opens a dataset's link): the metadata is read first in a child
// (RunApart), and what it says, an error or the crash itself, is the
// answer; the command's own process then reads only metadata that the
// child read without harm. The caller holds Hdf5Lock.
absl::Status VetApart(const std::string& path) {
  return RunApart(path, "read its metadata", [&](int fd) {
           const absl::Status read = ReadMetadata(path);
           if (read.ok()) {
             WriteAll(fd, "R", 1);
           } else {
             SendError(fd, read);
           }
         }).status();
}

// One row of a variable-length file, by dataset.
struct VariableRow {
  absl::Span<const int32_t> ids, segments, positions, masked, labels;
  absl::Span<const int32_t> lengths;  // each sequence's tokens
  absl::Span<const int32_t> slots;    // each sequence's masked slots
  int32_t length = 0, slot = 0;       // of an unpacked row's one sequence

  // Row `r` of the datasets `sets` (kVariable's order, then
  // packed_input_len and packed_masked_lm_len if packed).
  VariableRow(const std::vector<IntegerRows>& sets, int64_t r, bool packed)
      : ids(sets[0][r]),
        segments(sets[1][r]),
        positions(sets[2][r]),
        masked(sets[3][r]),
        labels(sets[4][r]),
        length(static_cast<int32_t>(ids.size())),
        slot(static_cast<int32_t>(positions.size())) {
    if (packed) {
      lengths = sets[5][r];
      slots = sets[6][r];
    } else {
      lengths = {&length, 1};
      slots = {&slot, 1};
    }
  }
  VariableRow(const VariableRow&) = delete;
  VariableRow& operator=(const VariableRow&) = delete;
};

// The row's datasets agree with each other, and its packed lengths (if
// any) describe its sequences; the error says what does not fit.
std::string CheckRow(const VariableRow& row, bool packed) {
  if (row.ids.size() != row.segments.size()) {
    return absl::StrCat(row.ids.size(), " input_ids but ", row.segments.size(), " segment_ids");
  }
  if (row.positions.size() != row.masked.size()) {
    return absl::StrCat(row.positions.size(), " masked_lm_positions but ", row.masked.size(),
                        " masked_lm_ids");
  }
  if (packed) {
    int64_t tokens = 0, predictions = 0;
    for (int32_t l : row.lengths) tokens += l;
    for (int32_t s : row.slots) predictions += s;
    auto below = [](absl::Span<const int32_t> v, int32_t low) {
      return std::any_of(v.begin(), v.end(), [&](int32_t x) { return x < low; });
    };
    if (row.lengths.empty() || row.lengths.size() != row.slots.size() || below(row.lengths, 1) ||
        below(row.slots, 0)) {
      return "packed_input_len and packed_masked_lm_len do not describe its sequences";
    }
    if (tokens != static_cast<int64_t>(row.ids.size()) ||
        predictions != static_cast<int64_t>(row.positions.size())) {
      return absl::StrCat("its sequences' lengths sum to ", tokens, " tokens and ", predictions,
                          " masked slots, the row holds ", row.ids.size(), " and ",
                          row.positions.size());
    }
  }
  if (row.labels.size() != row.lengths.size()) {
    return absl::StrCat(row.labels.size(), " next_sentence_labels for ", row.lengths.size(),
                        " sequence(s)");
  }
  return "";
}

// The row's sequences, appended to `out` (if given); "" or what is wrong.
// `predictions`: the most masked slots of one of them.
std::string SplitRow(const VariableRow& row, bool packed, std::vector<Instance>* out,
                     int* predictions) {
  int32_t offset = 0, slot = 0;
  for (size_t k = 0; k < row.lengths.size(); ++k) {
    const int32_t length = row.lengths[k];
    Instance in;
    if (out != nullptr) {
      in.input_ids.assign(row.ids.begin() + offset, row.ids.begin() + offset + length);
      in.segment_ids.assign(row.segments.begin() + offset, row.segments.begin() + offset + length);
    }
    int masked = 0;
    for (int32_t s = slot; s < slot + row.slots[k]; ++s) {
      const int32_t position = row.positions[s];
      const int32_t local = position - offset;  // packed positions count from the row
      if (!packed && position == 0) continue;   // padding, as in fixed-width files
      if (local < 1 || local >= length) {
        return absl::StrCat("sequence ", k, " masks position ", position,
                            ", outside its tokens [", offset + 1, ", ", offset + length, ")");
      }
      ++masked;
      if (out != nullptr) {
        in.masked_positions.push_back(local);
        in.masked_ids.push_back(row.masked[s]);
      }
    }
    *predictions = std::max(*predictions, masked);
    if (out != nullptr) {
      in.next_sentence_label = row.labels[k];
      out->push_back(std::move(in));
    }
    offset += length;
    slot += row.slots[k];
  }
  return "";
}

}  // namespace

absl::Status Hdf5Reader::CheckNotEmpty() const {
  if (rows_ > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(path_, ": the ", Hdf5LayoutName(layout_),
                                                 " datasets hold no rows; give files with data"));
}

absl::Status Hdf5Reader::ReadVariable() {
  const bool packed = layout_ == Hdf5Layout::kPacked;
  std::vector<const char*> names(std::begin(kVariable), std::end(kVariable));
  if (packed) {
    names.push_back("packed_input_len");
    names.push_back("packed_masked_lm_len");
  }
  rows_ = -1;
  for (const char* name : names) {
    if (!impl_->file.nameExists(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          path_, ": no dataset '", name, "'; an ", Hdf5LayoutName(layout_), " file has ",
          packed ? "input_ids, segment_ids, masked_lm_positions, masked_lm_ids, "
                   "next_sentence_labels, packed_input_len and packed_masked_lm_len"
                 : "input_ids, segment_ids, masked_lm_positions, masked_lm_ids and "
                   "next_sentence_labels"));
    }
  }
  ASSIGN_OR_RETURN(impl_->sets,
                   ReadRowsApart(impl_->file, path_, names, !packed, &rows_, &impl_->arena));
  // Every row is checked now; Read makes the sequences of the rows it is
  // asked for.
  impl_->row_first.assign(1, 0);
  for (int64_t r = 0; r < rows_; ++r) {
    const VariableRow row(impl_->sets, r, packed);
    std::string problem = CheckRow(row, packed);
    if (problem.empty()) problem = SplitRow(row, packed, nullptr, &max_predictions_);
    if (!problem.empty()) {
      return absl::DataLossError(absl::StrCat(path_, ": row ", r, ": ", problem,
                                              "; the file is damaged or not ",
                                              Hdf5LayoutName(layout_), " BERT data"));
    }
    max_len_ = std::max<int>(max_len_, static_cast<int>(row.ids.size()));
    impl_->row_first.push_back(impl_->row_first.back() + static_cast<int64_t>(row.lengths.size()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Instance>> Hdf5Reader::Read(int64_t begin, int64_t count,
                                                       std::vector<int>* depths) {
  if (begin < 0 || count < 0 || begin + count > rows_) {
    return absl::OutOfRangeError(absl::StrCat(path_, ": rows [", begin, ", ", begin + count,
                                              ") outside the file's ", rows_));
  }
  if (depths != nullptr) depths->clear();
  if (layout_ != Hdf5Layout::kFixed) {
    const auto& first = impl_->row_first;
    if (depths != nullptr) {
      for (int64_t r = begin; r < begin + count; ++r) {
        depths->push_back(static_cast<int>(first[r + 1] - first[r]));
      }
    }
    std::vector<Instance> out;
    out.reserve(first[begin + count] - first[begin]);
    const bool packed = layout_ == Hdf5Layout::kPacked;
    int predictions = 0;
    for (int64_t r = begin; r < begin + count; ++r) {
      SplitRow(VariableRow(impl_->sets, r, packed), packed, &out, &predictions);  // checked
    }
    return out;
  }
  if (depths != nullptr) depths->assign(count, 1);
  try {
    auto read = [&](const char* name, int width) {
      // (The rows are made into instances outside it, on every thread.)
      std::lock_guard<std::recursive_mutex> lock(Hdf5Lock());
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
                       int max_predictions, Existing existing) {
  std::lock_guard<std::recursive_mutex> lock(Hdf5Lock());
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
  // HDF5 builds the file in memory (its core driver, no backing store); the
  // bytes then go to disk through the atomic writer, whose errors (a full
  // disk) are statuses and whose temporary goes away on failure. HDF5 never
  // writes to disk itself, so it cannot fail half-way through a file.
  std::vector<uint8_t> image;
  try {
    H5::FileAccPropList access;
    if (H5Pset_fapl_core(access.getId(), 1 << 20, /*backing_store=*/0) < 0) {
      return absl::InternalError("HDF5: cannot select the in-memory file driver");
    }
    H5::H5File file(path, H5F_ACC_TRUNC, H5::FileCreatPropList::DEFAULT, access);
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
    file.flush(H5F_SCOPE_GLOBAL);
    const ssize_t size = H5Fget_file_image(file.getId(), nullptr, 0);
    if (size < 0) return absl::InternalError("HDF5: cannot take the in-memory file's image");
    image.resize(static_cast<size_t>(size));
    if (H5Fget_file_image(file.getId(), image.data(), image.size()) != size) {
      return absl::InternalError("HDF5: cannot take the in-memory file's image");
    }
    file.close();
  } catch (const H5::Exception& e) {
    return Hdf5Error(path, e);
  }
  ASSIGN_OR_RETURN(AtomicFileWriter writer, AtomicFileWriter::Create(path));
  RETURN_IF_ERROR(writer.Write(image));
  return writer.Commit(existing);
}

}  // namespace pbert::data
