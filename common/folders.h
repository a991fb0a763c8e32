// Folders the tools create and the paths they must keep apart.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace pbert {

// Creates `dir` and its missing parents. A path that is a file, or one that
// cannot be created, is InvalidArgument naming `key` (the config key or flag
// that gave it) and what to do.
absl::Status CreateFolder(const std::string& dir, absl::string_view key);

// Fails, before any work, where CreateFolder(dir, key) would fail or the
// folder could then not be written: a file at `dir` or in its path, a folder
// that cannot be written, a name too long. Creates nothing.
absl::Status CheckFolderTarget(const std::string& dir, absl::string_view key);

// What a command writes: a file (AtomicFileWriter: its folder must exist) or
// a folder (a store: made with its missing parents). Both are written as a
// temporary beside the target, named with this many more bytes
// (".tmp.XXXXXX", ".tmp-XXXXXX"), then renamed.
enum class Writes { kFile, kFolder };
inline constexpr size_t kTemporarySuffixBytes = 11;

// Fails, before any work, if `path` could not be written: a file named with
// a trailing '/', a name that leaves no room for the temporary's suffix
// within the file system's limit, a file standing in its path, a missing
// folder for a file, or a nearest existing folder that cannot be written.
// InvalidArgument naming `what` (a flag or key), the path and what to do.
absl::Status CheckWritable(const std::string& path, absl::string_view what, Writes writes);

// "" when `name`, read from a file (a store's manifest, say), is a plain
// file name: one that names an entry of the folder that file lies in and
// nothing else. Else what is wrong with it: empty, "." or "..", a '/', a
// NUL or another control character, or longer than a file name may be.
std::string PlainFileNameProblem(absl::string_view name);

// `path` without trailing '/' ("/" stays), so that `path` + ".tmp" lies
// beside it, not inside it.
std::string WithoutTrailingSlash(std::string path);

// Whether `path` is `folder` or lies inside it (after resolving `..` and
// symbolic links of the parts that exist).
bool IsInside(const std::string& path, const std::string& folder);

// The folders of `dir` that do not exist yet, noted before they are made, so
// that a command that fails leaves none of them behind: removed again,
// deepest first, while they are empty, on `RemoveIfEmpty` or on destruction
// unless `Keep` was called.
class CreatedFolders {
 public:
  explicit CreatedFolders(const std::string& dir);
  CreatedFolders(CreatedFolders&&) = default;
  CreatedFolders& operator=(CreatedFolders&&) = default;
  ~CreatedFolders();

  void Keep() { created_.clear(); }
  void RemoveIfEmpty();
  // The folders it would remove, deepest first.
  const std::vector<std::filesystem::path>& folders() const { return created_; }

 private:
  std::vector<std::filesystem::path> created_;  // deepest first
};

}  // namespace pbert
