#include "common/choices.h"

#include <algorithm>

#include "absl/strings/str_join.h"

namespace pbert {

std::string JoinChoices(const std::vector<std::string>& names) {
  if (names.size() < 2) return absl::StrJoin(names, "");
  return absl::StrCat(absl::StrJoin(names.begin(), names.end() - 1, ", "), " or ", names.back());
}

size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string Closest(const std::vector<std::string>& names, absl::string_view given) {
  std::string best;
  size_t best_distance = 3;  // more than two edits away is no typo
  for (const std::string& name : names) {
    const size_t distance = EditDistance(given, name);
    if (distance < best_distance) {
      best = name;
      best_distance = distance;
    }
  }
  return best;
}

std::string ChoicesHint(const std::vector<std::string>& names, absl::string_view given) {
  std::string hint = JoinChoices(names);
  if (std::string closest = Closest(names, given); !closest.empty()) {
    absl::StrAppend(&hint, "; did you mean '", closest, "'?");
  }
  return hint;
}

}  // namespace pbert
