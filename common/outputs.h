// What a command may write over. A command writes its output (a weights
// file, a Hugging Face folder, an HDF5 file, a pack index, a store) only
// where nothing is, or, with --overwrite, over an output of the same kind:
// never over anything else, and never into what a run keeps (a run folder's
// checkpoints and logs, a checkpoint, an instance store), so no command
// deletes what it did not make (docs/formats.md, Outputs).
#pragma once

#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace pbert {

enum class OutputKind {
  kWeightsFile,  // a safetensors file (model init, model convert)
  kHfFolder,     // a Hugging Face model folder (model export-hf)
  kHdf5File,     // an HDF5 file (export)
  kPackIndex,    // a pack index file (pack)
  kStore,        // an instance store folder (prepare)
  kEvaluation,   // the folder of an evaluation of given weights (finetune --evaluate)
};

// Fails, before any work, where writing `path` as an output of `kind` would
// lose something: InvalidArgument (exit 2) naming `what` (the flag or key),
// the path, what is there and what to do, if `path` is or lies inside a
// checkpoint, an instance store, a run folder's checkpoints or one of its
// logs, or is a run folder itself; AlreadyExists if something is at `path`
// and `overwrite` is false; InvalidArgument if it is not an output of
// `kind` (a folder for a file, a file for a folder, a file of another
// format, a folder holding files the command does not write). Then the
// checks of CheckWritable (common/folders.h).
absl::Status CheckOutputTarget(const std::string& path, OutputKind kind, bool overwrite,
                               absl::string_view what);

// What --overwrite replaces for `kind`, for help texts and messages: "a
// safetensors weights file", ...
const char* OutputKindName(OutputKind kind);

// "" if `path` lies in nothing a run keeps; else what it is in, e.g. "the
// checkpoint runs/a/checkpoints/step-00000002".
std::string KeptContainerOf(const std::string& path);

// "" if `path` is none of what a run writes into its folder `run_dir` (its
// logs, config, checkpoints, evaluation files, export, predictions); else
// which, e.g. "the run folder's metrics.jsonl", "in the run folder's
// checkpoints". The pack index a run packs for itself is its input too,
// and none of these.
std::string RunOutputOf(const std::string& path, const std::string& run_dir);

// Fails (InvalidArgument), before a run writes anything, if a name the run
// writes in its folder `run_dir` holds something of another kind (a folder
// where predictions.json or profile.md goes, a file where checkpoints/
// goes), which would fail the write after the steps it was to
// keep, or is a symbolic link (there or among its checkpoints), which the
// run would write through.
absl::Status CheckRunOutputs(const std::string& run_dir);

// "" if every entry of the folder `dir`, at any depth, is one that the
// command that writes such a folder wrote: `ours` holds their paths relative
// to `dir` ("predict/CoLA.tsv"; a folder on the way to one is ours too).
// Else what else it holds, e.g. "a folder holding predict/notes.txt", naming
// up to three such entries: what --overwrite would delete and no command
// wrote.
std::string ForeignEntries(const std::string& dir, const std::set<std::string>& ours);

// "" if the folder `dir` is none of the outputs of OutputKind's folders;
// else what it is, e.g. "an instance store (store.json)".
std::string FolderOutputKind(const std::string& dir);

}  // namespace pbert
