#include "text/sentencepiece_model.h"

#include <cstring>
#include <string>

namespace densa {
namespace {

// Protobuf wire types (https://protobuf.dev/programming-guides/encoding/).
enum class WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// One decoded field: its number, wire type and value (which member is set follows the wire type).
struct ProtoField {
  uint32_t number = 0;
  WireType wire = WireType::kVarint;
  uint64_t varint = 0;              // kVarint
  uint32_t fixed32 = 0;             // kFixed32
  std::span<const uint8_t> bytes;   // kLengthDelimited
};

// Walks the fields of one message. Every read is bounds-checked against the message span.
class ProtoReader {
 public:
  explicit ProtoReader(std::span<const uint8_t> data) : data_(data) {}

  bool done() const { return pos_ >= data_.size(); }

  Status next(ProtoField& field) {
    uint64_t tag = 0;
    DENSA_RETURN_IF_ERROR(read_varint(tag));
    field.number = static_cast<uint32_t>(tag >> 3);
    if (field.number == 0 || (tag >> 3) > 0x1FFFFFFF) return data_loss("protobuf: bad field number");
    switch (tag & 7) {
      case 0:
        field.wire = WireType::kVarint;
        return read_varint(field.varint);
      case 1:
        field.wire = WireType::kFixed64;
        return skip(8);
      case 2: {
        field.wire = WireType::kLengthDelimited;
        uint64_t size = 0;
        DENSA_RETURN_IF_ERROR(read_varint(size));
        if (size > data_.size() - pos_) return data_loss("protobuf: length past end of message");
        field.bytes = data_.subspan(pos_, size);
        pos_ += size;
        return Status::ok();
      }
      case 5: {
        field.wire = WireType::kFixed32;
        if (data_.size() - pos_ < 4) return data_loss("protobuf: truncated fixed32");
        uint32_t v = 0;
        for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(data_[pos_ + i]) << (8 * i);
        field.fixed32 = v;
        pos_ += 4;
        return Status::ok();
      }
      default:
        return data_loss("protobuf: unsupported wire type " + std::to_string(tag & 7));
    }
  }

 private:
  Status read_varint(uint64_t& out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (pos_ >= data_.size()) return data_loss("protobuf: truncated varint");
      const uint8_t b = data_[pos_++];
      v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) {
        out = v;
        return Status::ok();
      }
    }
    return data_loss("protobuf: varint longer than 10 bytes");
  }

  Status skip(size_t n) {
    if (data_.size() - pos_ < n) return data_loss("protobuf: truncated field");
    pos_ += n;
    return Status::ok();
  }

  std::span<const uint8_t> data_;
  size_t pos_ = 0;
};

Status expect_wire(const ProtoField& f, WireType wire, const char* what) {
  if (f.wire != wire) return data_loss(std::string("protobuf: wrong wire type for ") + what);
  return Status::ok();
}

std::string as_string(std::span<const uint8_t> b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

float as_float(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// SentencePiece message: piece = 1 (string), score = 2 (float), type = 3 (enum, default NORMAL).
Status parse_piece(std::span<const uint8_t> bytes, TokenizerVocab& vocab) {
  std::string piece;
  float score = 0.0f;
  uint64_t type = static_cast<uint64_t>(TokenType::kNormal);
  ProtoReader reader(bytes);
  ProtoField f;
  while (!reader.done()) {
    DENSA_RETURN_IF_ERROR(reader.next(f));
    if (f.number == 1) {
      DENSA_RETURN_IF_ERROR(expect_wire(f, WireType::kLengthDelimited, "piece"));
      piece = as_string(f.bytes);
    } else if (f.number == 2) {
      DENSA_RETURN_IF_ERROR(expect_wire(f, WireType::kFixed32, "score"));
      score = as_float(f.fixed32);
    } else if (f.number == 3) {
      DENSA_RETURN_IF_ERROR(expect_wire(f, WireType::kVarint, "type"));
      type = f.varint;
    }
  }
  if (type < 1 || type > 6) return data_loss("tokenizer.model: piece type " + std::to_string(type) + " out of range");
  vocab.pieces.push_back(std::move(piece));
  vocab.scores.push_back(score);
  vocab.types.push_back(static_cast<TokenType>(type));
  return Status::ok();
}

// TrainerSpec fields used: model_type = 3, byte_fallback = 35, unk_id = 40, bos_id = 41, eos_id = 42.
struct TrainerFields {
  uint64_t model_type = 1;  // UNIGRAM, the proto default
  bool byte_fallback = false;
  int64_t unk_id = 0, bos_id = 1, eos_id = 2;
};

Status parse_trainer(std::span<const uint8_t> bytes, TrainerFields& t) {
  ProtoReader reader(bytes);
  ProtoField f;
  while (!reader.done()) {
    DENSA_RETURN_IF_ERROR(reader.next(f));
    if (f.number != 3 && f.number != 35 && (f.number < 40 || f.number > 42)) continue;
    DENSA_RETURN_IF_ERROR(expect_wire(f, WireType::kVarint, "trainer_spec field"));
    // int32 fields are sign-extended to 64 bits on the wire.
    const int64_t as_int = static_cast<int64_t>(static_cast<int32_t>(static_cast<uint32_t>(f.varint)));
    switch (f.number) {
      case 3: t.model_type = f.varint; break;
      case 35: t.byte_fallback = f.varint != 0; break;
      case 40: t.unk_id = as_int; break;
      case 41: t.bos_id = as_int; break;
      case 42: t.eos_id = as_int; break;
    }
  }
  return Status::ok();
}

// NormalizerSpec fields used: name = 1, precompiled_charsmap = 2, add_dummy_prefix = 3,
// remove_extra_whitespaces = 4, escape_whitespaces = 5 (proto defaults: true, true, true).
struct NormalizerFields {
  std::string name;
  size_t charsmap_bytes = 0;
  bool add_dummy_prefix = true, remove_extra_whitespaces = true, escape_whitespaces = true;
};

Status parse_normalizer(std::span<const uint8_t> bytes, NormalizerFields& n) {
  ProtoReader reader(bytes);
  ProtoField f;
  while (!reader.done()) {
    DENSA_RETURN_IF_ERROR(reader.next(f));
    if (f.number == 1 || f.number == 2) {
      DENSA_RETURN_IF_ERROR(expect_wire(f, WireType::kLengthDelimited, "normalizer_spec string"));
      if (f.number == 1) n.name = as_string(f.bytes);
      if (f.number == 2) n.charsmap_bytes = f.bytes.size();
    } else if (f.number >= 3 && f.number <= 5) {
      DENSA_RETURN_IF_ERROR(expect_wire(f, WireType::kVarint, "normalizer_spec flag"));
      const bool v = f.varint != 0;
      if (f.number == 3) n.add_dummy_prefix = v;
      if (f.number == 4) n.remove_extra_whitespaces = v;
      if (f.number == 5) n.escape_whitespaces = v;
    }
  }
  return Status::ok();
}

Result<TokenId> checked_id(int64_t id, size_t vocab_size, const char* what) {
  if (id < 0 || static_cast<uint64_t>(id) >= vocab_size) {
    return unimplemented(std::string("tokenizer.model: ") + what + " id " + std::to_string(id) +
                         " is not a vocabulary entry");
  }
  return static_cast<TokenId>(id);
}

}  // namespace

Result<SentencePieceModel> parse_sentencepiece_model(std::span<const uint8_t> bytes) {
  SentencePieceModel model;
  TrainerFields trainer;
  NormalizerFields normalizer;
  bool has_trainer = false;
  ProtoReader reader(bytes);
  ProtoField f;
  while (!reader.done()) {
    DENSA_RETURN_IF_ERROR(reader.next(f));
    if (f.number < 1 || f.number > 3) continue;
    DENSA_RETURN_IF_ERROR(expect_wire(f, WireType::kLengthDelimited, "ModelProto field"));
    if (f.number == 1) DENSA_RETURN_IF_ERROR(parse_piece(f.bytes, model.vocab));
    if (f.number == 2) {
      has_trainer = true;
      DENSA_RETURN_IF_ERROR(parse_trainer(f.bytes, trainer));
    }
    if (f.number == 3) DENSA_RETURN_IF_ERROR(parse_normalizer(f.bytes, normalizer));
  }
  if (model.vocab.pieces.empty()) return data_loss("tokenizer.model: no pieces");
  if (model.vocab.pieces.size() > (1u << 30)) return data_loss("tokenizer.model: too many pieces");
  if (!has_trainer) return unimplemented("tokenizer.model: no trainer_spec, model type unknown");
  if (trainer.model_type != 2) {
    return unimplemented("tokenizer.model: model_type " + std::to_string(trainer.model_type) +
                         " not supported (BPE = 2 only)");
  }
  if (normalizer.charsmap_bytes != 0 || normalizer.remove_extra_whitespaces || !normalizer.escape_whitespaces) {
    return unimplemented("tokenizer.model: normalizer '" + normalizer.name +
                         "' not supported (identity, whitespace kept and escaped only)");
  }
  const size_t n = model.vocab.pieces.size();
  DENSA_ASSIGN_OR_RETURN(model.vocab.unk_id, checked_id(trainer.unk_id, n, "unk"));
  DENSA_ASSIGN_OR_RETURN(model.vocab.bos_id, checked_id(trainer.bos_id, n, "bos"));
  DENSA_ASSIGN_OR_RETURN(model.vocab.eos_id, checked_id(trainer.eos_id, n, "eos"));
  model.vocab.add_bos = true;  // Llama convention; the .model does not say.
  model.vocab.add_dummy_prefix = normalizer.add_dummy_prefix;
  model.spec.byte_fallback = trainer.byte_fallback;
  return model;
}

}  // namespace densa
