#include "data/hdf5.h"

#include <H5Cpp.h>

#include <filesystem>

#include "common/atomic_file.h"
#include "gtest/gtest.h"
#include "tests/data/random_instances.h"

namespace pbert::data {
namespace {

std::string Temp(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("pbert_hdf5_" + name);
}

std::vector<Instance> Instances(int n, int max_len, int max_predictions) {
  // Every position but [CLS] and [SEP] may be masked: max_len - 2 slots.
  EXPECT_GE(max_predictions, 1);
  auto out = testing::RandomInstances(n, 3, max_len, 30000, n);
  for (auto& in : out) {
    in.masked_positions.resize(std::min<size_t>(in.masked_positions.size(), max_predictions));
    in.masked_ids.resize(in.masked_positions.size());
  }
  return out;
}

TEST(Hdf5Test, WriteThenReadGivesTheSameInstances) {
  auto instances = Instances(300, 64, 10);
  std::string path = Temp("roundtrip.hdf5");
  ASSERT_TRUE(WriteHdf5(path, instances, 64, 10).ok());
  auto reader = Hdf5Reader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->size(), 300);
  EXPECT_EQ((*reader)->max_len(), 64);
  EXPECT_EQ((*reader)->max_predictions(), 10);
  auto all = (*reader)->Read(0, 300);
  ASSERT_TRUE(all.ok()) << all.status();
  for (size_t i = 0; i < instances.size(); ++i)
    testing::ExpectSameInstance(instances[i], (*all)[i]);
  auto middle = (*reader)->Read(100, 7);
  ASSERT_TRUE(middle.ok());
  testing::ExpectSameInstance(instances[106], (*middle)[6]);
  EXPECT_FALSE((*reader)->Read(295, 10).ok());
  std::filesystem::remove(path);
}

TEST(Hdf5Test, TheFileHasTheMlperfLayout) {
  std::string path = Temp("layout.hdf5");
  ASSERT_TRUE(WriteHdf5(path, Instances(5, 16, 4), 16, 4).ok());
  H5::H5File file(path, H5F_ACC_RDONLY);
  for (const char* name : {"input_ids", "input_mask", "segment_ids", "masked_lm_positions",
                           "masked_lm_ids", "next_sentence_labels"}) {
    EXPECT_TRUE(file.nameExists(name)) << name;
  }
  hsize_t dims[2];
  file.openDataSet("masked_lm_ids").getSpace().getSimpleExtentDims(dims);
  EXPECT_EQ(dims[0], 5u);
  EXPECT_EQ(dims[1], 4u);
  std::filesystem::remove(path);
}

TEST(Hdf5Test, BadFilesAreClearErrors) {
  std::string path = Temp("not.hdf5");
  ASSERT_TRUE(WriteFileAtomically(path, "plain text").ok());
  EXPECT_EQ(std::string(Hdf5Reader::Open(path).status().message()), path + " is not an HDF5 file");
  EXPECT_EQ(Hdf5Reader::Open(Temp("missing.hdf5")).status().code(), absl::StatusCode::kNotFound);
  {
    H5::H5File file(path, H5F_ACC_TRUNC);
    hsize_t n = 3;
    file.createDataSet("next_sentence_labels", H5::PredType::NATIVE_INT8, H5::DataSpace(1, &n));
  }
  auto status = Hdf5Reader::Open(path).status();
  EXPECT_NE(status.message().find("no dataset 'input_ids'"), std::string::npos) << status;
  std::filesystem::remove(path);
}

TEST(Hdf5Test, RefusesInstancesThatDoNotFit) {
  auto instances = Instances(2, 32, 4);
  EXPECT_FALSE(WriteHdf5(Temp("small.hdf5"), instances, 8, 4).ok());
  EXPECT_FALSE(std::filesystem::exists(Temp("small.hdf5")));
}

}  // namespace
}  // namespace pbert::data
