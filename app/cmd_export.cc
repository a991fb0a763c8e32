#include <filesystem>
#include <iostream>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "app/commands.h"
#include "common/folders.h"
#include "common/progress.h"
#include "common/status.h"
#include "data/hdf5.h"
#include "data/store.h"

namespace pbert::app {
namespace {

// --out names a file that is not part of the store being read.
absl::Status CheckOutsideStore(const std::string& out, const std::string& store) {
  std::error_code error;
  if (std::filesystem::is_directory(out, error)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--out ", out, " is a folder; name the HDF5 file to write"));
  }
  if (IsInside(out, store)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--out ", out, " is inside the store ", store, " being exported; write it elsewhere"));
  }
  return absl::OkStatus();
}

absl::Status RunExport(const Args& args) {
  RETURN_IF_ERROR(CheckOutsideStore(args.Get("out"), args.Get("store")));
  RETURN_IF_ERROR(CheckOutput(args, args.Get("out"), OutputKind::kHdf5File));
  // An HDF5 file of no rows is of no use to any reader: at least one.
  ASSIGN_OR_RETURN(int64_t limit, args.GetInt("limit", -1, 1, std::numeric_limits<int64_t>::max()));
  ASSIGN_OR_RETURN(data::InstanceStore store,
                   data::InstanceStore::Open(args.Get("store"), data::StoreChecks::kChecksums));
  const uint64_t n = limit < 0 ? store.size() : std::min<uint64_t>(limit, store.size());
  std::vector<data::Instance> instances(n);
  Progress progress("export", n, "records");
  for (uint64_t i = 0; i < n; ++i) {
    // Checked as it is read: a damaged record stops the export, named.
    RETURN_IF_ERROR(store.Read(i, &instances[i]));
    if ((i + 1) % 4096 == 0) progress.Add(4096);
  }
  progress.Add(n % 4096);
  progress.Finish();
  RETURN_IF_ERROR(
      data::WriteHdf5(args.Get("out"), instances, static_cast<int>(store.info().max_len),
                      static_cast<int>(store.info().max_predictions), ExistingOutput(args)));
  std::cout << args.Get("out") << ": " << n << " instances in the MLPerf HDF5 format\n";
  return absl::OkStatus();
}

}  // namespace

Command ExportCommand() {
  Command command;
  command.name = "export";
  command.summary = "write an instance store as MLPerf HDF5";
  command.usage = "export --store DIR --out FILE.hdf5 [--limit N]";
  command.details =
      "Writes the datasets input_ids, input_mask, segment_ids, masked_lm_positions,\n"
      "masked_lm_ids and next_sentence_labels, zero-padded to the store's limits. The whole\n"
      "export is held in memory while it is written.";
  command.flags = {
      {"store", "DIR", "the instance store", false, true},
      {"out", "FILE", "the HDF5 file to write", false, true},
      {"limit", "N", "export only the first N records"},
      OverwriteFlag(OutputKindName(OutputKind::kHdf5File)),
  };
  command.run = RunExport;
  return command;
}

}  // namespace pbert::app
