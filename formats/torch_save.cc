#include "formats/torch_save.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <cstring>
#include <map>
#include <memory>
#include <unordered_map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/bytes.h"
#include "common/checksum.h"
#include "common/mmap_file.h"
#include "common/status.h"

namespace pbert::formats {
namespace {

using Bytes = absl::Span<const uint8_t>;

uint64_t Le(Bytes b, size_t at, int n) {
  uint64_t v = 0;
  for (int k = 0; k < n; ++k) v |= uint64_t{b[at + k]} << (8 * k);
  return v;
}

// The records of a zip archive as torch.save writes them: stored, not
// compressed, each checked against its CRC-32 when read. Zip64 sizes and
// offsets are followed.
class ZipArchive {
 public:
  static absl::StatusOr<ZipArchive> Open(Bytes file) {
    ZipArchive zip;
    zip.file_ = file;
    RETURN_IF_ERROR(zip.ReadDirectory());
    return zip;
  }

  bool Has(const std::string& name) const { return records_.count(prefix_ + name) > 0; }

  // The bytes of `name`, under the archive's top folder.
  absl::StatusOr<Bytes> Read(const std::string& name) const {
    auto it = records_.find(prefix_ + name);
    if (it == records_.end()) {
      return absl::DataLossError(absl::StrCat("the archive has no record '", name, "'"));
    }
    const Record& r = it->second;
    if (r.method != 0) {
      return absl::DataLossError(absl::StrCat("record '", name, "' is compressed (method ",
                                              r.method,
                                              "); torch.save stores records as they are"));
    }
    if (r.local > file_.size() || file_.size() - r.local < 30 ||
        Le(file_, r.local, 4) != 0x04034b50) {
      return absl::DataLossError(absl::StrCat("record '", name, "' has no local header"));
    }
    const uint64_t start = r.local + 30 + Le(file_, r.local + 26, 2) + Le(file_, r.local + 28, 2);
    if (start > file_.size() || r.size > file_.size() - start) {
      return absl::DataLossError(
          absl::StrCat("record '", name, "' runs past the end (truncated?)"));
    }
    Bytes data = file_.subspan(start, r.size);
    if (kChecksumsCompared && Crc32(data) != r.crc) {
      return absl::DataLossError(
          absl::StrCat("record '", name, "' fails its CRC-32 (the file is damaged)"));
    }
    return data;
  }

 private:
  struct Record {
    uint64_t local = 0, size = 0;
    uint32_t crc = 0;
    int method = 0;
  };

  absl::Status ReadDirectory() {
    const Bytes f = file_;
    auto bad = [](const std::string& what) {
      return absl::DataLossError(
          absl::StrCat("not a zip archive (torch.save files since PyTorch "
                       "1.6 are) or a truncated one: ",
                       what));
    };
    if (f.size() < 22) return bad("too short");
    // The end-of-central-directory record, behind at most a 64 KiB comment.
    size_t end = f.size() - 22;
    const size_t lowest = f.size() > 22 + 65535 ? f.size() - 22 - 65535 : 0;
    while (Le(f, end, 4) != 0x06054b50) {
      if (end == lowest) return bad("no end-of-central-directory record");
      --end;
    }
    uint64_t count = Le(f, end + 10, 2), offset = Le(f, end + 16, 4);
    if ((count == 0xffff || offset == 0xffffffff) && end >= 20 &&
        Le(f, end - 20, 4) == 0x07064b50) {  // zip64 locator, then its end record
      const uint64_t at = Le(f, end - 20 + 8, 8);
      if (at > f.size() || f.size() - at < 56 || Le(f, at, 4) != 0x06064b50) {
        return bad("a damaged zip64 end record");
      }
      count = Le(f, at + 32, 8);
      offset = Le(f, at + 48, 8);
    }
    uint64_t at = offset;
    for (uint64_t k = 0; k < count; ++k) {
      if (at > f.size() || f.size() - at < 46 || Le(f, at, 4) != 0x02014b50) {
        return bad(absl::StrCat("central directory entry ", k, " is damaged"));
      }
      Record r;
      r.method = static_cast<int>(Le(f, at + 10, 2));
      r.crc = static_cast<uint32_t>(Le(f, at + 16, 4));
      r.size = Le(f, at + 24, 4);
      uint64_t compressed = Le(f, at + 20, 4);
      r.local = Le(f, at + 42, 4);
      const uint64_t name_len = Le(f, at + 28, 2), extra_len = Le(f, at + 30, 2),
                     comment_len = Le(f, at + 32, 2);
      if (f.size() - at - 46 < name_len + extra_len + comment_len) {
        return bad(absl::StrCat("central directory entry ", k, " is truncated"));
      }
      std::string name(reinterpret_cast<const char*>(f.data() + at + 46), name_len);
      // Zip64 extra field: the 64-bit values of the fields set to all ones.
      for (uint64_t e = at + 46 + name_len; e + 4 <= at + 46 + name_len + extra_len;) {
        const uint64_t id = Le(f, e, 2), len = Le(f, e + 2, 2);
        uint64_t v = e + 4;
        if (id == 0x0001) {
          if (r.size == 0xffffffff && v + 8 <= e + 4 + len) r.size = Le(f, v, 8), v += 8;
          if (compressed == 0xffffffff && v + 8 <= e + 4 + len) compressed = Le(f, v, 8), v += 8;
          if (r.local == 0xffffffff && v + 8 <= e + 4 + len) r.local = Le(f, v, 8);
        }
        e += 4 + len;
      }
      if (r.method == 0 && compressed != r.size) {
        return bad(absl::StrCat("record '", name, "' has two sizes"));
      }
      if (absl::EndsWith(name, "data.pkl") && prefix_.empty()) {
        prefix_ = name.substr(0, name.size() - 8);
      }
      records_[name] = r;
      at += 46 + name_len + extra_len + comment_len;
    }
    if (prefix_.empty() && records_.count("data.pkl") == 0) {
      return absl::DataLossError("the archive has no data.pkl (not written by torch.save)");
    }
    return absl::OkStatus();
  }

  Bytes file_;
  std::string prefix_;  // "archive/" (PyTorch 2) or the file's stem (1.x)
  std::map<std::string, Record> records_;
};

// The values data.pkl builds, owned by the unpickler that made them and
// referred to by plain pointers: containers are shared, as pickle's memo
// shares them, and may hold themselves, and a file nested any depth is let
// go of without recursion (a chain of shared_ptr would free itself through
// the stack, one frame a level). Objects we have no use for are kept opaque.
struct Value;
using Ref = Value*;

struct Value {
  enum class Kind {
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kTuple,
    kList,
    kDict,
    kGlobal,
    kStorage,
    kTensor,
    kObject
  };
  Kind kind = Kind::kNone;
  int64_t i = 0;
  double f = 0;
  std::string s;           // string, "module.name" of a global or an object's class, storage key
  std::vector<Ref> items;  // tuple, list
  std::vector<std::pair<Ref, Ref>> entries;  // dict
  at::ScalarType dtype = at::kFloat;         // storage
  at::Tensor tensor;
};

struct StorageType {
  const char* name;
  at::ScalarType dtype;
};

constexpr StorageType kStorageTypes[] = {
    {"torch.FloatStorage", at::kFloat}, {"torch.DoubleStorage", at::kDouble},
    {"torch.HalfStorage", at::kHalf},   {"torch.BFloat16Storage", at::kBFloat16},
    {"torch.LongStorage", at::kLong},   {"torch.IntStorage", at::kInt},
    {"torch.ShortStorage", at::kShort}, {"torch.CharStorage", at::kChar},
    {"torch.ByteStorage", at::kByte},   {"torch.BoolStorage", at::kBool},
};

// The globals a pickle may name: those torch.save writes for tensors,
// storages and containers, as PyTorch's own weights_only loader allows them
// (torch/_weights_only_unpickler.py), besides the storage types above. Any
// other (os.system, builtins.eval, a class of the saving program) is
// refused by name: nothing is ever called, but a file that asks for a call
// is not a file of weights.
bool AllowedGlobal(absl::string_view name) {
  static constexpr absl::string_view kAllowed[] = {
      "collections.OrderedDict",
      "torch._utils._rebuild_tensor",
      "torch._utils._rebuild_tensor_v2",
      "torch._utils._rebuild_parameter",
      "torch._utils._rebuild_parameter_with_state",
      "torch._utils._rebuild_sparse_tensor",
      "torch._utils._rebuild_sparse_csr_tensor",
      "torch._utils._rebuild_meta_tensor_no_storage",
      "torch._tensor._rebuild_from_type_v2",
      "torch.nn.parameter.Parameter",
      "torch.serialization._get_layout",
      "torch.Size",
      "torch.Tensor",
      "torch.device",
      "torch.storage.UntypedStorage",
      "torch.storage.TypedStorage",
      "torch.bfloat16",
      "torch.bool",
      "torch.complex32",
      "torch.complex64",
      "torch.complex128",
      "torch.float16",
      "torch.float32",
      "torch.float64",
      "torch.int8",
      "torch.int16",
      "torch.int32",
      "torch.int64",
      "torch.uint8",
  };
  for (absl::string_view allowed : kAllowed) {
    if (name == allowed) return true;
  }
  for (const StorageType& t : kStorageTypes) {
    if (name == t.name) return true;
  }
  return false;
}

class Unpickler {
 public:
  Unpickler(Bytes pickle, const ZipArchive* archive)
      : data_(pickle.data()), size_(pickle.size()), archive_(archive) {}

  Ref Make(Value::Kind kind) {
    values_.push_back(std::make_unique<Value>());
    values_.back()->kind = kind;
    return values_.back().get();
  }

  absl::StatusOr<Ref> Run() {
    while (true) {
      const size_t at = pos_;
      ASSIGN_OR_RETURN(uint8_t op, U8());
      absl::Status status = Step(op);
      if (!status.ok()) {
        return absl::DataLossError(absl::StrCat("data.pkl: ", status.message(), " (opcode 0x",
                                                absl::Hex(op, absl::kZeroPad2), " at byte ", at,
                                                ")"));
      }
      if (done_) break;
    }
    if (stack_.size() != 1) return absl::DataLossError("data.pkl: unbalanced stack at STOP");
    return stack_.back();
  }

 private:
  absl::Status Need(size_t n) {
    if (n > size_ - pos_) return absl::DataLossError("truncated");
    return absl::OkStatus();
  }
  absl::StatusOr<uint8_t> U8() {
    RETURN_IF_ERROR(Need(1));
    return data_[pos_++];
  }
  absl::StatusOr<uint64_t> Little(int bytes) {
    RETURN_IF_ERROR(Need(bytes));
    uint64_t v = 0;
    for (int b = 0; b < bytes; ++b) v |= uint64_t{data_[pos_ + b]} << (8 * b);
    pos_ += bytes;
    return v;
  }
  absl::StatusOr<std::string> Text(uint64_t n) {
    RETURN_IF_ERROR(Need(n));
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }
  absl::StatusOr<std::string> Line() {
    size_t end = pos_;
    while (end < size_ && data_[end] != '\n') ++end;
    if (end == size_) return absl::DataLossError("truncated");
    std::string s(reinterpret_cast<const char*>(data_ + pos_), end - pos_);
    pos_ = end + 1;
    return s;
  }
  void Push(Ref v) { stack_.push_back(std::move(v)); }
  // A string or bytes object after its `width`-byte length.
  absl::Status PushText(int width) {
    ASSIGN_OR_RETURN(uint64_t n, Little(width));
    ASSIGN_OR_RETURN(std::string s, Text(n));
    Push(String(std::move(s)));
    return absl::OkStatus();
  }
  absl::Status PushUnsigned(int width) {
    ASSIGN_OR_RETURN(uint64_t v, Little(width));
    Push(Int(static_cast<int64_t>(v)));
    return absl::OkStatus();
  }
  absl::StatusOr<Ref> Pop() {
    if (stack_.size() <= Floor()) return absl::DataLossError("pop from an empty stack");
    Ref v = stack_.back();
    stack_.pop_back();
    return v;
  }
  absl::StatusOr<Ref> Top() {
    if (stack_.size() <= Floor()) return absl::DataLossError("empty stack");
    return stack_.back();
  }
  size_t Floor() const { return marks_.empty() ? 0 : marks_.back(); }
  // The items above the last mark, which is removed.
  absl::StatusOr<std::vector<Ref>> PopMark() {
    if (marks_.empty()) return absl::DataLossError("no mark");
    size_t mark = marks_.back();
    marks_.pop_back();
    std::vector<Ref> items(stack_.begin() + mark, stack_.end());
    stack_.resize(mark);
    return items;
  }
  Ref Int(int64_t i) {
    Ref v = Make(Value::Kind::kInt);
    v->i = i;
    return v;
  }
  Ref String(std::string s) {
    Ref v = Make(Value::Kind::kString);
    v->s = std::move(s);
    return v;
  }
  Ref Tuple(std::vector<Ref> items) {
    Ref v = Make(Value::Kind::kTuple);
    v->items = std::move(items);
    return v;
  }
  absl::Status SetItems(const Ref& dict, const std::vector<Ref>& kv) {
    if (dict->kind != Value::Kind::kDict) {
      // Items of an object we keep opaque (e.g. a Counter): accepted, unused.
      if (dict->kind == Value::Kind::kObject) return absl::OkStatus();
      return absl::DataLossError("SETITEM(S) on something that is not a dict");
    }
    if (kv.size() % 2 != 0) return absl::DataLossError("odd number of dict items");
    for (size_t k = 0; k < kv.size(); k += 2) dict->entries.emplace_back(kv[k], kv[k + 1]);
    return absl::OkStatus();
  }
  absl::Status Append(const Ref& list, const std::vector<Ref>& items) {
    if (list->kind == Value::Kind::kObject) return absl::OkStatus();
    if (list->kind != Value::Kind::kList) return absl::DataLossError("APPEND(S) on a non-list");
    for (const Ref& v : items) list->items.push_back(v);
    return absl::OkStatus();
  }
  absl::Status PushGlobal(std::string name) {
    if (!AllowedGlobal(name)) {
      return absl::DataLossError(absl::StrCat(
          "it names the global '", name, "', which torch.save does not write for tensors ",
          "(only PyTorch's tensors, storages and containers are read; nothing is called)"));
    }
    Ref v = Make(Value::Kind::kGlobal);
    v->s = std::move(name);
    Push(v);
    return absl::OkStatus();
  }
  absl::Status Memo(uint64_t key) {
    ASSIGN_OR_RETURN(Ref top, Top());
    memo_[key] = top;
    return absl::OkStatus();
  }
  absl::Status Get(uint64_t key) {
    auto it = memo_.find(key);
    if (it == memo_.end()) return absl::DataLossError(absl::StrCat("memo ", key, " unset"));
    Push(it->second);
    return absl::OkStatus();
  }

  static absl::StatusOr<std::vector<int64_t>> Ints(const Ref& tuple, const char* what) {
    if (tuple->kind != Value::Kind::kTuple && tuple->kind != Value::Kind::kList) {
      return absl::DataLossError(absl::StrCat("tensor ", what, " is not a tuple"));
    }
    std::vector<int64_t> out;
    for (const Ref& v : tuple->items) {
      if (v->kind != Value::Kind::kInt || v->i < 0) {
        return absl::DataLossError(absl::StrCat("tensor ", what, " holds a non-count"));
      }
      out.push_back(v->i);
    }
    return out;
  }

  absl::StatusOr<at::Tensor> StorageTensor(const Value& storage) {
    auto cached = storages_.find(storage.s);
    if (cached != storages_.end()) return cached->second;
    ASSIGN_OR_RETURN(Bytes bytes, archive_->Read("data/" + storage.s));
    const size_t size = bytes.size();
    const int64_t element = static_cast<int64_t>(c10::elementSize(storage.dtype));
    int64_t needed = 0;
    if (storage.i < 0 || __builtin_mul_overflow(storage.i, element, &needed) ||
        static_cast<int64_t>(size) != needed) {
      return absl::DataLossError(absl::StrCat("storage '", storage.s, "' has ", size,
                                              " bytes, not the ", storage.i, " elements of ",
                                              element, " bytes it declares"));
    }
    at::Tensor t = at::empty({storage.i}, at::TensorOptions().dtype(storage.dtype));
    CopyBytes(t.data_ptr(), bytes.data(), size);
    storages_[storage.s] = t;
    return t;
  }

  absl::StatusOr<Ref> RebuildTensor(const std::vector<Ref>& args) {
    if (args.size() < 4 || args[0]->kind != Value::Kind::kStorage ||
        args[1]->kind != Value::Kind::kInt || args[1]->i < 0) {
      return absl::DataLossError(
          "_rebuild_tensor arguments are not (storage, offset, size, "
          "stride, ...)");
    }
    ASSIGN_OR_RETURN(std::vector<int64_t> sizes, Ints(args[2], "size"));
    ASSIGN_OR_RETURN(std::vector<int64_t> strides, Ints(args[3], "stride"));
    if (sizes.size() != strides.size()) return absl::DataLossError("tensor size and stride differ");
    if (sizes.size() > kMaxTensorRank) {
      return absl::DataLossError(absl::StrCat("a tensor of ", sizes.size(),
                                              " dimensions, more than the ", kMaxTensorRank,
                                              " a weight may have"));
    }
    ASSIGN_OR_RETURN(at::Tensor storage, StorageTensor(*args[0]));
    const int64_t offset = args[1]->i;
    int64_t last = offset;  // the last element the tensor reaches
    bool empty = false;
    bool overflow = false;
    for (size_t d = 0; d < sizes.size(); ++d) {
      if (sizes[d] == 0) empty = true;
      int64_t reach = 0;
      overflow |= __builtin_mul_overflow(std::max<int64_t>(sizes[d] - 1, 0), strides[d], &reach) ||
                  __builtin_add_overflow(last, reach, &last);
    }
    if (overflow && !empty) return absl::DataLossError("a tensor's size and stride overflow");
    Ref v = Make(Value::Kind::kTensor);
    if (empty) {
      v->tensor = at::empty(sizes, at::TensorOptions().dtype(storage.scalar_type()));
      return v;
    }
    if (last >= storage.numel()) {
      return absl::DataLossError(absl::StrCat("a tensor reaches element ", last, " of storage '",
                                              args[0]->s, "', which has ", storage.numel()));
    }
    v->tensor = storage.as_strided(sizes, strides, offset).clone(at::MemoryFormat::Contiguous);
    return v;
  }

  absl::StatusOr<Ref> Call(const Ref& callable, const Ref& args) {
    if (args->kind != Value::Kind::kTuple) return absl::DataLossError("REDUCE without a tuple");
    const std::string name = callable->kind == Value::Kind::kGlobal ? callable->s : "";
    if (name == "torch._utils._rebuild_tensor_v2" || name == "torch._utils._rebuild_tensor") {
      return RebuildTensor(args->items);
    }
    if (name == "torch._utils._rebuild_parameter" ||
        name == "torch._utils._rebuild_parameter_with_state") {
      if (args->items.empty() || args->items[0]->kind != Value::Kind::kTensor) {
        return absl::DataLossError("_rebuild_parameter without a tensor");
      }
      return args->items[0];
    }
    if (name == "collections.OrderedDict" && args->items.empty()) return Make(Value::Kind::kDict);
    // Anything else (devices, dtypes, argparse namespaces, ...) stays opaque:
    // fine unless a tensor we need is inside it.
    Ref object = Make(Value::Kind::kObject);
    object->s = name;
    return object;
  }

  absl::Status Step(uint8_t op) {
    switch (op) {
      case 0x80: {  // PROTO
        ASSIGN_OR_RETURN(uint8_t version, U8());
        if (version > 5) return absl::DataLossError(absl::StrCat("pickle protocol ", version));
        return absl::OkStatus();
      }
      case 0x95:  // FRAME: a length to skip over
        return Little(8).status();
      case '.':  // STOP
        done_ = true;
        return absl::OkStatus();
      case '(':  // MARK
        marks_.push_back(stack_.size());
        return absl::OkStatus();
      case 'N':
        Push(Make(Value::Kind::kNone));
        return absl::OkStatus();
      case 0x88:    // NEWTRUE
      case 0x89: {  // NEWFALSE
        Ref v = Make(Value::Kind::kBool);
        v->i = op == 0x88;
        Push(v);
        return absl::OkStatus();
      }
      case 'K':  // BININT1
        return PushUnsigned(1);
      case 'M':  // BININT2
        return PushUnsigned(2);
      case 'J': {  // BININT: signed 32-bit
        ASSIGN_OR_RETURN(uint64_t v, Little(4));
        Push(Int(static_cast<int32_t>(static_cast<uint32_t>(v))));
        return absl::OkStatus();
      }
      case 0x8a: {  // LONG1: n bytes of two's complement
        ASSIGN_OR_RETURN(uint8_t n, U8());
        if (n > 8) return absl::DataLossError("integer wider than 64 bits");
        ASSIGN_OR_RETURN(uint64_t v, Little(n));
        if (n > 0 && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~uint64_t{0} << (8 * n);
        Push(Int(static_cast<int64_t>(v)));
        return absl::OkStatus();
      }
      case 'G': {  // BINFLOAT: big-endian double
        RETURN_IF_ERROR(Need(8));
        uint64_t bits = 0;
        for (int b = 0; b < 8; ++b) bits = bits << 8 | data_[pos_ + b];
        pos_ += 8;
        Ref v = Make(Value::Kind::kFloat);
        std::memcpy(&v->f, &bits, 8);
        Push(v);
        return absl::OkStatus();
      }
      case 'X':  // BINUNICODE
      case 'B':  // BINBYTES
      case 'T':  // BINSTRING
        return PushText(4);
      case 0x8c:  // SHORT_BINUNICODE
      case 'C':   // SHORT_BINBYTES
      case 'U':   // SHORT_BINSTRING
        return PushText(1);
      case 0x8d:  // BINUNICODE8
      case 0x8e:  // BINBYTES8
        return PushText(8);
      case ')':
        Push(Tuple({}));
        return absl::OkStatus();
      case 0x85:
      case 0x86:
      case 0x87: {  // TUPLE1..3
        std::vector<Ref> items(op - 0x84);
        for (size_t k = items.size(); k-- > 0;) {
          ASSIGN_OR_RETURN(items[k], Pop());
        }
        Push(Tuple(std::move(items)));
        return absl::OkStatus();
      }
      case 't': {  // TUPLE
        ASSIGN_OR_RETURN(std::vector<Ref> items, PopMark());
        Push(Tuple(std::move(items)));
        return absl::OkStatus();
      }
      case ']':
        Push(Make(Value::Kind::kList));
        return absl::OkStatus();
      case 'l': {  // LIST
        ASSIGN_OR_RETURN(std::vector<Ref> items, PopMark());
        Ref list = Make(Value::Kind::kList);
        list->items = std::move(items);
        Push(list);
        return absl::OkStatus();
      }
      case '}':
        Push(Make(Value::Kind::kDict));
        return absl::OkStatus();
      case 'd': {  // DICT
        ASSIGN_OR_RETURN(std::vector<Ref> kv, PopMark());
        Ref dict = Make(Value::Kind::kDict);
        RETURN_IF_ERROR(SetItems(dict, kv));
        Push(dict);
        return absl::OkStatus();
      }
      case 's': {  // SETITEM
        ASSIGN_OR_RETURN(Ref value, Pop());
        ASSIGN_OR_RETURN(Ref key, Pop());
        ASSIGN_OR_RETURN(Ref dict, Top());
        return SetItems(dict, {key, value});
      }
      case 'u': {  // SETITEMS
        ASSIGN_OR_RETURN(std::vector<Ref> kv, PopMark());
        ASSIGN_OR_RETURN(Ref dict, Top());
        return SetItems(dict, kv);
      }
      case 'a': {  // APPEND
        ASSIGN_OR_RETURN(Ref value, Pop());
        ASSIGN_OR_RETURN(Ref list, Top());
        return Append(list, {value});
      }
      case 'e': {  // APPENDS
        ASSIGN_OR_RETURN(std::vector<Ref> items, PopMark());
        ASSIGN_OR_RETURN(Ref list, Top());
        return Append(list, items);
      }
      case 'q': {  // BINPUT
        ASSIGN_OR_RETURN(uint64_t key, Little(1));
        return Memo(key);
      }
      case 'r': {  // LONG_BINPUT
        ASSIGN_OR_RETURN(uint64_t key, Little(4));
        return Memo(key);
      }
      case 0x94:  // MEMOIZE
        return Memo(memo_.size());
      case 'h': {  // BINGET
        ASSIGN_OR_RETURN(uint64_t key, Little(1));
        return Get(key);
      }
      case 'j': {  // LONG_BINGET
        ASSIGN_OR_RETURN(uint64_t key, Little(4));
        return Get(key);
      }
      case 'c': {  // GLOBAL "module\nname\n"
        ASSIGN_OR_RETURN(std::string module, Line());
        ASSIGN_OR_RETURN(std::string name, Line());
        return PushGlobal(module + "." + name);
      }
      case 0x93: {  // STACK_GLOBAL
        ASSIGN_OR_RETURN(Ref name, Pop());
        ASSIGN_OR_RETURN(Ref module, Pop());
        if (name->kind != Value::Kind::kString || module->kind != Value::Kind::kString) {
          return absl::DataLossError("STACK_GLOBAL without names");
        }
        return PushGlobal(module->s + "." + name->s);
      }
      case 'R': {  // REDUCE
        ASSIGN_OR_RETURN(Ref args, Pop());
        ASSIGN_OR_RETURN(Ref callable, Pop());
        ASSIGN_OR_RETURN(Ref result, Call(callable, args));
        Push(result);
        return absl::OkStatus();
      }
      case 0x81: {  // NEWOBJ
        ASSIGN_OR_RETURN(Ref args, Pop());
        ASSIGN_OR_RETURN(Ref cls, Pop());
        ASSIGN_OR_RETURN(Ref result, Call(cls, args));
        Push(result);
        return absl::OkStatus();
      }
      case 'b':  // BUILD: sets an object's state (a state dict's _metadata)
        return Pop().status();
      case 'Q': {  // BINPERSID: ('storage', type, key, location, numel)
        ASSIGN_OR_RETURN(Ref pid, Pop());
        const auto& f = pid->items;
        if (pid->kind != Value::Kind::kTuple || f.size() < 5 ||
            f[0]->kind != Value::Kind::kString || f[0]->s != "storage" ||
            f[1]->kind != Value::Kind::kGlobal || f[2]->kind != Value::Kind::kString ||
            f[4]->kind != Value::Kind::kInt || f[4]->i < 0) {
          return absl::DataLossError("a persistent id that is not a tensor storage");
        }
        Ref storage = Make(Value::Kind::kStorage);
        storage->s = f[2]->s;
        storage->i = f[4]->i;
        bool known = false;
        for (const StorageType& t : kStorageTypes) {
          if (f[1]->s == t.name) {
            storage->dtype = t.dtype;
            known = true;
          }
        }
        if (!known) {
          return absl::DataLossError(absl::StrCat("unsupported storage type ", f[1]->s,
                                                  " (float, half, bfloat16 and integer storages "
                                                  "are read)"));
        }
        Push(storage);
        return absl::OkStatus();
      }
      default:
        return absl::DataLossError("an opcode torch.save does not write for tensors");
    }
  }

  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  bool done_ = false;
  const ZipArchive* archive_;
  std::vector<std::unique_ptr<Value>> values_;  // every value made, each freed alone
  std::vector<Ref> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, Ref> memo_;
  std::map<std::string, at::Tensor> storages_;
};

bool HoldsTensors(const Value& dict) {
  if (dict.kind != Value::Kind::kDict) return false;
  for (const auto& [key, value] : dict.entries) {
    if (value->kind == Value::Kind::kTensor) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<TorchSaveTensors> ReadTorchSave(const std::string& path) {
  RETURN_IF_ERROR(CheckReadableFile(path, "PyTorch checkpoint"));
  auto bad = [&](const std::string& what) {
    return absl::DataLossError(absl::StrCat(path, ": cannot read this torch.save file: ", what));
  };
  ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
  auto archive = ZipArchive::Open(file.bytes());
  if (!archive.ok()) return bad(std::string(archive.status().message()));
  try {
    auto pickle = archive->Read("data.pkl");
    if (!pickle.ok()) return bad(std::string(pickle.status().message()));
    Unpickler unpickler(*pickle, &*archive);
    auto top = unpickler.Run();
    if (!top.ok()) return bad(std::string(top.status().message()));
    const Value* dict = *top;
    if (!HoldsTensors(*dict) && dict->kind == Value::Kind::kDict) {
      for (const auto& [key, value] : dict->entries) {
        if (key->kind == Value::Kind::kString && (key->s == "model" || key->s == "state_dict") &&
            HoldsTensors(*value)) {
          dict = value;
          break;
        }
      }
    }
    if (!HoldsTensors(*dict)) {
      return bad("it holds no dict of tensors (a state_dict(), or a dict with one under 'model')");
    }
    TorchSaveTensors out;
    for (const auto& [key, value] : dict->entries) {
      if (key->kind != Value::Kind::kString) return bad("a state dict key is not a string");
      if (value->kind == Value::Kind::kTensor) {
        out.tensors.emplace_back(key->s, value->tensor);
      } else {
        out.skipped.push_back(key->s);
      }
    }
    return out;
  } catch (const c10::Error& e) {
    std::string what = e.what_without_backtrace();
    return bad(what.substr(0, what.find('\n')));
  } catch (const std::exception& e) {
    return bad(e.what());
  }
}

}  // namespace pbert::formats
