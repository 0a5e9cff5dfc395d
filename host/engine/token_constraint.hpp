// A per-sequence constraint on the tokens a sequence may generate next (a grammar
// compiled from a JSON schema, a forced tool call): the scheduler asks it for the
// allowed tokens before each sampled row and advances it over each emitted token.
// The mask depends only on the sequence's own tokens, so constrained sequences stay
// batch invariant, and a verify step's row t is masked with the state after the
// drafts before it, so speculation stays token-identical.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace memra::engine {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // The tokens allowed next: bit id%64 of word id/64 over the vocabulary (the model's
  // end-of-text ids only once the constraint is complete). Valid until advance().
  virtual const std::vector<uint64_t>& allowed() = 0;
  // Moves past `token`; false when allowed() does not permit it (nothing changes then).
  virtual bool advance(int32_t token) = 0;
  // An independent copy of the current state (verify rows probe drafts on a copy).
  virtual std::unique_ptr<TokenConstraint> clone() const = 0;
};

// Makes one fresh constraint per sequence (a request's n choices each get their own).
using TokenConstraintFactory = std::function<std::unique_ptr<TokenConstraint>()>;

}  // namespace memra::engine
