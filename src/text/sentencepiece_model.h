#pragma once
// Reads a SentencePiece ModelProto (tokenizer.model) into a TokenizerVocab with a small
// hand-written protobuf wire-format reader (no libprotobuf). Only the fields densa needs are
// read (pieces, trainer_spec ids/model_type/byte_fallback, normalizer_spec); unknown fields are
// skipped. Malformed or truncated input gives a kDataLoss Status, never a crash; valid models
// densa cannot run (unigram, NFKC normalisation) give kUnimplemented.
#include <cstdint>
#include <span>

#include "core/status.h"
#include "text/tokenizer.h"

namespace densa {

// What the .model says beyond the vocabulary, for validation against the pieces.
struct SentencePieceSpec {
  bool byte_fallback = false;  // trainer_spec.byte_fallback
};

struct SentencePieceModel {
  TokenizerVocab vocab;
  SentencePieceSpec spec;
};

Result<SentencePieceModel> parse_sentencepiece_model(std::span<const uint8_t> bytes);

}  // namespace densa
