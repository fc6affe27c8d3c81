#include <xxhash.h>

#include "jit/embedded_templates.hpp"

namespace tessera {

Hash128 embedded_templates_hash() {
  static const Hash128 hash = [] {
    XXH3_state_t* state = XXH3_createState();
    XXH3_128bits_reset(state);
    for (const auto& file : embedded_templates()) {
      XXH3_128bits_update(state, file.path.data(), file.path.size());
      XXH3_128bits_update(state, "\0", 1);
      XXH3_128bits_update(state, file.text.data(), file.text.size());
    }
    const XXH128_hash_t h = XXH3_128bits_digest(state);
    XXH3_freeState(state);
    return Hash128{h.high64, h.low64};
  }();
  return hash;
}

}  // namespace tessera
