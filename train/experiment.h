// The whole config of an experiment: one section per component, each
// defined by the component that reads it (docs/config.md lists the keys).
// `prepare`, `pack`, `train` and `score` all read this one struct.
#pragma once

#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "common/config_field.h"
#include "common/logging.h"
#include "data/config.h"
#include "data/packing/pack.h"
#include "data/prepare.h"
#include "distributed/config.h"
#include "model/config.h"
#include "optim/config.h"
#include "tasks/config.h"
#include "tasks/tasks.h"
#include "train/config.h"
#include "train/device.h"
#include "train/mllog.h"

namespace pbert::train {

// The run section: where outputs go, the seed of every random choice, and
// how the process runs.
struct RunConfig {
  std::string output_dir = "runs/default";
  int64_t seed = 12345;
  int64_t threads = 0;
  DeviceChoice device = DeviceChoice::kAuto;
  bool cuda_graphs = false;
  logging::Level log_level = logging::Level::kInfo;

  template <class V>
  void Visit(V& v) {
    v.Field("output_dir", &output_dir, "folder for the run's outputs (created if missing)");
    v.Field("seed", &seed, "seed of every random choice of the run",
            config::InRange<int64_t>(0, std::numeric_limits<int64_t>::max()));
    v.Field("threads", &threads,
            "intra-op threads, and prepare's (tokenizing text, importing HDF5); 0 = the CPUs "
            "available to the process, shared among the workers of a distributed run on the node",
            config::InRange<int64_t>(0, 1 << 16));
    v.Field("device", &device,
            "auto: the GPU of the process's local rank where LibTorch has CUDA and one is "
            "visible, else the CPU; cpu; cuda");
    v.Field("cuda_graphs", &cuda_graphs,
            "replay each micro-batch's forward and backward as a CUDA graph captured once per "
            "shape (train/captured_step.h): a GPU, model.static_shapes, attention dense or varlen "
            "through FlashAttention, not fp16; the same results");
    v.Field("log_level", &log_level, "");
  }
  // This section's levers that cannot act in an evaluation (score,
  // finetune --evaluate), each with why.
  static void InactiveInEvaluation(config::InactiveKeys* keys);
};

class Regimen;  // train/regimen.h: how a run is shaped (train's or finetune's)

struct ExperimentConfig {
  RunConfig run;
  data::DataConfig data;
  data::PrepareOptions prepare;
  data::PackingConfig packing;
  model::ModelConfig model;
  optim::OptimConfig optim;
  TrainConfig train;
  MlperfOptions mlperf;
  distributed::DistConfig dist;
  tasks::FinetuneConfig finetune;

  template <class V>
  void Visit(V& v) {
    v.Section("run", &run, "where outputs go, seeds, threads, logging");
    v.Section("data", &data, "input data");
    v.Section("prepare", &prepare, "making an instance store from text or MLPerf HDF5");
    v.Section("packing", &packing, "which sequences share a row");
    v.Section("model", &model, "BERT shape, loss mode and precision");
    v.Section("optim", &optim, "LAMB, learning-rate schedule, clipping, accumulation");
    v.Section("train", &train, "the training loop: batches, evaluation, targets, checkpoints");
    v.Section("mlperf", &mlperf, "what the MLLOG says about the submission");
    v.Section("dist", &dist, "data-parallel training: process group, rendezvous, buckets");
    v.Section("finetune", &finetune,
              "fine-tuning on SQuAD, GLUE, CoNLL NER or multi-label data (`finetune`)");
  }

  // The packing section with the row length and seed of the others.
  data::PackingOptions PackingOptions() const;
  // What a task is made from (tasks::MakeTask): this rank's `share` of the
  // store's shards; `training` false: only what an evaluation reads.
  tasks::TaskSetup ForTask(data::ShardShare share, bool training) const {
    return {data,  prepare, packing, model, finetune, static_cast<uint64_t>(run.seed),
            train.eval_packed, share, training};
  }
  // What `train` checks across sections: an ablation is no BERT, so a
  // closed-division MLPerf run may not train one.
  absl::Status CheckTrainable() const;
  // The keys of `given` (set by the file or --set) whose setting cannot act
  // in this run, each with why: of `regimen`, precision `precision`
  // (resolved), on `device_is_cuda`, `world_size` processes, resumed or
  // not. One line each, for a warning at the start.
  std::vector<std::string> InactiveSettings(const std::set<std::string>& given,
                                            const Regimen& regimen,
                                            model::Precision precision, bool device_is_cuda,
                                            int world_size, bool resumed) const;
  // The training levers among `given` (the captured step, master
  // weights), for the commands that evaluate weights and train nothing
  // (score, finetune --evaluate). One line each. (A training config's
  // optim and dist sections, given to them as they are, pass unnamed.)
  static std::vector<std::string> EvaluationIdleSettings(const std::set<std::string>& given);
};

}  // namespace pbert::train
