#include "data/store.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "common/atomic_file.h"
#include "common/checksum.h"
#include "data/hdf5.h"
#include "data/prepare.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/data/random_instances.h"
#include "tests/data/shared_data.h"
#include "tests/scratch_folder.h"

namespace pbert::data {
namespace {

namespace fs = std::filesystem;

// Writes `manifest` as `dir`/store.json, signed with its checksum as
// docs/formats.md defines it: as the store would, whatever it holds.
void WriteSignedManifest(const std::string& dir, nlohmann::ordered_json manifest) {
  manifest.erase("manifest_checksum");
  const std::string unsigned_text = manifest.dump(2);
  manifest["manifest_checksum"] = absl::StrFormat(
      "%016x",
      Checksum64({reinterpret_cast<const uint8_t*>(unsigned_text.data()), unsigned_text.size()}));
  ASSERT_TRUE(WriteFileAtomically(dir + "/store.json", manifest.dump(2) + "\n").ok());
}

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override { root_ = testing::ScratchFolder().string(); }
  void TearDown() override { fs::remove_all(root_); }

  std::string Write(const std::vector<Instance>& instances, uint32_t vocab_size, uint64_t per_shard,
                    const std::string& name = "store") {
    std::string dir = root_ + "/" + name;
    auto writer = StoreWriter::Create(dir, {vocab_size, 42, 64, 64, "test"}, per_shard);
    EXPECT_TRUE(writer.ok()) << writer.status();
    for (const auto& in : instances) EXPECT_TRUE((*writer)->Add(in).ok());
    EXPECT_TRUE((*writer)->Finish().ok());
    return dir;
  }
  std::string root_;
};

TEST_F(StoreTest, RoundTripAcrossShardsWithTwoAndFourByteIds) {
  for (uint32_t vocab : {30522u, 100000u}) {
    auto instances = testing::RandomInstances(1000, 3, 64, vocab, vocab);
    std::string dir = Write(instances, vocab, 300, "v" + std::to_string(vocab));
    auto store = InstanceStore::Open(dir);
    ASSERT_TRUE(store.ok()) << store.status();
    EXPECT_EQ(store->id_bytes(), vocab > 65536 ? 4 : 2);
    ASSERT_EQ(store->size(), 1000u);
    for (uint64_t i = 0; i < 1000; ++i) {
      testing::ExpectSameInstance(instances[i], store->Get(i));
      ASSERT_EQ(store->Length(i), instances[i].length());
    }
    EXPECT_EQ(store->Histogram().sequences(), 1000u);
    EXPECT_TRUE(store->Verify().ok());
    EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}), 5);  // 4 + json
  }
}

TEST_F(StoreTest, RejectsBadInstancesWithTheirIndex) {
  auto writer = StoreWriter::Create(root_ + "/s", {100, 0, 8, 2, ""}, 10);
  ASSERT_TRUE(writer.ok());
  Instance too_long{std::vector<int32_t>(9, 5), std::vector<int32_t>(9, 0), {}, {}, 0};
  EXPECT_EQ(std::string((*writer)->Add(too_long).message()), "instance 0: length 9 outside 1..8");
  Instance bad_id{{1, 500, 2}, {0, 0, 1}, {}, {}, 0};
  EXPECT_NE((*writer)->Add(bad_id).message().find("outside the vocabulary"), std::string::npos);
  Instance bad_segments{{1, 5, 2}, {0, 1, 0}, {}, {}, 0};
  EXPECT_NE((*writer)->Add(bad_segments).message().find("0s then 1s"), std::string::npos);
  Instance bad_positions{{1, 5, 6, 2}, {0, 0, 1, 1}, {2, 1}, {7, 7}, 0};
  EXPECT_NE((*writer)->Add(bad_positions).message().find("must increase"), std::string::npos);
}

TEST_F(StoreTest, AnUnfinishedWriterLeavesNothing) {
  {
    auto writer = StoreWriter::Create(root_ + "/partial", {100, 0, 64, 64, ""}, 2);
    ASSERT_TRUE(writer.ok());
    for (const auto& in : testing::RandomInstances(5, 3, 10, 100, 1))
      ASSERT_TRUE((*writer)->Add(in).ok());
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(root_), fs::directory_iterator{}), 0);
  std::string dir = Write(testing::RandomInstances(3, 3, 10, 100, 2), 100, 10);
  EXPECT_EQ(StoreWriter::Create(dir, {100, 0, 64, 64, ""}, 10).status().code(),
            absl::StatusCode::kAlreadyExists);
}

TEST_F(StoreTest, ASymbolicLinkAsTheTargetIsRefusedBeforeTheWork) {
  // A store is renamed onto its path: a link there would be replaced, and
  // one to nothing or to itself is a mistake; all refused, nothing made.
  fs::create_symlink(root_ + "/nowhere/store", root_ + "/dangling");
  fs::create_symlink(root_ + "/loop", root_ + "/loop");
  fs::create_directory(root_ + "/real");
  fs::create_directory_symlink(root_ + "/real", root_ + "/link");
  for (const char* name : {"dangling", "loop"}) {
    const std::string target = root_ + "/" + name;
    EXPECT_EQ(
        CheckStoreTarget(target, {}, false).message(),
        target + " is a symbolic link to nothing (or a loop); name the store's folder itself");
    EXPECT_EQ(
        StoreWriter::Create(target, {100, 42, 64, 64, "test"}, 10).status().message(),
        target + " is a symbolic link to nothing (or a loop); name the store's folder itself");
  }
  EXPECT_EQ(CheckStoreTarget(root_ + "/link", {}, true).message(),
            root_ + "/link is a symbolic link; name the store's folder itself");
  EXPECT_FALSE(fs::exists(root_ + "/nowhere"));
  EXPECT_EQ(std::distance(fs::directory_iterator(root_), fs::directory_iterator{}), 4);
}

// A killed prepare leaves its temporary folder; the next writer of the same
// store removes it, and leaves one that a running writer holds.
TEST_F(StoreTest, StaleTemporaryFoldersOfKilledWritersGo) {
  const std::string dir = root_ + "/store";
  fs::create_directories(dir + ".tmp-AbC123");  // as a killed writer leaves it
  std::ofstream(dir + ".tmp-AbC123/shard-00000.pbstore") << "half a shard";
  fs::create_directories(dir + ".tmp-notes");  // not a temporary's name: stays
  auto running = StoreWriter::Create(root_ + "/store", {100, 0, 64, 64, ""}, 10, true);
  ASSERT_TRUE(running.ok());
  EXPECT_FALSE(fs::exists(dir + ".tmp-AbC123"));
  Write(testing::RandomInstances(3, 3, 10, 100, 2), 100, 10, "other");
  auto again = StoreWriter::Create(dir, {100, 0, 64, 64, ""}, 10, true);
  ASSERT_TRUE(again.ok());
  int temporaries = 0;
  for (const auto& entry : fs::directory_iterator(root_)) {
    temporaries += absl::StrContains(entry.path().filename().string(), "store.tmp-") ? 1 : 0;
  }
  EXPECT_EQ(temporaries, 3) << "both writers' folders and the look-alike";
  EXPECT_TRUE(fs::exists(dir + ".tmp-notes"));
}

// A shard builder holding `instances`.
ShardBuilder Built(const std::vector<Instance>& instances, const StoreInfo& info) {
  ShardBuilder shard(info);
  for (const Instance& in : instances) EXPECT_TRUE(shard.Add(in).ok());
  return shard;
}

// What a run that stops early leaves: the shards it wrote and their
// journal lines; the next run with the same plan gets each back for the
// same work only, and makes the rest. Mutations tried: Resumed ignoring
// the work (the "x" lookup then finds shard 1), and the destructor removing
// the folder whatever was done (the second Open then resumes nothing).
TEST_F(StoreTest, APartialStoreKeepsWhatIsDoneAndTheNextRunContinues) {
  const std::string dir = root_ + "/store";
  const StoreInfo info{100, 42, 64, 64, "test"};
  const auto records = testing::RandomInstances(30, 3, 64, 100, 5);
  const std::vector<Instance> parts[3] = {{records.begin(), records.begin() + 10},
                                          {records.begin() + 10, records.begin() + 25},
                                          {records.begin() + 25, records.end()}};
  {
    auto first = PartialStore::Open(dir, info, "plan", false);
    ASSERT_TRUE(first.ok()) << first.status();
    ASSERT_TRUE((*first)->Write(1, Built(parts[1], info), "b", "note b").ok());
  }  // stops before the other shards
  ASSERT_TRUE(fs::exists(dir + ".partial/shard-00001.pbstore"));
  EXPECT_FALSE(fs::exists(dir + ".partial/store.json"));
  EXPECT_FALSE(InstanceStore::Open(dir + ".partial").ok()) << "not a store before it is whole";
  {
    // A kill during an append leaves half a line: ignored, then cut.
    std::ofstream(dir + ".partial/import.log", std::ios::app) << R"({"shard": 2, "rec)";
  }
  auto second = PartialStore::Open(dir, info, "plan", false);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ((*second)->resumed(), 1u);
  const PartialStore::Done* done = (*second)->Resumed(1, "b");
  ASSERT_NE(done, nullptr);
  EXPECT_EQ(done->records, 15u);
  EXPECT_EQ(done->note, "note b");
  EXPECT_EQ((*second)->Resumed(1, "x"), nullptr) << "made from other inputs: made again";
  EXPECT_EQ((*second)->Resumed(0, "a"), nullptr);
  EXPECT_EQ((*second)->Finish(3).code(), absl::StatusCode::kInternal) << "shards 0 and 2 missing";
  ASSERT_TRUE((*second)->Write(2, Built(parts[2], info), "c", "").ok());
  ASSERT_TRUE((*second)->Write(0, Built(parts[0], info), "a", "").ok());
  EXPECT_EQ((*second)->shards_done(), 3u);
  // What is no part of this import (a shard of an earlier, larger plan, a
  // stray file) does not go into the store.
  std::ofstream(dir + ".partial/shard-00007.pbstore") << "an earlier import's";
  std::ofstream(dir + ".partial/notes.txt") << "a stray file";
  ASSERT_TRUE((*second)->Finish(3).ok());
  second->reset();
  EXPECT_FALSE(fs::exists(dir + ".partial"));
  EXPECT_FALSE(fs::exists(dir + "/import.log"));
  EXPECT_FALSE(fs::exists(dir + "/shard-00007.pbstore"));
  EXPECT_FALSE(fs::exists(dir + "/notes.txt"));
  auto store = InstanceStore::Open(dir, StoreChecks::kChecksums);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_EQ(store->size(), records.size());
  for (size_t i = 0; i < records.size(); ++i)
    testing::ExpectSameInstance(records[i], store->Get(i));
  EXPECT_TRUE(store->Verify().ok());
}

// Options changed between runs: nothing is reused, and finished shards are
// not removed unless the run says to start over (--overwrite): without it
// the run is refused naming what differs. A folder that is not an import,
// or one another writer holds, is named and left as it is. A run that made
// nothing leaves nothing.
TEST_F(StoreTest, APartialStoreOfOtherOptionsIsKeptUnlessToldAndOthersFoldersAreLeft) {
  const std::string dir = root_ + "/store";
  const StoreInfo info{100, 42, 64, 64, "test"};
  const auto records = testing::RandomInstances(5, 3, 64, 100, 6);
  {
    auto first = PartialStore::Open(dir, info, "plan 1", false);
    ASSERT_TRUE(first.ok());
    ASSERT_TRUE((*first)->Write(0, Built(records, info), "a", "").ok());
    auto busy = PartialStore::Open(dir, info, "plan 1", false);
    EXPECT_EQ(busy.status().message(), "another process is writing the store " + dir + " (" + dir +
                                           ".partial is in use); wait for it");
  }
  for (const StoreInfo& other :
       {StoreInfo{100, 42, 64, 64, "test"}, StoreInfo{100, 43, 64, 64, "test"}}) {
    const std::string plan = other.vocab_checksum == 42 ? "plan 2" : "plan 1";
    auto refused = PartialStore::Open(dir, other, plan, false);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(refused.status().message().find(other.vocab_checksum == 42
                                                  ? "(the plan 'plan 1', now 'plan 2')"
                                                  : "(vocab_checksum \"000000000000002a\", now "
                                                    "\"000000000000002b\", the plan 'plan 2', now "
                                                    "'plan 1')"),
              std::string::npos)
        << refused.status();
    EXPECT_TRUE(fs::exists(dir + ".partial/shard-00000.pbstore")) << "a finished shard was removed";
    auto again = PartialStore::Open(dir, other, plan, /*overwrite=*/true);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ((*again)->resumed(), 0u);
    EXPECT_EQ((*again)->Resumed(0, "a"), nullptr);
    EXPECT_FALSE(fs::exists(dir + ".partial/shard-00000.pbstore"));
    ASSERT_TRUE((*again)->Write(0, Built(records, other), "a", "").ok());
  }
  EXPECT_TRUE(fs::exists(dir + ".partial/shard-00000.pbstore")) << "kept: a shard was made";

  const std::string foreign = root_ + "/mine";
  fs::create_directories(foreign + ".partial");
  std::ofstream(foreign + ".partial/notes.txt") << "a user's file";
  EXPECT_EQ(PartialStore::Open(foreign, info, "plan", false).status().message(),
            foreign +
                ".partial exists and is not an import in progress (no import.log); "
                "packed-bert prepare writes its store there first: move it away");
  EXPECT_TRUE(fs::exists(foreign + ".partial/notes.txt"));
  // A link where the import's folder, or its journal, belongs is followed
  // nowhere: another folder's files would be reused or removed.
  fs::create_symlink(dir + ".partial", root_ + "/linked.partial");
  EXPECT_EQ(PartialStore::Open(root_ + "/linked", info, "plan 1", false).status().message(),
            root_ +
                "/linked.partial or its import.log is a symbolic link; prepare makes this "
                "folder itself: move the link away");
  fs::create_directories(root_ + "/journal.partial");
  fs::create_symlink(dir + ".partial/import.log", root_ + "/journal.partial/import.log");
  EXPECT_FALSE(PartialStore::Open(root_ + "/journal", info, "plan 1", false).ok());
  EXPECT_TRUE(fs::exists(dir + ".partial/shard-00000.pbstore")) << "a linked folder's shard went";

  {
    auto nothing = PartialStore::Open(root_ + "/empty", info, "plan", false);
    ASSERT_TRUE(nothing.ok());
    EXPECT_TRUE(fs::exists(root_ + "/empty.partial"));
  }
  EXPECT_FALSE(fs::exists(root_ + "/empty.partial"));
  EXPECT_FALSE(fs::exists(root_ + "/empty"));
}

// Ranks that open a store together each check the checksums of their share
// of its shards (shard i is part i mod parts's): a damaged shard is found
// by the rank whose part it is, and by a process that checks all. Mutation
// tried: every part checking shard 0 onwards (part 1 of 2 then finds shard 2).
TEST_F(StoreTest, EachRankChecksItsShareOfTheShards) {
  std::string dir = Write(testing::RandomInstances(40, 3, 60, 1000, 3), 1000, 10);
  const std::string shard = dir + "/shard-00002.pbstore";
  std::string bytes = *ReadFile(shard);
  bytes[bytes.size() - 5] ^= 0x40;
  ASSERT_TRUE(WriteFileAtomically(shard, bytes).ok());
  auto open = [&](ShardShare share) {
    return InstanceStore::Open(dir, StoreChecks::kChecksums, share).status();
  };
  EXPECT_NE(open({}).message().find(shard + ": checksum mismatch"), std::string::npos);
  EXPECT_NE(open({0, 2}).message().find(shard + ": checksum mismatch"), std::string::npos);
  EXPECT_TRUE(open({1, 2}).ok()) << open({1, 2});
  EXPECT_NE(open({2, 4}).message().find(shard), std::string::npos);
  for (int part : {0, 1, 3}) EXPECT_TRUE(open({part, 4}).ok()) << part;
  EXPECT_EQ(open({2, 2}).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(StoreTest, DamageIsFoundAndNamed) {
  std::string dir = Write(testing::RandomInstances(50, 3, 60, 1000, 3), 1000, 100);
  std::string shard = dir + "/shard-00000.pbstore";
  std::string bytes = *ReadFile(shard);

  std::string flipped = bytes;
  flipped[flipped.size() - 5] ^= 0x40;
  ASSERT_TRUE(WriteFileAtomically(shard, flipped).ok());
  const std::string damaged = shard +
                              ": checksum mismatch: its data changed after it was written; the "
                              "store is damaged, prepare it again";
  auto status = InstanceStore::Open(dir)->Verify();
  EXPECT_EQ(std::string(status.message()), damaged);
  // Opened to read the records (train, score, export): refused the same way.
  EXPECT_EQ(InstanceStore::Open(dir, StoreChecks::kChecksums).status().message(), damaged);

  // A record whose own length disagrees, with every checksum made to match
  // (the shard's, its entry in store.json, store.json's own, as
  // docs/formats.md defines them): the bounds check on reading names it.
  const std::string manifest_text = *ReadFile(dir + "/store.json");
  std::string forged = bytes;
  const size_t offsets = 80 + (50 * 2 + 7) / 8 * 8;  // header, then 50 lengths
  const size_t body = offsets + 51 * 8;
  uint64_t offset7;
  std::memcpy(&offset7, forged.data() + offsets + 7 * 8, 8);
  forged[body + offset7] ^= 0x01;  // record 7's length field
  uint64_t checksum =
      Checksum64({reinterpret_cast<const uint8_t*>(forged.data()) + 80, forged.size() - 80});
  std::memcpy(forged.data() + 56, &checksum, 8);
  ASSERT_TRUE(WriteFileAtomically(shard, forged).ok());
  auto manifest = nlohmann::ordered_json::parse(manifest_text);
  manifest["shards"][0]["checksum"] = absl::StrFormat("%016x", checksum);
  WriteSignedManifest(dir, manifest);
  status = InstanceStore::Open(dir)->Verify();
  EXPECT_NE(status.message().find(shard + ": record 7 (store index 7)"), std::string::npos)
      << status;
  Instance record;
  status = InstanceStore::Open(dir)->Read(7, &record);
  EXPECT_NE(status.message().find(shard + ": record 7 (store index 7)"), std::string::npos)
      << status;
  ASSERT_TRUE(WriteFileAtomically(dir + "/store.json", manifest_text).ok());

  ASSERT_TRUE(WriteFileAtomically(shard, bytes.substr(0, bytes.size() - 10)).ok());
  status = InstanceStore::Open(dir).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(status.message().find("truncated"), std::string::npos) << status;

  EXPECT_EQ(InstanceStore::Open(root_).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(StoreTest, ManifestAndShardsMustBelongTogether) {
  std::string a = Write(testing::RandomInstances(30, 3, 60, 1000, 4), 1000, 10, "a");
  std::string b = Write(testing::RandomInstances(30, 3, 60, 1000, 5), 1000, 10, "b");
  const std::string manifest = *ReadFile(a + "/store.json");
  // An edited manifest.
  std::string edited = manifest;
  edited.replace(edited.find("\"records\": 30"), 13, "\"records\": 31");
  ASSERT_TRUE(WriteFileAtomically(a + "/store.json", edited).ok());
  EXPECT_EQ(std::string(InstanceStore::Open(a).status().message()),
            a + "/store.json: its checksum does not match its contents (edited or cut); the store "
                "is damaged, prepare it again");
  ASSERT_TRUE(WriteFileAtomically(a + "/store.json", manifest).ok());
  // A shard of another store.
  const std::string shard1 = a + "/shard-00001.pbstore";
  const std::string own = *ReadFile(shard1);
  ASSERT_TRUE(WriteFileAtomically(shard1, *ReadFile(b + "/shard-00001.pbstore")).ok());
  EXPECT_EQ(std::string(InstanceStore::Open(a).status().message()),
            shard1 +
                ": it belongs to another store (store id differs from store.json); the "
                "store is damaged, prepare it again");
  // A shard of this store copied over another one.
  ASSERT_TRUE(WriteFileAtomically(shard1, *ReadFile(a + "/shard-00000.pbstore")).ok());
  EXPECT_NE(InstanceStore::Open(a).status().message().find(
                "it is shard 0 of its store, store.json lists it as shard 1"),
            std::string::npos);
  // Every header field store.json also holds must agree with it (the
  // payload checksum does not cover the header): the vocabulary checksum
  // (offset 40), the slots per sequence (24), a reserved field (28).
  for (const size_t offset : {40, 24, 28}) {
    std::string changed = own;
    changed[offset] ^= 0x01;
    ASSERT_TRUE(WriteFileAtomically(shard1, changed).ok());
    EXPECT_EQ(std::string(InstanceStore::Open(a).status().message()),
              shard1 +
                  ": header does not match store.json; the store is damaged, prepare it "
                  "again")
        << "offset " << offset;
  }
  ASSERT_TRUE(WriteFileAtomically(shard1, own).ok());
  EXPECT_TRUE(InstanceStore::Open(a).ok());
  // A shard name that is not a plain name of the store folder, signed as
  // the store would: an embedded NUL (which a path would cut), a path out
  // of the folder, the folder itself. A reader opens only the files named.
  fs::copy_file(shard1, root_ + "/shard-00001.pbstore");
  fs::copy_file(shard1, shard1 + "x");
  for (const std::string& name :
       {std::string("shard-00001.pbstore\0x", 21), std::string("../shard-00001.pbstore"),
        std::string(".."), std::string("shard-00001.pbstore\n")}) {
    auto changed = nlohmann::ordered_json::parse(manifest);
    changed["shards"][1]["file"] = name;
    WriteSignedManifest(a, changed);
    const absl::Status opened = InstanceStore::Open(a).status();
    EXPECT_EQ(opened.code(), absl::StatusCode::kDataLoss) << opened;
    EXPECT_TRUE(absl::StartsWith(opened.message(), a + "/store.json: shard name \"")) << opened;
    EXPECT_TRUE(absl::EndsWith(opened.message(), "; the store is damaged, prepare it again"))
        << opened;
  }
  ASSERT_TRUE(WriteFileAtomically(a + "/store.json", manifest).ok());
}

// The content checksum names the data, not where it lies: the same records
// written twice (two store ids) agree; other records or another
// vocabulary differ.
TEST_F(StoreTest, TheContentChecksumNamesTheData) {
  const auto records = testing::RandomInstances(40, 3, 60, 1000, 6);
  auto checksum = [&](const std::string& dir) {
    auto store = InstanceStore::Open(dir);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? store->content_checksum() : 0;
  };
  const uint64_t a = checksum(Write(records, 1000, 10, "a"));
  EXPECT_NE(a, 0u);
  EXPECT_EQ(checksum(Write(records, 1000, 10, "same")), a);
  EXPECT_NE(checksum(Write(testing::RandomInstances(40, 3, 60, 1000, 7), 1000, 10, "other")), a);
  auto again = ReadStoreInfo(root_ + "/a");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->max_len, 64u);
}

TEST_F(StoreTest, StoreToHdf5ToStoreIsIdentical) {
  PBERT_REQUIRE_SHARED("wiki_00");
  PrepareOptions o;
  o.inputs = {testing::SharedData("wiki_00")};
  o.vocab = testing::SharedData("bert-base-uncased-vocab.txt");
  o.instances.max_seq_len = 128;
  o.instances.dupe_factor = 1;
  o.records_per_shard = 1000;
  o.threads = 2;
  o.output = root_ + "/from_text";
  ASSERT_TRUE(Prepare(o).ok());
  auto first = InstanceStore::Open(o.output);
  ASSERT_TRUE(first.ok());
  std::vector<Instance> all;
  for (uint64_t i = 0; i < first->size(); ++i) all.push_back(first->Get(i));
  std::string hdf5 = root_ + "/export.hdf5";
  ASSERT_TRUE(WriteHdf5(hdf5, all, 128, 20).ok());

  o.inputs = {hdf5};
  o.input_format = InputFormat::kHdf5;
  o.output = root_ + "/from_hdf5";
  ASSERT_TRUE(Prepare(o).ok());
  size_t shards = 0;
  for (const auto& entry : fs::directory_iterator(root_ + "/from_text")) {
    std::string name = entry.path().filename();
    if (name == "store.json") continue;
    // The same bytes but for the store id (at 64) that makes each store its own.
    std::string a = *ReadFile(entry.path()), b = *ReadFile(root_ + "/from_hdf5/" + name);
    ASSERT_EQ(a.size(), b.size()) << name;
    EXPECT_EQ(a.substr(0, 64), b.substr(0, 64)) << name;
    EXPECT_EQ(a.substr(72), b.substr(72)) << name;
    EXPECT_NE(a.substr(64, 8), b.substr(64, 8)) << name;
    ++shards;
  }
  EXPECT_GT(shards, 1u);
}

}  // namespace
}  // namespace pbert::data
