// The experiment config of `packed-bert`: one typed struct per YAML section.
// Sections and keys are documented in docs/config.md.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "app/cli.h"
#include "common/config.h"
#include "common/logging.h"
#include "data/packing/algorithms.h"
#include "data/prepare.h"
#include "distributed/environment.h"
#include "model/losses.h"
#include "model/precision.h"
#include "optim/packing_adjustment.h"
#include "optim/schedule.h"

namespace pbert::app {

// "a, b or c" for a help text.
inline std::string Choices(const std::vector<std::string>& names) {
  if (names.size() < 2) return absl::StrJoin(names, "");
  return absl::StrCat(absl::StrJoin(names.begin(), names.end() - 1, ", "), " or ", names.back());
}

struct RunConfig {
  std::string output_dir = "runs/default";
  int64_t seed = 12345;
  int64_t threads = 0;
  std::string log_level = "info";

  template <class V>
  void Visit(V& v) {
    v.Field("output_dir", &output_dir, "folder for the run's outputs (created if missing)");
    v.Field("seed", &seed, "seed of every random choice of the run", config::AtLeast<int64_t>(0));
    v.Field("threads", &threads,
            "intra-op threads; 0 = the CPUs available to the process, shared among the workers "
            "of a distributed run on the node",
            config::AtLeast<int64_t>(0));
    v.Field("log_level", &log_level, Choices(logging::LevelNames()),
            config::OneOf(logging::LevelNames()));
  }
  absl::Status Validate() const { return absl::OkStatus(); }
};

struct DataConfig {
  int64_t max_seq_len = 512;
  std::string store;
  std::string pack_index;
  std::string eval;
  std::string histogram;
  int64_t loader_threads = 1;
  int64_t prefetch_steps = 4;

  template <class V>
  void Visit(V& v) {
    v.Field("max_seq_len", &max_seq_len, "tokens per row (S), the length packs fill",
            config::InRange<int64_t>(8, 65535));
    v.Field("store", &store, "the instance store folder (prepare writes it, pack and train read it)");
    v.Field("pack_index", &pack_index,
            "the store's pack index (pack writes it); empty: train packs the store itself");
    v.Field("eval", &eval, "the fixed eval set: an instance store or an MLPerf HDF5 file");
    v.Field("histogram", &histogram,
            "a bare length histogram to pack without a store (line i = count of length i)");
    v.Field("loader_threads", &loader_threads, "background threads building batches",
            config::InRange<int64_t>(1, 64));
    v.Field("prefetch_steps", &prefetch_steps, "optimizer steps of batches built ahead",
            config::InRange<int64_t>(1, 1024));
  }
  absl::Status Validate() const { return absl::OkStatus(); }
};

struct PrepareConfig {
  std::vector<std::string> inputs;
  std::string input_format = "auto";
  std::string vocab;
  bool lower_case = true;
  int64_t max_chars_per_word = data::Tokenizer::kDefaultMaxCharsPerWord;
  int64_t dupe_factor = 10;
  double short_seq_prob = 0.1;
  double masked_lm_prob = 0.15;
  int64_t max_predictions_per_seq = 20;
  bool whole_word_mask = false;
  int64_t records_per_shard = 1 << 18;
  int64_t pick = 0;

  template <class V>
  void Visit(V& v) {
    v.Field("inputs", &inputs, "input files: WikiExtractor output, plain text or MLPerf/NVIDIA HDF5");
    v.Field("input_format", &input_format, Choices(data::InputFormatNames()),
            config::OneOf(data::InputFormatNames()));
    v.Field("vocab", &vocab, "BERT vocab.txt");
    v.Field("lower_case", &lower_case, "lower-case and strip accents (uncased vocabularies)");
    v.Field("max_chars_per_word", &max_chars_per_word,
            "longer words become [UNK] (200 as Google's tokenization.py; Hugging Face: 100)",
            config::InRange<int64_t>(1, 1 << 20));
    v.Field("dupe_factor", &dupe_factor, "passes over the documents with different masks",
            config::AtLeast<int64_t>(1));
    v.Field("short_seq_prob", &short_seq_prob, "share of instances with a shorter target",
            config::InRange(0.0, 1.0));
    v.Field("masked_lm_prob", &masked_lm_prob, "share of tokens to mask",
            config::InRange(0.0, 1.0));
    v.Field("max_predictions_per_seq", &max_predictions_per_seq, "most masked tokens per sequence",
            config::InRange<int64_t>(1, 65535));
    v.Field("whole_word_mask", &whole_word_mask, "mask all pieces of a word together");
    v.Field("records_per_shard", &records_per_shard, "instances per store shard file",
            config::AtLeast<int64_t>(1));
    v.Field("pick", &pick,
            "keep this many sequences, evenly spaced as MLPerf's pick_eval_samples.py picks the "
            "eval set (10000); 0 keeps all",
            config::AtLeast<int64_t>(0));
  }
  absl::Status Validate() const { return absl::OkStatus(); }
};

struct PackingConfig {
  std::string algorithm = "lp";
  int64_t max_depth = 8;

  template <class V>
  void Visit(V& v) {
    v.Field("algorithm", &algorithm, Choices(data::PackingAlgorithmNames()),
            config::OneOf(data::PackingAlgorithmNames()));
    v.Field("max_depth", &max_depth, "most sequences in one pack (D)",
            config::InRange<int64_t>(1, 64));
  }
  absl::Status Validate() const { return absl::OkStatus(); }
};

struct ModelConfig {
  int64_t vocab_size = 30522;
  int64_t hidden_size = 768;
  int64_t num_layers = 12;
  int64_t num_heads = 12;
  int64_t intermediate_size = 3072;
  int64_t max_position_embeddings = 512;
  int64_t type_vocab_size = 2;
  double hidden_dropout = 0.1;
  double attention_dropout = 0.1;
  double initializer_range = 0.02;
  std::string mlm_loss = "per_token";
  std::string precision = "fp32";
  std::string attention = "blocked";
  std::string ablation = "none";

  template <class V>
  void Visit(V& v) {
    v.Field("vocab_size", &vocab_size, "tokens in the vocabulary", config::AtLeast<int64_t>(8));
    v.Field("hidden_size", &hidden_size, "width of token representations",
            config::AtLeast<int64_t>(2));
    v.Field("num_layers", &num_layers, "transformer layers", config::AtLeast<int64_t>(1));
    v.Field("num_heads", &num_heads, "attention heads; must divide hidden_size",
            config::AtLeast<int64_t>(1));
    v.Field("intermediate_size", &intermediate_size, "feed-forward width",
            config::AtLeast<int64_t>(1));
    v.Field("max_position_embeddings", &max_position_embeddings,
            "position embedding rows: the longest sequence", config::AtLeast<int64_t>(8));
    v.Field("type_vocab_size", &type_vocab_size, "segment types", config::AtLeast<int64_t>(1));
    v.Field("hidden_dropout", &hidden_dropout, "dropout after embeddings and sublayers",
            config::InRange(0.0, 0.99));
    v.Field("attention_dropout", &attention_dropout, "dropout on attention probabilities",
            config::InRange(0.0, 0.99));
    v.Field("initializer_range", &initializer_range, "std of the normal initialisation",
            config::AtLeast(0.0));
    v.Field("mlm_loss", &mlm_loss,
            "per_token (canonical BERT) or per_sequence (mean over sequences, paper 3.2.3)",
            config::OneOf(model::MlmLossModeNames()));
    v.Field("attention", &attention,
            absl::StrCat(Choices(model::AttentionKindNames()),
                         " (dense: block-diagonal mask; blocked: each sequence within its own "
                         "block; the same results)"),
            config::OneOf(model::AttentionKindNames()));
    v.Field("ablation", &ablation,
            absl::StrCat(Choices(model::AblationNames()),
                         ": leave out one of packing's model changes (experiments only; not "
                         "BERT, so refused with mlperf.division closed)"),
            config::OneOf(model::AblationNames()));
    v.Field("precision", &precision,
            absl::StrCat(Choices(model::PrecisionNames()),
                         " (autocast; fp16 on CUDA only; auto: bf16 where the CPU computes "
                         "bf16 in hardware, else fp32)"),
            config::OneOf(model::PrecisionNames()));
  }
  absl::Status Validate() const {
    if (hidden_size % num_heads != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("hidden_size ", hidden_size, " is not a multiple of num_heads ", num_heads));
    }
    // Weights, gradients and LAMB's two moments: 16 bytes per parameter.
    const double bytes = 16.0 * Parameters();
    const double memory = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
    if (bytes > memory) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "this model has %.3g parameters and needs %.1f GB for its weights, gradients and "
          "optimizer state alone; this machine has %.1f GB: make it smaller",
          Parameters(), bytes / 1e9, memory / 1e9));
    }
    return absl::OkStatus();
  }
  // The parameter count of BertForPreTraining of this shape.
  double Parameters() const {
    const double V = vocab_size, H = hidden_size, F = intermediate_size;
    const double layer = 4 * (H * H + H) + 2 * H + (H * F + F) + (F * H + H) + 2 * H;
    return V * H + (max_position_embeddings + type_vocab_size) * H + 2 * H + num_layers * layer +
           (H * H + H) + (H * H + H + 2 * H) + V + (2 * H + 2);
  }
};

struct OptimConfig {
  double lr = 4e-4;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-6;
  double weight_decay = 0.01;
  bool bias_correction = true;
  bool exclude_from_trust_ratio = true;
  double max_grad_norm = 1.0;
  std::string schedule = "poly";
  int64_t warmup_steps = 0;
  int64_t start_warmup_step = 0;
  int64_t total_steps = 1000;
  double power = 1.0;
  double end_lr = 0.0;
  int64_t accumulation_steps = 1;
  std::string packing_adjustment = "betas";

  template <class V>
  void Visit(V& v) {
    v.Field("lr", &lr, "peak learning rate", config::AtLeast(0.0));
    v.Field("beta1", &beta1, "LAMB first-moment decay (before packing adjustment)",
            config::InRange(0.0, 0.999999));
    v.Field("beta2", &beta2, "LAMB second-moment decay (before packing adjustment)",
            config::InRange(0.0, 0.999999));
    v.Field("eps", &eps, "added to sqrt(v)", config::AtLeast(0.0));
    v.Field("weight_decay", &weight_decay, "decoupled weight decay (not on bias, LayerNorm)",
            config::AtLeast(0.0));
    v.Field("bias_correction", &bias_correction, "divide moments by 1 - beta^t");
    v.Field("exclude_from_trust_ratio", &exclude_from_trust_ratio,
            "bias and LayerNorm also skip the trust ratio");
    v.Field("max_grad_norm", &max_grad_norm, "global gradient clipping; 0 = none",
            config::AtLeast(0.0));
    v.Field("schedule", &schedule,
            absl::StrCat(Choices(optim::ScheduleNames()), " (poly: warmup + polynomial decay)"),
            config::OneOf(optim::ScheduleNames()));
    v.Field("warmup_steps", &warmup_steps, "linear warmup length in optimizer steps",
            config::AtLeast<int64_t>(0));
    v.Field("start_warmup_step", &start_warmup_step, "offset of the warmup ramp (MLPerf)");
    v.Field("total_steps", &total_steps, "optimizer steps; the decay ends here",
            config::AtLeast<int64_t>(1));
    v.Field("power", &power, "polynomial decay power", config::AtLeast(1e-9));
    v.Field("end_lr", &end_lr, "learning rate at total_steps", config::AtLeast(0.0));
    v.Field("accumulation_steps", &accumulation_steps, "micro-batches per optimizer step",
            config::AtLeast<int64_t>(1));
    v.Field("packing_adjustment", &packing_adjustment,
            absl::StrCat(Choices(optim::PackingAdjustmentNames()),
                         " (betas: beta^p; batch: accumulation / p; p = packing factor)"),
            config::OneOf(optim::PackingAdjustmentNames()));
  }
  absl::Status Validate() const {
    if (warmup_steps > total_steps) {
      return absl::InvalidArgumentError("warmup_steps must not exceed total_steps");
    }
    return absl::OkStatus();
  }
};

struct TrainConfig {
  int64_t micro_batch_rows = 32;
  int64_t eval_every_samples = 0;
  bool eval_packed = true;
  double target_mlm_accuracy = 0.720;
  int64_t max_samples = 0;
  int64_t checkpoint_every_steps = 1000;
  int64_t keep_checkpoints = 3;
  int64_t log_every_steps = 10;
  int64_t max_bad_steps = 10;
  std::string init_checkpoint;

  template <class V>
  void Visit(V& v) {
    v.Field("micro_batch_rows", &micro_batch_rows,
            "rows of data.max_seq_len tokens per micro-batch and rank",
            config::InRange<int64_t>(1, 1 << 20));
    v.Field("eval_every_samples", &eval_every_samples,
            "sequences between evaluations; 0: MLPerf's floor(0.05*(230.23*GBS+3e6)/25000)*25000",
            config::AtLeast<int64_t>(0));
    v.Field("eval_packed", &eval_packed,
            "pack the eval set with packing.algorithm (same numbers, fewer rows)");
    v.Field("target_mlm_accuracy", &target_mlm_accuracy,
            "stop with success when an evaluation's MLM accuracy reaches this",
            config::InRange(0.0, 1.0));
    v.Field("max_samples", &max_samples, "stop (aborted) after this many sequences; 0: no cap",
            config::AtLeast<int64_t>(0));
    v.Field("checkpoint_every_steps", &checkpoint_every_steps,
            "steps between checkpoints; 0: only at the end and on SIGINT/SIGTERM",
            config::AtLeast<int64_t>(0));
    v.Field("keep_checkpoints", &keep_checkpoints, "newest checkpoints kept; 0: all",
            config::AtLeast<int64_t>(0));
    v.Field("log_every_steps", &log_every_steps, "steps per metrics.jsonl line",
            config::AtLeast<int64_t>(1));
    v.Field("max_bad_steps", &max_bad_steps,
            "steps in a row with a non-finite loss or gradient before the run stops",
            config::AtLeast<int64_t>(1));
    v.Field("init_checkpoint", &init_checkpoint,
            "weights to start from (safetensors, e.g. phase 1 for phase 2); empty: random");
  }
  absl::Status Validate() const { return absl::OkStatus(); }
};

struct MlperfConfig {
  std::string org = "packed-bert";
  std::string platform = "cpu";
  std::string division = "closed";
  std::string status = "research";

  template <class V>
  void Visit(V& v) {
    v.Field("org", &org, "submission_org in the MLLOG");
    v.Field("platform", &platform, "submission_platform in the MLLOG");
    v.Field("division", &division, "closed or open", config::OneOf({"closed", "open"}));
    v.Field("status", &status, "submission_status: onprem, cloud, preview or research",
            config::OneOf({"onprem", "cloud", "preview", "research"}));
  }
  absl::Status Validate() const { return absl::OkStatus(); }
};

struct DistConfig {
  std::string backend = "auto";
  int64_t timeout_s = 300;
  int64_t bucket_mb = 25;
  std::string master_addr;
  int64_t master_port = 29500;

  template <class V>
  void Visit(V& v) {
    v.Field("backend", &backend,
            absl::StrCat(Choices(distributed::BackendNames()),
                         ": the c10d process group (auto: nccl for a model on CUDA, else gloo)"),
            config::OneOf(distributed::BackendNames()));
    v.Field("timeout_s", &timeout_s,
            "seconds a rank waits for the others (rendezvous, every collective) before it gives "
            "up with an error naming them",
            config::InRange<int64_t>(1, 86400));
    v.Field("bucket_mb", &bucket_mb, "gradient all-reduce bucket size, MiB",
            config::InRange<int64_t>(1, 4096));
    v.Field("master_addr", &master_addr,
            "rendezvous host when the launcher does not set MASTER_ADDR (Slurm: the first host "
            "of the job; otherwise 127.0.0.1)");
    v.Field("master_port", &master_port, "rendezvous port when MASTER_PORT is not set",
            config::InRange<int64_t>(1, 65535));
  }
  absl::Status Validate() const { return absl::OkStatus(); }
};

struct ExperimentConfig {
  RunConfig run;
  DataConfig data;
  PrepareConfig prepare;
  PackingConfig packing;
  ModelConfig model;
  OptimConfig optim;
  TrainConfig train;
  MlperfConfig mlperf;
  DistConfig dist;

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
  }
};

// A command's own flag that sets a config key, e.g. {"max-len",
// "data.max_seq_len"}; it takes priority over --set.
struct FlagKey {
  std::string flag;
  std::string key;
};

// Loads --config and --set (plus --threads, --log-level and `shorthands`),
// then sets up logging and the intra-op thread count from the result.
absl::StatusOr<ExperimentConfig> LoadConfig(const Args& args,
                                            const std::vector<FlagKey>& shorthands = {});

// Creates run.output_dir (and its parents) if missing.
absl::Status CreateOutputDir(const ExperimentConfig& config);

// Where this process stands in a distributed run: the launcher's variables
// (distributed/environment.h), with the dist section's defaults.
absl::StatusOr<distributed::Environment> DistributedEnvironment(const ExperimentConfig& config);

// Writes the effective config to `<run.output_dir>/config.yaml`.
// `effective`: values derived from the config for this run (e.g. the
// packing-adjusted optimizer), appended as a comment so that loading the file
// again does not apply them twice.
absl::Status WriteEffectiveConfig(const ExperimentConfig& config,
                                  const std::string& effective = "");

}  // namespace pbert::app
