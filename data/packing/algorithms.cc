#include "data/packing/algorithms.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pbert::data {
namespace {

template <PackingPlan (*F)(const LengthHistogram&, const PackingOptions&)>
absl::StatusOr<PackingPlan> Infallible(const LengthHistogram& h, const PackingOptions& o) {
  return F(h, o);
}

constexpr PackingAlgorithm kAlgorithms[] = {
    {"none", "one sequence per row (no packing)", Infallible<PackNone>},
    {"greedy", "concatenate in arrival order until the next does not fit", Infallible<PackGreedy>},
    {"ffd", "first-fit decreasing", Infallible<PackFfd>},
    {"spfhp", "shortest-pack-first histogram packing", Infallible<PackSpfhp>},
    {"lpfhp", "longest-pack-first histogram packing", Infallible<PackLpfhp>},
    {"nnlshp", "non-negative least squares over depth <= 3 strategies", PackNnlshp},
    {"lp", "linear program over all strategies, column generation", PackLp},
};

}  // namespace

absl::Span<const PackingAlgorithm> PackingAlgorithms() { return kAlgorithms; }

absl::StatusOr<const PackingAlgorithm*> FindPackingAlgorithm(absl::string_view name) {
  for (const PackingAlgorithm& a : kAlgorithms) {
    if (name == a.name) return &a;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown packing algorithm '", name,
                                                 "'; use one of ",
                                                 absl::StrJoin(PackingAlgorithmNames(), ", ")));
}

std::vector<std::string> PackingAlgorithmNames() {
  std::vector<std::string> names;
  for (const PackingAlgorithm& a : kAlgorithms) names.push_back(a.name);
  return names;
}

}  // namespace pbert::data
