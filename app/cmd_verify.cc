#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "app/commands.h"
#include "common/progress.h"
#include "common/status.h"
#include "data/packing/pack_index.h"
#include "data/store.h"

namespace pbert::app {
namespace {

absl::Status RunVerify(const Args& args) {
  if (args.positional().size() != 1) {
    return absl::InvalidArgumentError("verify takes one PATH: a store folder or a .pbpack file");
  }
  const std::string path = args.positional()[0];
  if (absl::EndsWith(path, ".pbpack")) {
    ASSIGN_OR_RETURN(data::PackIndex index, data::PackIndex::Read(path));
    if (!args.Has("store")) {
      std::cout << path << ": pack index of " << index.sequences() << " sequences in "
                << index.rows() << " rows; header and checksum valid (give --store to check "
                << "that it partitions a store)\n";
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(data::InstanceStore store, data::InstanceStore::Open(args.Get("store")));
    RETURN_IF_ERROR(Annotate(index.Verify(store.Lengths()), path));
    std::cout << path << ": a partition of " << store.dir() << " (" << index.sequences()
              << " sequences in " << index.rows() << " rows, every one exactly once)\n";
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(data::InstanceStore store, data::InstanceStore::Open(path));
  Progress progress("verify", store.size(), "records");
  RETURN_IF_ERROR(store.Verify([&](uint64_t n) { progress.Add(n); }));
  progress.Finish();
  std::cout << path << ": " << store.size()
            << " records; every shard's checksum and every record's bounds are valid\n";
  return absl::OkStatus();
}

}  // namespace

Command VerifyCommand() {
  Command command;
  command.name = "verify";
  command.summary = "check an instance store or a pack index";
  command.usage = "verify STORE_DIR | verify PACK.pbpack [--store STORE_DIR]";
  command.details =
      "A store: headers, checksums and every record's bounds; the first bad record is named.\n"
      "A pack index: its header and checksum, and with --store that it is a partition of the\n"
      "store (every sequence in exactly one row, with the length its slot says).";
  command.flags = {{"store", "DIR", "the store a pack index belongs to"}};
  command.run = RunVerify;
  return command;
}

}  // namespace pbert::app
