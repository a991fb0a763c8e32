// The names of an enum's values, listed once by the library that owns the
// enum; parsing, printing, config fields and help texts all read that list.
//
//   enum class AttentionKind { kDense, kBlocked };
//   inline constexpr Choice<AttentionKind> kAttentionKinds[] = {
//       {"dense", AttentionKind::kDense}, {"blocked", AttentionKind::kBlocked}};
//   constexpr ChoiceList<AttentionKind> ChoicesOf(AttentionKind) { return kAttentionKinds; }
//
// ChoicesOf is found by argument-dependent lookup, so it is declared in the
// enum's own namespace. Config fields of such an enum (common/config.h)
// then read, check, dump and document themselves.
#pragma once

#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace pbert {

template <class E>
struct Choice {
  absl::string_view name;
  E value;
};

template <class E>
using ChoiceList = absl::Span<const Choice<E>>;

// True for enums whose library lists their names with ChoicesOf.
template <class E, class = void>
struct HasChoices : std::false_type {};
template <class E>
struct HasChoices<E, std::void_t<decltype(ChoicesOf(E{}))>> : std::true_type {};

template <class E>
ChoiceList<E> Choices() {
  return ChoicesOf(E{});
}

template <class E>
std::vector<std::string> ChoiceNames() {
  std::vector<std::string> names;
  for (const Choice<E>& c : Choices<E>()) names.emplace_back(c.name);
  return names;
}

// "a, b or c".
std::string JoinChoices(const std::vector<std::string>& names);

// "a, b or c; did you mean 'b'?" when `given` is close to one of them.
std::string ChoicesHint(const std::vector<std::string>& names, absl::string_view given);

// The name at most two edits from `given` (the nearest), "" if none is.
std::string Closest(const std::vector<std::string>& names, absl::string_view given);

template <class E>
std::string NameOf(E value) {
  for (const Choice<E>& c : Choices<E>()) {
    if (c.value == value) return std::string(c.name);
  }
  return "?";
}

// The value named `name`; the error says what `what` accepts, e.g.
// "model.attention 'dens' is not one of: dense or blocked; did you mean 'dense'?".
template <class E>
absl::StatusOr<E> ParseChoice(absl::string_view name, absl::string_view what) {
  for (const Choice<E>& c : Choices<E>()) {
    if (c.name == name) return c.value;
  }
  return absl::InvalidArgumentError(absl::StrCat(what, " '", name, "' is not one of: ",
                                                 ChoicesHint(ChoiceNames<E>(), name)));
}

// A lever that is on where a GPU runs unless it is set: the config's
// auto, true or false. Where a measurement on a GPU and one on the CPU
// disagree, the default follows each.
enum class Switch { kAuto, kOn, kOff };
inline constexpr Choice<Switch> kSwitches[] = {
    {"auto", Switch::kAuto}, {"true", Switch::kOn}, {"false", Switch::kOff}};
constexpr ChoiceList<Switch> ChoicesOf(Switch) { return kSwitches; }

// Whether `lever` is on for a run on a GPU (`gpu`) or not.
constexpr bool IsOn(Switch lever, bool gpu) {
  return lever == Switch::kOn || (lever == Switch::kAuto && gpu);
}

}  // namespace pbert
