// The config's data section: where the training and eval sequences are,
// the length of a row, and the loader's threads.
#pragma once

#include <cstdint>
#include <string>

#include "common/config_field.h"
#include "data/loader.h"

namespace pbert::data {

struct DataConfig {
  int64_t max_seq_len = 512;
  std::string store;
  std::string pack_index;
  std::string eval;
  std::string histogram;
  LoaderOptions loader;  // threads and prefetch from here

  template <class V>
  void Visit(V& v) {
    v.Field("max_seq_len", &max_seq_len, "tokens per row (S), the length packed rows fill",
            config::InRange<int64_t>(8, 65535));
    v.Field("store", &store, "the instance store folder (prepare writes it, pack and train read it)");
    v.Field("pack_index", &pack_index,
            "the store's pack index (pack writes it); empty: train packs the store itself");
    v.Field("eval", &eval, "the fixed eval set: an instance store or an MLPerf HDF5 file");
    v.Field("histogram", &histogram,
            "a bare length histogram to pack without a store (line i = count of length i)");
    v.Include(&loader);
  }
};

}  // namespace pbert::data
