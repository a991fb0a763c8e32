#include "common/folders.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pbert {

namespace fs = std::filesystem;

absl::Status CreateFolder(const std::string& dir, absl::string_view key) {
  if (dir.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(key, " is empty; name a folder"));
  }
  std::error_code error;
  if (fs::exists(dir, error) && !fs::is_directory(dir, error)) {
    return absl::InvalidArgumentError(absl::StrCat(key, " '", dir, "' is a file; name a folder"));
  }
  fs::create_directories(dir, error);
  if (error) {
    return absl::InvalidArgumentError(absl::StrCat("cannot create ", key, " '", dir,
                                                   "': ", error.message(),
                                                   "; choose a folder you can write"));
  }
  return absl::OkStatus();
}

absl::Status CheckFolderTarget(const std::string& dir, absl::string_view key) {
  if (dir.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(key, " is empty; name a folder"));
  }
  std::error_code error;
  if (!fs::is_directory(dir, error)) {
    if (fs::exists(dir, error)) {
      return absl::InvalidArgumentError(absl::StrCat(key, " '", dir, "' is a file; name a folder"));
    }
    return CheckWritable(dir, key, Writes::kFolder);
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("cannot write ", key, " '", dir,
                                                   "': ", std::strerror(errno),
                                                   "; choose a folder you can write"));
  }
  return absl::OkStatus();
}

std::string PlainFileNameProblem(absl::string_view name) {
  if (name.empty()) return "it is empty";
  if (name == "." || name == "..") return absl::StrCat("'", name, "' names a folder");
  if (name.size() > 255) return absl::StrCat("it is ", name.size(), " bytes long (at most 255)");
  for (const char c : name) {
    if (c == '/') return "it holds a '/' (a path, not a name)";
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return absl::StrFormat("it holds the control character 0x%02x",
                             static_cast<unsigned char>(c));
    }
  }
  return "";
}

std::string WithoutTrailingSlash(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

absl::Status CheckWritable(const std::string& path, absl::string_view what, Writes writes) {
  if (path.empty()) return absl::InvalidArgumentError(absl::StrCat(what, " is empty"));
  const bool makes_parents = writes == Writes::kFolder;
  if (!makes_parents && path.back() == '/') {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", path, " names a folder; name the file to write"));
  }
  const fs::path target = WithoutTrailingSlash(path);
  const std::string name = target.filename().string();
  // The system's limit on a whole path, less the temporary's suffix.
  if (path.size() + kTemporarySuffixBytes >= PATH_MAX) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot write ", what, " ", path.substr(0, 60), "...: its path has ", path.size(),
        " bytes; paths hold at most ", PATH_MAX - 1, ", and ", kTemporarySuffixBytes,
        " go to the temporary written beside it: choose a shorter path"));
  }
  std::error_code error;
  // The nearest part of the path that exists must be a folder we can write.
  fs::path existing = target.parent_path();
  if (existing.empty()) existing = ".";
  if (!fs::exists(existing, error) && !makes_parents) {
    return absl::InvalidArgumentError(absl::StrCat("cannot write ", what, " ", path,
                                                   ": its folder ", existing.string(),
                                                   " does not exist; create it or choose another"));
  }
  while (!fs::exists(existing, error)) {
    const fs::path up = existing.parent_path();
    if (up == existing) break;
    existing = up.empty() ? fs::path(".") : up;
  }
  if (!fs::is_directory(existing, error)) {
    return absl::InvalidArgumentError(absl::StrCat("cannot write ", what, " ", path, ": ",
                                                   existing.string(),
                                                   " is a file, not a folder; choose another"));
  }
  if (::access(existing.c_str(), W_OK | X_OK) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("cannot write ", what, " ", path, ": ",
                                                   existing.string(), ": ", std::strerror(errno),
                                                   "; choose a folder you can write"));
  }
  long name_max = ::pathconf(existing.c_str(), _PC_NAME_MAX);
  if (name_max <= 0) name_max = NAME_MAX;
  if (name.size() + kTemporarySuffixBytes > static_cast<size_t>(name_max)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot write ", what, " ", path, ": its name has ", name.size(), " bytes; names in ",
        existing.string(), " hold at most ", name_max, ", and ", kTemporarySuffixBytes,
        " go to the temporary written beside it: choose a shorter name"));
  }
  return absl::OkStatus();
}

bool IsInside(const std::string& path, const std::string& folder) {
  std::error_code error;
  const fs::path file = fs::weakly_canonical(path, error);
  if (error) return false;
  const fs::path dir = fs::weakly_canonical(folder, error);
  if (error) return false;
  return std::mismatch(dir.begin(), dir.end(), file.begin(), file.end()).first == dir.end();
}

CreatedFolders::CreatedFolders(const std::string& dir) {
  std::error_code error;
  for (fs::path p = dir; !p.empty() && !fs::exists(p, error); p = p.parent_path()) {
    created_.push_back(p);
    if (p == p.parent_path()) break;
  }
}

CreatedFolders::~CreatedFolders() { RemoveIfEmpty(); }

void CreatedFolders::RemoveIfEmpty() {
  std::error_code ignored;
  for (const fs::path& dir : created_) {
    if (!fs::remove(dir, ignored)) break;  // only if empty; then its parents are not
  }
  created_.clear();
}

}  // namespace pbert
