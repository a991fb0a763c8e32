#include "common/folders.h"

#include <algorithm>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace pbert {

namespace fs = std::filesystem;

absl::Status CreateFolder(const std::string& dir, absl::string_view key) {
  if (dir.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(key, " is empty; name a folder"));
  }
  std::error_code error;
  if (fs::exists(dir, error) && !fs::is_directory(dir, error)) {
    return absl::InvalidArgumentError(
        absl::StrCat(key, " '", dir, "' is a file; name a folder"));
  }
  fs::create_directories(dir, error);
  if (error) {
    return absl::InvalidArgumentError(absl::StrCat("cannot create ", key, " '", dir, "': ",
                                                   error.message(),
                                                   "; choose a folder you can write"));
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
