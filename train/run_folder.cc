#include "train/run_folder.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/append_log.h"
#include "common/folders.h"
#include "common/logging.h"
#include "common/outputs.h"
#include "common/status.h"
#include "train/checkpointer.h"

namespace pbert::train {
namespace {

namespace fs = std::filesystem;

constexpr char kLockName[] = "run.lock";

// The lock file's lines: the pid of the run that holds or held it, then
// its task ("" where an earlier release wrote the pid alone).
struct LockText {
  std::string pid, task;
};

LockText ReadLock(int fd) {
  char text[128] = {};
  const ssize_t n = pread(fd, text, sizeof(text) - 1, 0);
  const std::vector<std::string> lines =
      absl::StrSplit(std::string(text, n > 0 ? n : 0), '\n', absl::SkipWhitespace());
  LockText lock;
  if (!lines.empty()) lock.pid = std::string(absl::StripAsciiWhitespace(lines[0]));
  if (!std::all_of(lock.pid.begin(), lock.pid.end(), absl::ascii_isdigit)) lock.pid.clear();
  if (lines.size() > 1) lock.task = std::string(absl::StripAsciiWhitespace(lines[1]));
  return lock;
}

// Whether `dir` holds a run's logs or checkpoints.
bool HoldsARun(const std::string& dir) {
  std::error_code error;
  for (const char* name : kRunLogs) {
    if (fs::exists(absl::StrCat(dir, "/", name), error)) return true;
  }
  return !fs::is_empty(absl::StrCat(dir, "/checkpoints"), error) && !error;
}

// As ssh does for ~/.ssh: a run folder that others may write into (or
// whose parent lets others move it away and put their own in its place) is
// one where another user can plant what the run then reads or replace what
// it wrote. Said in one line; the run goes on (a group's shared folder may
// be meant so).
void WarnIfOthersMayWrite(const std::string& dir) {
  std::error_code error;
  const fs::path folder = fs::absolute(dir, error);
  struct stat st;
  std::string who;
  if (::stat(folder.c_str(), &st) == 0 && (st.st_mode & S_IWOTH) != 0) {
    who = absl::StrCat("run.output_dir ", dir, " is writable by every user");
  } else if (const fs::path parent = folder.parent_path();
             ::stat(parent.c_str(), &st) == 0 && (st.st_mode & S_IWOTH) != 0 &&
             (st.st_mode & S_ISVTX) == 0) {
    who = absl::StrCat("the folder ", parent.string(), " that holds run.output_dir ", dir,
                       " is writable by every user, without the sticky bit");
  }
  if (who.empty()) return;
  logging::Get("train")->warn(
      "{}: another user could put files or links in the run's place; take away others' write "
      "permission (chmod o-w), or choose another run.output_dir",
      who);
}

// What is in the place of a file or folder the run writes would fail the
// write, after the training it was to keep, and a link there would have it
// write elsewhere; the logs, appended to, must be files (a named pipe would
// hold the run). Each refused before anything is written.
absl::Status CheckWhatTheRunWrites(const std::string& dir) {
  RETURN_IF_ERROR(CheckRunOutputs(dir));
  for (const char* name : kRunLogs) {
    RETURN_IF_ERROR(AppendLog::CheckPath(absl::StrCat(dir, "/", name)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RunFolder> RunFolder::Claim(const std::string& dir, const std::string& task) {
  // What is not a run folder is refused before anything is made in it.
  // (A run folder itself is what a run writes into.)
  std::error_code error;
  const std::string itself = absl::StrCat(
      "is the run folder ", fs::weakly_canonical(fs::absolute(dir, error), error).string());
  if (const std::string kept = KeptContainerOf(dir); !kept.empty() && kept != itself) {
    return absl::InvalidArgumentError(absl::StrCat("run.output_dir ", dir, " ", kept,
                                                   ", which a run must not write into; "
                                                   "choose another run.output_dir"));
  }
  if (const std::string other = FolderOutputKind(dir); !other.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("run.output_dir ", dir, " is ", other,
                                                   ", not a run folder; choose another "
                                                   "run.output_dir"));
  }
  CreatedFolders created(dir);  // removed again if the claim fails
  RETURN_IF_ERROR(CreateFolder(dir, "run.output_dir"));
  RETURN_IF_ERROR(CheckWhatTheRunWrites(dir));
  const std::string lock = absl::StrCat(dir, "/", kLockName);
  bool created_lock = true;
  // Never through a link (CheckRunOutputs refused one; this, one put there since).
  int fd = open(lock.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0 && errno == EEXIST) {
    created_lock = false;
    fd = open(lock.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  }
  if (fd < 0) {
    const std::string why = std::strerror(errno);
    return absl::InvalidArgumentError(
        absl::StrCat("cannot write ", lock, ": ", why, "; choose a run.output_dir you can write"));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const std::string pid = ReadLock(fd).pid;
    close(fd);  // the lock file, and so the folder, are the other run's
    created.Keep();
    return absl::AlreadyExistsError(
        absl::StrCat("run.output_dir '", dir, "' is in use by another packed-bert run",
                     pid.empty() ? "" : absl::StrCat(" (pid ", pid, ")"),
                     "; wait for it to end, or choose another run.output_dir"));
  }
  // A folder holds one run: another task's is never continued or replaced.
  if (const std::string held = ReadLock(fd).task;
      !created_lock && !held.empty() && held != task && HoldsARun(dir)) {
    close(fd);
    created.Keep();
    return absl::InvalidArgumentError(
        absl::StrCat("run.output_dir ", dir, " holds a ", held, " run (", lock, "), which a ", task,
                     " run must not write into; choose another run.output_dir"));
  }
  const std::string pid = absl::StrCat(getpid(), "\n", task, "\n");
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    logging::Get("train")->debug("could not write the pid into {}", lock);
  }
  WarnIfOthersMayWrite(dir);
  return RunFolder(dir, fd, std::move(created), created_lock);
}

absl::Status RunFolder::AcceptNewRun(const std::string& resume) const {
  if (const std::string newest = LatestCheckpoint(dir_); !newest.empty()) {
    return absl::AlreadyExistsError(absl::StrCat(dir_, " holds a run with checkpoints (newest ",
                                                 newest, "); continue it with ", resume,
                                                 ", or choose another run.output_dir"));
  }
  std::error_code error;
  for (const char* name : kRunLogs) {
    if (fs::exists(absl::StrCat(dir_, "/", name), error)) {
      logging::Get("train")->warn(
          "{} holds the logs of a run that stopped before its first checkpoint, with nothing "
          "to continue: this new run replaces them",
          dir_);
      break;
    }
  }
  return absl::OkStatus();
}

absl::Status RunFolder::CheckInput(const std::string& key, const std::string& path) const {
  if (path.empty()) return absl::OkStatus();
  if (const std::string output = RunOutputOf(path, dir_); !output.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        key, " ", path, " is ", output, ", which this run writes; keep the run's inputs out of ",
        "what it writes (move or copy it elsewhere), or choose another run.output_dir"));
  }
  return absl::OkStatus();
}

void RunFolder::ReleaseIfUnused() {
  std::error_code error;
  const fs::path dir(dir_);
  for (const char* name : kRunLogs) {
    if (fs::exists(dir / name, error)) return;
  }
  for (const char* name : {"checkpoints", "config.yaml", "pack.pbpack"}) {
    if (fs::exists(dir / name, error)) return;
  }
  Release();
}

RunFolder::RunFolder(RunFolder&& other) noexcept
    : dir_(std::move(other.dir_)),
      fd_(other.fd_),
      created_(std::move(other.created_)),
      created_lock_(other.created_lock_) {
  other.fd_ = -1;
}

RunFolder::~RunFolder() {
  created_.Keep();  // the run's: only Release removes
  if (fd_ >= 0) close(fd_);
}

std::vector<std::string> RunFolder::ReleasePaths() const {
  std::vector<std::string> paths;
  if (fd_ < 0) return paths;
  if (created_lock_) paths.push_back(absl::StrCat(dir_, "/", kLockName));
  for (const fs::path& folder : created_.folders()) paths.push_back(folder.string());
  return paths;
}

void RunFolder::Release() {
  if (fd_ < 0) return;
  std::error_code error;
  // Removed while still locked, so that no other run can take the old file.
  if (created_lock_) fs::remove(absl::StrCat(dir_, "/", kLockName), error);
  close(fd_);
  fd_ = -1;
  created_.RemoveIfEmpty();
}

}  // namespace pbert::train
