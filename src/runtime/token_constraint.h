// A per-request constraint on which tokens may come next (structured output: the server
// compiles a JSON schema into one). The scheduler thread calls mask() before every sample
// of the request and accept() with the token sampled; nothing here knows about JSON.
#pragma once
#include <cstdint>
#include <span>

namespace ninfer {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // logits: [vocab]; sets the logit of every token that may not come next to -inf. Returns
  // false when no token may come next (the request then ends with an error).
  virtual bool mask(std::span<float> logits) = 0;
  // The token sampled (one mask() allowed, or an end token).
  virtual void accept(int32_t token) = 0;
  // Nothing but an end can follow: the request finishes ("stop") without sampling again.
  virtual bool done() const = 0;
};

}  // namespace ninfer
