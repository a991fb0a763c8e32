#include "common/outputs.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/atomic_file.h"
#include "common/folders.h"
#include "common/status.h"
#include "nlohmann/json.hpp"

namespace pbert {
namespace {

namespace fs = std::filesystem;

// What marks what a run keeps (docs/training.md, docs/formats.md): a
// checkpoint folder holds trainer_state.json, an instance store store.json,
// a run folder the run.lock its train takes.
constexpr char kCheckpointMark[] = "trainer_state.json";
constexpr char kStoreMark[] = "store.json";
constexpr char kRunMark[] = "run.lock";
// A run folder's own files, beside checkpoints/.
const std::set<std::string>& RunFiles() {
  static const std::set<std::string> files = {
      "run.lock",    "mllog.txt", "metrics.jsonl",       "events.out.tfevents.packed-bert",
      "config.yaml", "pack.json", "learning_curves.svg", "throughput.svg",
      "profile.md"};
  return files;
}

// What else a run writes into its folder: a task's evaluation files, and
// the folders of its export, predictions, profile and checkpoints.
const std::set<std::string>& RunOutputFiles() {
  static const std::set<std::string> files = {"predictions.json", "nbest_predictions.json",
                                              "null_odds.json"};
  return files;
}
const std::set<std::string>& RunFolders() {
  static const std::set<std::string> folders = {"checkpoints", "profile", "predict", "model",
                                                "evaluation"};
  return folders;
}

// The files of a folder output, the first the one that marks it (an
// evaluation's others are those its evaluation.json lists).
const std::vector<std::string>& FolderFiles(OutputKind kind) {
  static const std::vector<std::string> hf = {"config.json", "model.safetensors", "vocab.txt",
                                              "tokenizer_config.json"};
  static const std::vector<std::string> evaluation = {"evaluation.json"};
  return kind == OutputKind::kEvaluation ? evaluation : hf;
}

bool Has(const fs::path& dir, const char* name) {
  std::error_code error;
  return fs::exists(dir / name, error);
}

// The first bytes of a file (fewer if it is shorter).
std::string Head(const fs::path& path, size_t bytes) {
  std::ifstream in(path, std::ios::binary);
  std::string head(bytes, '\0');
  in.read(head.data(), static_cast<std::streamsize>(bytes));
  head.resize(static_cast<size_t>(std::max<std::streamsize>(0, in.gcount())));
  return head;
}

}  // namespace

const char* OutputKindName(OutputKind kind) {
  switch (kind) {
    case OutputKind::kWeightsFile:
      return "a safetensors weights file";
    case OutputKind::kHfFolder:
      return "a Hugging Face model folder that model export-hf wrote (config.json, "
             "model.safetensors, vocab.txt, tokenizer_config.json)";
    case OutputKind::kHdf5File:
      return "an HDF5 file";
    case OutputKind::kPackIndex:
      return "a pack index file";
    case OutputKind::kStore:
      return "an instance store";
    case OutputKind::kEvaluation:
      return "an evaluation folder that finetune --evaluate wrote (evaluation.json, "
             "predictions, predict/)";
  }
  return "";
}

namespace {

bool IsFileKind(OutputKind kind) {
  return kind != OutputKind::kHfFolder && kind != OutputKind::kStore &&
         kind != OutputKind::kEvaluation;
}

// "" if the existing `path` is an output of `kind`; else what it is.
std::string NotOfKind(const fs::path& path, OutputKind kind) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return "";
  if (IsFileKind(kind)) {
    if (S_ISDIR(st.st_mode)) return "a folder";
    if (!S_ISREG(st.st_mode)) return NotAFile(st.st_mode);
    const std::string head = Head(path, 16);
    bool same = false;
    if (kind == OutputKind::kWeightsFile) {
      // An 8-byte little-endian header length, then the JSON header.
      uint64_t header = 0;
      if (head.size() >= 9) std::memcpy(&header, head.data(), 8);
      same = head.size() >= 9 && head[8] == '{' && header >= 2 &&
             header <= static_cast<uint64_t>(st.st_size) - 8;
    } else if (kind == OutputKind::kHdf5File) {
      same = head.compare(0, 8, "\x89HDF\r\n\x1a\n") == 0;
    } else {
      same = head.compare(0, 8, "PBPACKIX") == 0;
    }
    return same ? "" : "a file of another format";
  }
  if (!S_ISDIR(st.st_mode)) return S_ISREG(st.st_mode) ? "a file" : NotAFile(st.st_mode);
  if (kind == OutputKind::kStore) return Has(path, kStoreMark) ? "" : "a folder but no store";
  const std::vector<std::string>& files = FolderFiles(kind);
  std::set<std::string> ours = {files.front()};
  if (kind == OutputKind::kEvaluation) {
    // What the evaluation wrote is what its evaluation.json lists.
    absl::StatusOr<std::string> text = ReadFile((path / files.front()).string(), 1 << 24);
    const nlohmann::json listed = nlohmann::json::parse(text.ok() ? *text : "", nullptr, false);
    if (listed.is_object() && listed.contains("files") && listed["files"].is_array()) {
      for (const nlohmann::json& name : listed["files"]) {
        if (name.is_string()) ours.insert(name.get<std::string>());
      }
    }
  } else {
    ours.insert(files.begin(), files.end());
  }
  if (std::string other = ForeignEntries(path.string(), ours); !other.empty()) return other;
  return Has(path, files.front().c_str()) ? "" : absl::StrCat("a folder without ", files.front());
}

}  // namespace

std::string ForeignEntries(const std::string& dir, const std::set<std::string>& ours) {
  std::set<std::string> on_the_way;  // the folders that lead to ours
  for (const std::string& name : ours) {
    for (fs::path part = fs::path(name).parent_path(); !part.empty(); part = part.parent_path()) {
      on_the_way.insert(part.string());
    }
  }
  std::vector<std::string> others;
  std::error_code error;
  // Links are entries, never followed.
  for (auto it = fs::recursive_directory_iterator(dir, error);
       !error && it != fs::recursive_directory_iterator(); it.increment(error)) {
    const std::string relative = it->path().lexically_relative(dir).string();
    if (ours.count(relative)) continue;
    std::error_code kind_error;
    const bool folder = it->is_directory(kind_error) && !it->is_symlink(kind_error);
    if (folder && on_the_way.count(relative)) continue;
    others.push_back(relative);
    if (folder) it.disable_recursion_pending();
    if (others.size() > 3) break;
  }
  if (error) return absl::StrCat("a folder that cannot be read (", error.message(), ")");
  if (others.size() > 3) others.resize(3), others.push_back("...");
  return others.empty() ? "" : absl::StrCat("a folder holding ", absl::StrJoin(others, ", "));
}

std::string KeptContainerOf(const std::string& given) {
  std::error_code error;
  fs::path path = fs::weakly_canonical(fs::absolute(given, error), error);
  if (error) return "";
  for (fs::path dir = path;; dir = dir.parent_path()) {
    const bool self = dir == path;
    const std::string in = self ? "is " : "lies in ";
    if (Has(dir, kCheckpointMark)) return absl::StrCat(in, "the checkpoint ", dir.string());
    if (!self && Has(dir, kStoreMark)) return absl::StrCat(in, "the instance store ", dir.string());
    if (Has(dir, kRunMark)) {
      if (self) return absl::StrCat("is the run folder ", dir.string());
      const fs::path relative = path.lexically_relative(dir);
      const std::string first = relative.begin()->string();
      if (first == "checkpoints" || first == "profile") {
        return absl::StrCat("lies in the ", first, " of the run folder ", dir.string());
      }
      if (relative == relative.filename() && RunFiles().count(first)) {
        return absl::StrCat("is the run folder ", dir.string(), "'s ", first);
      }
    }
    if (dir == dir.parent_path()) return "";
  }
}

std::string RunOutputOf(const std::string& path, const std::string& run_dir) {
  std::error_code error;
  const fs::path dir = fs::weakly_canonical(fs::absolute(run_dir, error), error);
  const fs::path file = fs::weakly_canonical(fs::absolute(path, error), error);
  if (error) return "";
  const fs::path relative = file.lexically_relative(dir);
  if (relative.empty() || relative.begin()->string() == "..") return "";
  if (relative == ".") return "the run folder itself";
  const std::string first = relative.begin()->string();
  if (!RunFiles().count(first) && !RunOutputFiles().count(first) && !RunFolders().count(first)) {
    return "";
  }
  return absl::StrCat(relative == relative.filename() ? "" : "in ", "the run folder's ", first);
}

absl::Status CheckRunOutputs(const std::string& run_dir) {
  std::vector<std::pair<std::string, bool>> names;  // (name, a folder)
  for (const auto* files : {&RunFiles(), &RunOutputFiles()}) {
    for (const std::string& name : *files) names.emplace_back(name, false);
  }
  for (const std::string& name : RunFolders()) names.emplace_back(name, true);
  // A link in the run folder would have the run write, cut or delete what
  // it points at (another file of the user's, someone else's): refused,
  // among the checkpoints too, whatever it points at.
  std::vector<fs::path> places;
  for (const auto& [name, folder] : names) places.push_back(fs::path(run_dir) / name);
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(fs::path(run_dir) / "checkpoints", error)) {
    places.push_back(entry.path());
  }
  for (const fs::path& path : places) {
    if (fs::is_symlink(fs::symlink_status(path, error))) {
      return absl::InvalidArgumentError(absl::StrCat(
          path.string(), " is a symbolic link (to ", fs::read_symlink(path, error).string(),
          "), which the run would write through; a run writes nothing through a link: "
          "remove the link, or choose another run.output_dir"));
    }
  }
  for (const auto& [name, folder] : names) {
    const fs::path path = fs::path(run_dir) / name;
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) continue;
    if (folder ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode)) continue;
    const std::string what = S_ISDIR(st.st_mode)   ? "a folder"
                             : S_ISREG(st.st_mode) ? "a file"
                                                   : NotAFile(st.st_mode);
    return absl::InvalidArgumentError(absl::StrCat(
        path.string(), " is ", what, ", where the run writes its ", folder ? "folder " : "file ",
        name, "; move it away, or choose another run.output_dir"));
  }
  return absl::OkStatus();
}

std::string FolderOutputKind(const std::string& dir) {
  const fs::path path(dir);
  if (Has(path, kStoreMark)) return "an instance store (store.json)";
  if (Has(path, kCheckpointMark)) return "a checkpoint (trainer_state.json)";
  if (Has(path, "evaluation.json")) return "an evaluation folder (evaluation.json)";
  if (Has(path, "config.json") && Has(path, "model.safetensors")) {
    return "a Hugging Face model folder (config.json, model.safetensors)";
  }
  return "";
}

absl::Status CheckOutputTarget(const std::string& given, OutputKind kind, bool overwrite,
                               absl::string_view what) {
  const std::string path = WithoutTrailingSlash(given);
  if (const std::string kept = KeptContainerOf(path); !kept.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " ", path, " ", kept, ", which only train writes; choose another ", what));
  }
  std::error_code error;
  if (fs::exists(fs::symlink_status(path, error))) {
    if (!overwrite) {
      return absl::AlreadyExistsError(absl::StrCat(
          path, " already exists; add --overwrite to replace it, or choose another name"));
    }
    if (const std::string other = NotOfKind(path, kind); !other.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " ", path, " is ", other, "; --overwrite replaces only ",
                       OutputKindName(kind), ": move it away or choose another ", what));
    }
  }
  return CheckWritable(path, what, IsFileKind(kind) ? Writes::kFile : Writes::kFolder);
}

}  // namespace pbert
