#include "common/checksum.h"

// The state struct is only complete with static-linking declarations.
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

namespace pbert {

struct ChecksumStream::State {
  XXH3_state_t xxh;
};

uint64_t Checksum64(absl::Span<const uint8_t> data) {
  return XXH3_64bits(data.data(), data.size());
}

ChecksumStream::ChecksumStream() : state_(std::make_unique<State>()) {
  XXH3_64bits_reset(&state_->xxh);
}

ChecksumStream::~ChecksumStream() = default;

void ChecksumStream::Update(absl::Span<const uint8_t> data) {
  XXH3_64bits_update(&state_->xxh, data.data(), data.size());
}

uint64_t ChecksumStream::Digest() const { return XXH3_64bits_digest(&state_->xxh); }

}  // namespace pbert
