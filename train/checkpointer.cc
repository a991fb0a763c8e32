#include "train/checkpointer.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <torch/nn/module.h>
#include <torch/serialize/archive.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/atomic_file.h"
#include "common/checksum.h"
#include "common/logging.h"
#include "common/mmap_file.h"
#include "common/status.h"
#include "common/structured_text.h"
#include "model/weights.h"
#include "optim/lamb.h"
#include "tasks/tasks.h"
#include "common/fault.h"

namespace pbert::train {
namespace {

namespace fs = std::filesystem;

// A checkpoint whose files cannot be read (they are written atomically, so
// the disk or a hand changed them): what is wrong, and what to do.
absl::Status Damaged(const std::string& dir, absl::string_view what) {
  // Earlier ones lie beside it in a run's checkpoints/; a checkpoint copied
  // elsewhere has none to name.
  const fs::path parent = fs::path(dir).parent_path();
  return absl::DataLossError(absl::StrCat(
      what, "; the checkpoint is damaged: ",
      parent.filename() == "checkpoints"
          ? absl::StrCat("resume from an earlier one (--resume ", parent.string(),
                         "/step-N) or move ", dir, " away")
          : "resume from another copy of it, or from an earlier checkpoint of its run"));
}

constexpr char kPrefix[] = "step-";
// A trainer state is a few KB; the loader's part grows with the ranks.
constexpr size_t kMaxStateBytes = size_t{64} << 20;
constexpr char kTempMarker[] = ".tmp-";
// The files the trainer state binds by checksum (its part "files").
constexpr const char* kBoundFiles[] = {"model.safetensors", "optimizer.pt"};

absl::StatusOr<std::string> FileChecksum(const std::string& path) {
  ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
  return absl::StrFormat("%016x", Checksum64(file.bytes()));
}

// The state's own checksum (its key "checksum"): of its compact JSON
// without that key, so that a changed count (a sample more) is found.
constexpr char kStateChecksum[] = "checksum";
std::string StateChecksum(nlohmann::json state) {
  state.erase(kStateChecksum);
  const std::string text = state.dump();
  return absl::StrFormat("%016x", Checksum64(absl::Span<const uint8_t>(
                                      reinterpret_cast<const uint8_t*>(text.data()), text.size())));
}

// The step a folder named step-N is of; -1 for another name.
int64_t StepOfFolder(const std::string& dir) {
  const std::string name = fs::path(dir).lexically_normal().filename().string();
  int64_t step = -1;
  if (!absl::StartsWith(name, kPrefix) ||
      !absl::SimpleAtoi(absl::string_view(name).substr(sizeof(kPrefix) - 1), &step)) {
    return -1;
  }
  return step;
}

// The files every checkpoint has: one without any of them (a hand removed
// it, a disk lost it) cannot be resumed from, and is not taken for one.
constexpr const char* kCheckpointFiles[] = {"trainer_state.json", "config.yaml",
                                            "model.safetensors", "optimizer.pt"};

// The first of kCheckpointFiles missing from `dir`, "" if none is (what
// is there in a file's place is judged by its reader, which names it).
std::string MissingFile(const fs::path& dir) {
  std::error_code error;
  for (const char* file : kCheckpointFiles) {
    if (!fs::exists(dir / file, error)) return file;
  }
  return "";
}

// Complete checkpoint folders, oldest first; `incomplete` (if given) gets
// each step-N folder that lacks a file, and the file.
std::vector<std::string> Checkpoints(
    const std::string& root,
    std::vector<std::pair<std::string, std::string>>* incomplete = nullptr) {
  std::vector<std::string> out;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(root, error)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory() || StepOfFolder(name) < 0 || absl::StrContains(name, kTempMarker)) {
      continue;
    }
    if (const std::string missing = MissingFile(entry.path()); missing.empty()) {
      out.push_back(entry.path().string());
    } else if (incomplete != nullptr) {
      incomplete->emplace_back(entry.path().string(), missing);
    }
  }
  // By step (names of more digits than the padding's sort as numbers).
  const auto by_step = [](const std::string& a, const std::string& b) {
    return std::make_pair(StepOfFolder(a), a) < std::make_pair(StepOfFolder(b), b);
  };
  std::sort(out.begin(), out.end(), by_step);
  if (incomplete != nullptr) std::sort(incomplete->begin(), incomplete->end());
  return out;
}

void RemoveStaleTemporaries(const std::string& root) {
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(root, error)) {
    if (absl::StrContains(entry.path().filename().string(), kTempMarker)) {
      fs::remove_all(entry.path(), error);
    }
  }
}

// LAMB's state as LibTorch's OutputArchive writes it.
absl::StatusOr<std::string> OptimizerBytes(const optim::Lamb& optimizer) {
  std::ostringstream bytes;
  try {
    torch::serialize::OutputArchive archive;
    optimizer.save(archive);
    archive.save_to(bytes);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("cannot serialise the optimizer state: ", e.what()));
  }
  return bytes.str();
}

// Removes all but the newest `keep` checkpoints of `root`; one that is
// being read (CheckpointHold) is left for a later save to remove.
void KeepNewest(const std::string& root, int keep) {
  std::vector<std::string> all = Checkpoints(root);
  std::error_code error;
  for (size_t i = 0; i + keep < all.size(); ++i) {
    const int fd = ::open(all[i].c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0 && ::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd);
      logging::Get("checkpoint")->debug("{} is being read: left for a later save", all[i]);
      continue;
    }
    fs::remove_all(all[i], error);
    if (fd >= 0) ::close(fd);
    logging::Get("checkpoint")->debug("removed {}", all[i]);
  }
}

// A checkpoint folder of RUN_DIR/checkpoints that is not there: what the
// run holds now.
absl::Status MissingCheckpoint(const std::string& dir, absl::string_view what) {
  const fs::path root = fs::path(dir).lexically_normal().parent_path();
  std::error_code error;
  if (StepOfFolder(dir) < 0 || root.filename() != "checkpoints" || !fs::is_directory(root, error)) {
    return absl::NotFoundError(absl::StrCat("checkpoint folder '", dir, "' ", what,
                                            "; give a RUN_DIR/checkpoints/step-N folder or auto"));
  }
  const std::vector<std::string> all = Checkpoints(root.string());
  return absl::NotFoundError(absl::StrCat(
      "checkpoint folder '", dir, "' ", what,
      " (a run that keeps train.keep_checkpoints removes its older ones); ",
      all.empty() ? absl::StrCat(root.string(), " holds no checkpoint now")
                  : absl::StrCat("the newest checkpoint of the run is now ", all.back())));
}

}  // namespace

namespace {

// A checkpoint's files in the folder `temp`: the weights, the optimizer
// state, the config and the trainer state bound to them, synced.
absl::Status WriteCheckpointFiles(const std::string& temp, int64_t step,
                                  const torch::nn::Module& model, const optim::Lamb& optimizer,
                                  const nlohmann::json& state, const std::string& config_yaml) {
  RETURN_IF_ERROR(model::SaveWeights(model, temp + "/model.safetensors",
                                     {{"format", "pt"}, {"step", std::to_string(step)}}));
  FaultPoint("checkpoint-write", step);
  ASSIGN_OR_RETURN(std::string optimizer_bytes, OptimizerBytes(optimizer));
  RETURN_IF_ERROR(WriteFileAtomically(temp + "/optimizer.pt", optimizer_bytes));
  RETURN_IF_ERROR(WriteFileAtomically(temp + "/config.yaml", config_yaml));
  // The weights and optimizer state belong to this state: a resume checks
  // their checksums, so that files copied in from another checkpoint are
  // found.
  nlohmann::json bound = state;
  for (const char* file : kBoundFiles) {
    ASSIGN_OR_RETURN(bound["files"][file], FileChecksum(temp + "/" + file));
  }
  bound[kStateChecksum] = StateChecksum(bound);
  RETURN_IF_ERROR(WriteFileAtomically(temp + "/trainer_state.json", bound.dump(2) + "\n"));
  RETURN_IF_ERROR(SyncPath(temp));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> SaveCheckpoint(const std::string& run_dir, int64_t step,
                                           const torch::nn::Module& model,
                                           const optim::Lamb& optimizer,
                                           const nlohmann::json& state,
                                           const std::string& config_yaml, int keep) {
  const std::string root = run_dir + "/checkpoints";
  std::error_code error;
  fs::create_directories(root, error);
  if (error) {
    return absl::PermissionDeniedError(absl::StrCat("cannot create ", root, ": ", error.message()));
  }
  RemoveStaleTemporaries(root);
  const std::string name = absl::StrFormat("%s%08d", kPrefix, step);
  const std::string final_dir = root + "/" + name;
  ASSIGN_OR_RETURN(const std::string temp,
                   CreateTemporaryFolder(absl::StrCat(final_dir, kTempMarker)));
  // Whatever fails below, the temporary folder goes.
  struct Cleanup {
    std::string path;
    bool armed = true;
    ~Cleanup() {
      std::error_code ignored;
      if (armed) fs::remove_all(path, ignored);
    }
  } cleanup{temp};

  RETURN_IF_ERROR(WriteCheckpointFiles(temp, step, model, optimizer, state, config_yaml));
  // A checkpoint of the same step from an earlier attempt is replaced; it is
  // moved aside first so that one of the two is complete at every moment.
  const std::string old = absl::StrCat(final_dir, kTempMarker, "old");
  if (fs::exists(final_dir)) {
    fs::rename(final_dir, old, error);
    if (error)
      return absl::InternalError(absl::StrCat("cannot replace ", final_dir, ": ", error.message()));
  }
  fs::rename(temp, final_dir, error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot rename ", temp, " to ", final_dir, ": ", error.message()));
  }
  cleanup.armed = false;
  fs::remove_all(old, error);
  RETURN_IF_ERROR(SyncPath(root));

  if (keep > 0) KeepNewest(root, keep);
  return final_dir;
}

std::string LatestCheckpoint(const std::string& run_dir, std::vector<std::string>* passed_by) {
  const std::string root = run_dir + "/checkpoints";
  RemoveStaleTemporaries(root);
  std::vector<std::pair<std::string, std::string>> incomplete;
  std::vector<std::string> all = Checkpoints(root, &incomplete);
  const std::string newest = all.empty() ? "" : all.back();
  if (passed_by != nullptr) {
    for (const auto& [folder, missing] : incomplete) {
      if (StepOfFolder(folder) > StepOfFolder(newest)) {
        passed_by->push_back(absl::StrCat(folder, " (no ", missing, ")"));
      }
    }
  }
  return newest;
}

namespace {

// That `dir` is a checkpoint folder (not a file, a run folder or another
// folder), each refusal naming what to give.
absl::Status CheckCheckpointFolder(const std::string& dir) {
  std::error_code error;
  if (fs::exists(dir, error) && !fs::is_directory(dir, error)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", dir,
        "' is a file, not a checkpoint folder; give a RUN_DIR/checkpoints/step-N folder "
        "or auto"));
  }
  if (!fs::is_directory(dir)) return MissingCheckpoint(dir, "not found");
  if (fs::is_directory(fs::path(dir) / "checkpoints", error) ||
      fs::exists(fs::path(dir) / "mllog.txt", error)) {
    // (Read only: a refusal removes nothing, not even stale temporaries.)
    const std::vector<std::string> complete = Checkpoints(dir + "/checkpoints");
    const std::string newest = complete.empty() ? "" : complete.back();
    return absl::InvalidArgumentError(
        absl::StrCat("'", dir, "' is a run folder, not one of its checkpoints; give ",
                     newest.empty() ? absl::StrCat(dir, "/checkpoints/step-N") : newest,
                     " or --resume auto (the newest checkpoint of run.output_dir)"));
  }
  if (!fs::exists(dir + "/trainer_state.json")) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", dir, "' is not a checkpoint folder (no trainer_state.json); give a ",
                     "RUN_DIR/checkpoints/step-N folder or auto"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CheckpointInfo> ReadCheckpointInfo(const std::string& dir) {
  CheckpointInfo info;
  info.dir = dir;
  RETURN_IF_ERROR(CheckCheckpointFolder(dir));
  std::error_code error;
  // The weights and the optimizer state are checked by those who read
  // them (exporting the weights needs no optimizer state).
  if (!fs::exists(fs::path(dir) / "config.yaml", error)) {
    return Damaged(dir, absl::StrCat(dir, " has no config.yaml"));
  }
  ASSIGN_OR_RETURN(std::string text, ReadFile(dir + "/trainer_state.json", kMaxStateBytes));
  auto parsed = ParseJson(text, dir + "/trainer_state.json", kMaxStateBytes);
  if (!parsed.ok()) return Damaged(dir, parsed.status().message());
  info.state = std::move(*parsed);
  // (States written before the state held its own checksum have none.)
  if (info.state.is_object() && info.state.contains(kStateChecksum)) {
    const nlohmann::json& saved = info.state[kStateChecksum];
    const std::string now = StateChecksum(info.state);
    if (!saved.is_string() || saved.get<std::string>() != now) {
      return Damaged(dir, absl::StrCat(dir,
                                       "/trainer_state.json was changed after it was written "
                                       "(its checksum is ",
                                       now, ", it says ", saved.dump(), ")"));
    }
  }
  ASSIGN_OR_RETURN(info.config_yaml, ReadFile(dir + "/config.yaml"));
  // Read once, by the file's one reader; a state of another version is not
  // damage, and says so itself.
  auto typed = TrainerStateFromJson(info.state, dir + "/trainer_state.json");
  if (!typed.ok()) {
    return typed.status().code() == absl::StatusCode::kDataLoss
               ? Damaged(dir, typed.status().message())
               : typed.status();
  }
  info.trainer = std::move(*typed);
  const int64_t folder_step = StepOfFolder(dir), step = info.trainer.loop.step;
  if (folder_step >= 0 && step != folder_step) {
    return Damaged(dir, absl::StrCat(dir, "/trainer_state.json is the state of step ", step,
                                     ", not of step ", folder_step, " as the folder's name says"));
  }
  return info;
}

absl::Status Checkpointer::Save(int64_t step, const torch::nn::Module& model,
                                const optim::Lamb& optimizer, const nlohmann::json& state) {
  if (communicator_.rank() == 0) {
    absl::StatusOr<std::string> saved = SaveCheckpoint(options_.run_dir, step, model, optimizer,
                                                       state, options_.config_yaml, options_.keep);
    if (!saved.ok()) return NotSaved(step, saved.status());
    last_ = *saved;
    logging::Get("checkpoint")->info("{} (step {})", last_, step);
  }
  communicator_.Barrier();
  saved_step_ = step;
  return absl::OkStatus();
}

absl::Status Checkpointer::NotSaved(int64_t step, const absl::Status& why) const {
  // What survived: the newest complete checkpoint on disk (the failed one
  // left only a temporary, which is removed).
  const std::string newest = LatestCheckpoint(options_.run_dir);
  return absl::Status(
      why.code(),
      absl::StrCat(
          "the checkpoint of step ", step, " was not written (", why.message(), "); ",
          newest.empty()
              ? "the run has no earlier checkpoint, so its training is lost when it ends"
              : absl::StrCat("the newest usable checkpoint is ", newest,
                             ": once the cause is fixed, continue with ",
                             options_.resume_command.empty()
                                 ? absl::StrCat("packed-bert train --config ", options_.run_dir,
                                                "/config.yaml --resume auto")
                                 : options_.resume_command)));
}

absl::Status CheckBoundFiles(const CheckpointInfo& checkpoint) {
  if (!checkpoint.state.is_object() || !checkpoint.state.contains("files")) {
    return absl::OkStatus();  // written before checkpoints bound their files
  }
  const nlohmann::json& files = checkpoint.state["files"];
  for (const char* file : kBoundFiles) {
    const std::string path = checkpoint.dir + "/" + file;
    const std::string saved = files.is_object() ? files.value(file, "") : "";
    absl::StatusOr<std::string> checksum = FileChecksum(path);
    if (checksum.status().code() == absl::StatusCode::kNotFound) continue;  // the loader says so
    // A pipe or device in its place, or a file that cannot be read.
    if (!checksum.ok()) return Damaged(checkpoint.dir, checksum.status().message());
    const std::string& now = *checksum;
    if (saved != now) {
      return Damaged(
          checkpoint.dir,
          absl::StrCat(path, " is not the one this checkpoint saved (checksum ", now,
                       ", trainer_state.json says ", saved.empty() ? "none" : saved, ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<CheckpointHold> CheckpointHold::Take(const std::string& path) {
  std::error_code error;
  if (!fs::is_directory(path, error)) {
    // Not (or no longer) a folder: a weights file, or a checkpoint gone.
    if (fs::exists(path, error) || StepOfFolder(path) < 0) return CheckpointHold(-1);
    return MissingCheckpoint(path, "not found");
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    return errno == ENOENT ? MissingCheckpoint(path, "was removed while it was opened")
                           : ErrnoError(absl::StrCat("cannot open ", path), errno);
  }
  CheckpointHold hold(fd);
  // Waits while a rotation removes it; then it must still be there.
  if (::flock(fd, LOCK_SH) != 0) return ErrnoError(absl::StrCat("cannot lock ", path), errno);
  struct stat held, now;
  if (::fstat(fd, &held) != 0 || ::stat(path.c_str(), &now) != 0 || held.st_ino != now.st_ino ||
      held.st_dev != now.st_dev || held.st_nlink == 0) {
    return MissingCheckpoint(path, "was removed while it was opened");
  }
  return hold;
}

CheckpointHold::CheckpointHold(CheckpointHold&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

CheckpointHold::~CheckpointHold() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status LoadVerifiedWeights(const std::string& path, torch::nn::Module& model,
                                 const std::function<bool(const std::string&)>& take) {
  ASSIGN_OR_RETURN(const CheckpointHold hold, CheckpointHold::Take(path));
  std::error_code error;
  if (std::filesystem::exists(std::filesystem::path(path) / "trainer_state.json", error)) {
    ASSIGN_OR_RETURN(CheckpointInfo checkpoint, ReadCheckpointInfo(path));
    RETURN_IF_ERROR(CheckBoundFiles(checkpoint));
  }
  RETURN_IF_ERROR(model::LoadWeights(model, path, take));
  return model::CheckFiniteWeights(model, path);
}

std::string TaskOfWeights(const std::string& path) {
  std::error_code error;
  const fs::path dir =
      fs::is_directory(path, error) ? fs::path(path) : fs::path(path).parent_path();
  const auto read = [&](const char* name) -> nlohmann::json {
    const fs::path file = dir / name;
    if (!fs::is_regular_file(file, error)) return nullptr;
    absl::StatusOr<std::string> text = ReadFile(file.string(), kMaxStateBytes);
    if (!text.ok()) return nullptr;
    return nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  };
  if (const nlohmann::json state = read("trainer_state.json"); state.is_object()) {
    const nlohmann::json* loop = state.contains("loop") ? &state["loop"] : nullptr;
    if (loop && loop->is_object() && loop->contains("task") && (*loop)["task"].is_string()) {
      return (*loop)["task"].get<std::string>();
    }
    return "";
  }
  if (const nlohmann::json config = read("config.json"); config.is_object()) {
    if (config.contains("finetuning_task") && config["finetuning_task"].is_string()) {
      return config["finetuning_task"].get<std::string>();
    }
    const nlohmann::json& architectures = config.value("architectures", nlohmann::json());
    if (architectures.is_array() && architectures.size() == 1 && architectures[0].is_string()) {
      return tasks::TaskOfArchitecture(architectures[0].get<std::string>());
    }
  }
  return "";
}

absl::Status LoadCheckpointWeights(const std::string& dir, torch::nn::Module& model,
                                   optim::Lamb& optimizer, const c10::Device& device) {
  if (absl::Status loaded = model::LoadWeights(model, dir + "/model.safetensors"); !loaded.ok()) {
    // A mis-shaped model is the config's doing; anything else, the file's.
    const bool file = loaded.code() == absl::StatusCode::kDataLoss ||
                      loaded.code() == absl::StatusCode::kNotFound;
    return file ? Damaged(dir, loaded.message()) : loaded;
  }
  // (Checked by type first: LibTorch would wait forever on a named pipe.)
  if (absl::Status readable = CheckReadableFile(dir + "/optimizer.pt", "optimizer state");
      !readable.ok()) {
    return Damaged(dir, readable.message());
  }
  try {
    torch::serialize::InputArchive archive;
    // Onto the training device, whichever device wrote it.
    archive.load_from(dir + "/optimizer.pt", device);
    optimizer.load(archive);
  } catch (const optim::StateMismatch& e) {
    // The config's doing, not the file's.
    return absl::InvalidArgumentError(
        absl::StrCat(dir, "/optimizer.pt does not fit this model: ", e.what(),
                     "; resume with the config the checkpoint was trained with"));
  } catch (const std::exception& e) {
    return Damaged(dir, absl::StrCat(dir, "/optimizer.pt cannot be read: ", FirstLine(e)));
  }
  return absl::OkStatus();
}

}  // namespace pbert::train
