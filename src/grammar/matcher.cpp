#include "grammar/matcher.h"

#include <cstring>

namespace densa::grammar {

namespace {
// A parse state of more stacks than this (a highly ambiguous grammar) refuses the byte that
// would create it, so one request cannot make masks arbitrarily slow.
constexpr size_t kMaxStacks = 4096;
// Arena size past which the matcher copies out the live stacks.
constexpr size_t kCompactNodes = size_t{1} << 20;
}  // namespace

Matcher::Matcher(std::shared_ptr<const CompiledGrammar> grammar)
    : grammar_(std::move(grammar)), pda_(grammar_->flat()) {
  pda_.start(grammar_->flat().root, kAccept, state_);
  pda_.dedupe(state_, 0);
}

bool Matcher::step_bytes(std::string_view bytes, std::vector<int32_t>& state) {
  scratch_a_.assign(state.begin(), state.end());
  for (char c : bytes) {
    scratch_b_.clear();
    pda_.advance(scratch_a_, 0, scratch_a_.size(), static_cast<uint8_t>(c), scratch_b_);
    if (scratch_b_.empty() || scratch_b_.size() > kMaxStacks) return false;
    scratch_a_.swap(scratch_b_);
  }
  state.assign(scratch_a_.begin(), scratch_a_.end());
  return true;
}

bool Matcher::accept_bytes(std::string_view bytes) {
  if (eos_accepted_) return false;
  const size_t mark = pda_.mark();
  if (!step_bytes(bytes, state_)) {
    pda_.truncate(mark);
    return false;
  }
  if (pda_.mark() > kCompactNodes) pda_.compact(state_);
  return true;
}

bool Matcher::accept_token(int32_t id) {
  const Vocabulary& v = grammar_->vocab();
  if (eos_accepted_ || id < 0 || id >= static_cast<int32_t>(v.size())) return false;
  if (v.is_eos(id)) {
    if (!can_end()) return false;
    eos_accepted_ = true;
    return true;
  }
  if (v.is_special(id) || v.token_bytes(id).empty()) return false;
  return accept_bytes(v.token_bytes(id));
}

bool Matcher::can_end() const {
  if (eos_accepted_) return true;
  for (int32_t s : state_)
    if (s == kAccept) return true;
  return false;
}

bool Matcher::is_terminated() const {
  return eos_accepted_ || (state_.size() == 1 && state_[0] == kAccept);
}

bool Matcher::token_fits(const std::string& bytes) {
  const size_t mark = pda_.mark();
  std::vector<int32_t>& a = scratch_a_;
  std::vector<int32_t>& b = scratch_b_;
  a.assign(state_.begin(), state_.end());
  bool ok = true;
  for (char c : bytes) {
    b.clear();
    pda_.advance(a, 0, a.size(), static_cast<uint8_t>(c), b);
    if (b.empty()) {
      ok = false;
      break;
    }
    a.swap(b);
  }
  pda_.truncate(mark);
  return ok;
}

void Matcher::fill_mask(uint64_t* words, size_t n_words) {
  const Vocabulary& v = grammar_->vocab();
  CHECK(n_words >= v.mask_words()) << "mask of " << n_words << " words for a vocabulary of "
                                    << v.size();
  std::memset(words, 0, n_words * sizeof(uint64_t));
  if (eos_accepted_) return;
  positions_.clear();
  bool complete = false;
  for (int32_t s : state_) {
    if (s == kAccept) complete = true;
    else positions_.push_back(pda_.pos(s));
  }
  std::sort(positions_.begin(), positions_.end());
  positions_.erase(std::unique(positions_.begin(), positions_.end()), positions_.end());
  const size_t vw = v.mask_words();
  for (int32_t p : positions_) {
    const auto& m = grammar_->masks(p);
    if (!m.accepted_bits.empty()) {
      for (size_t i = 0; i < vw; ++i) words[i] |= m.accepted_bits[i];
    } else {
      for (int32_t id : m.accepted_ids) words[id >> 6] |= uint64_t{1} << (id & 63);
    }
  }
  for (int32_t p : positions_) {
    for (int32_t id : grammar_->masks(p).uncertain) {
      uint64_t& w = words[id >> 6];
      const uint64_t bit = uint64_t{1} << (id & 63);
      if (!(w & bit) && token_fits(v.token_bytes(id))) w |= bit;
    }
  }
  if (complete)
    for (int32_t id : v.eos_ids()) words[id >> 6] |= uint64_t{1} << (id & 63);
}

}  // namespace densa::grammar
