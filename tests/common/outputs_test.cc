// What --overwrite may replace, and what no output may land in.
#include "common/outputs.h"

#include <cstring>
#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "tests/scratch_folder.h"

namespace pbert {
namespace {

namespace fs = std::filesystem;

class OutputsTest : public ::testing::Test {
 protected:
  void SetUp() override { root_ = pbert::testing::ScratchFolder().string(); }
  void TearDown() override { fs::remove_all(root_); }

  std::string Make(const std::string& relative, const std::string& bytes = "x") const {
    const fs::path path = fs::path(root_) / relative;
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << bytes;
    return path.string();
  }
  std::string Dir(const std::string& relative) const {
    fs::create_directories(fs::path(root_) / relative);
    return root_ + "/" + relative;
  }
  // A run folder as train leaves it: its lock, logs and a checkpoint.
  std::string RunFolder() const {
    Make("run/run.lock", "123\n");
    Make("run/mllog.txt");
    Make("run/metrics.jsonl");
    Make("run/checkpoints/step-00000002/trainer_state.json", "{}");
    Make("run/checkpoints/step-00000002/model.safetensors");
    return root_ + "/run";
  }
  static std::string Safetensors() {
    const std::string header = "{\"a\":{}}";
    std::string bytes(8, '\0');
    const uint64_t length = header.size();
    std::memcpy(bytes.data(), &length, 8);
    return bytes + header;
  }
  static absl::Status Check(const std::string& path, OutputKind kind, bool overwrite = true) {
    return CheckOutputTarget(path, kind, overwrite, "OUT");
  }
  std::string root_;
};

TEST_F(OutputsTest, NothingIsWrittenIntoWhatARunKeeps) {
  const std::string run = RunFolder();
  const std::string checkpoint = run + "/checkpoints/step-00000002";
  Make("store/store.json", "{}");
  Make("store/shard-00000.pbs");
  const std::vector<std::pair<std::string, std::string>> kept = {
      {run, "is the run folder " + run},
      {run + "/", "is the run folder " + run},
      {run + "/mllog.txt", "is the run folder " + run + "'s mllog.txt"},
      {run + "/checkpoints", "lies in the checkpoints of the run folder " + run},
      {run + "/checkpoints/new", "lies in the checkpoints of the run folder " + run},
      {checkpoint, "is the checkpoint " + checkpoint},
      {checkpoint + "/hf", "lies in the checkpoint " + checkpoint},
      {root_ + "/store", "lies in"},  // a store is an output only of prepare
      {root_ + "/store/x.hdf5", "lies in the instance store " + root_ + "/store"},
      {root_ + "/store/../store/y", "lies in the instance store " + root_ + "/store"},
  };
  for (const auto& [path, why] : kept) {
    for (OutputKind kind : {OutputKind::kHfFolder, OutputKind::kWeightsFile}) {
      const absl::Status status = Check(path, kind);
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << path << ": " << status;
      if (path == root_ + "/store") continue;
      EXPECT_NE(status.message().find(why), std::string::npos) << status.message();
    }
  }
  // A run folder's other files (a pack index made for it) are outputs too.
  Make("run/pack.pbpack", "PBPACKIX and the rest");
  EXPECT_TRUE(Check(run + "/pack.pbpack", OutputKind::kPackIndex).ok());
  // A symbolic link into a checkpoint is where it leads.
  fs::create_symlink(checkpoint, root_ + "/link");
  EXPECT_EQ(Check(root_ + "/link/hf", OutputKind::kHfFolder).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(OutputsTest, OverwriteReplacesOnlyAnOutputOfTheSameKind) {
  const std::string weights = Make("w.safetensors", Safetensors());
  const std::string text = Make("notes.txt", "my notes\n");
  const std::string hdf5 = Make("d.hdf5", std::string("\x89HDF\r\n\x1a\n", 8) + "rest");
  const std::string pack = Make("p.pbpack", "PBPACKIXrest");
  const std::string hf = Dir("hf");
  for (const char* name : {"config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json"}) {
    Make(std::string("hf/") + name);
  }
  const std::string folder = Dir("mine");
  Make("mine/thesis.tex");
  EXPECT_TRUE(Check(weights, OutputKind::kWeightsFile).ok());
  EXPECT_TRUE(Check(hdf5, OutputKind::kHdf5File).ok());
  EXPECT_TRUE(Check(pack, OutputKind::kPackIndex).ok());
  EXPECT_TRUE(Check(hf, OutputKind::kHfFolder).ok());
  EXPECT_TRUE(Check(root_ + "/new", OutputKind::kHfFolder).ok());
  const std::vector<std::tuple<std::string, OutputKind, std::string>> refused = {
      {text, OutputKind::kWeightsFile, "is a file of another format"},
      {weights, OutputKind::kHdf5File, "is a file of another format"},
      {hdf5, OutputKind::kPackIndex, "is a file of another format"},
      {text, OutputKind::kHfFolder, "is a file;"},
      {hf, OutputKind::kWeightsFile, "is a folder;"},
      {folder, OutputKind::kHfFolder, "is a folder holding thesis.tex;"},
      {root_, OutputKind::kHfFolder, "is a folder holding"},
  };
  for (const auto& [path, kind, why] : refused) {
    const absl::Status status = Check(path, kind);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << path;
    EXPECT_NE(status.message().find(why), std::string::npos) << status.message();
    EXPECT_NE(status.message().find("--overwrite replaces only"), std::string::npos);
  }
  // Without --overwrite nothing that exists is replaced.
  EXPECT_EQ(Check(weights, OutputKind::kWeightsFile, false).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(fs::exists(folder + "/thesis.tex"));
}

}  // namespace
}  // namespace pbert
