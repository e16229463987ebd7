#pragma once
// `densa gen-model --tokenizer DIR`: a real model's tokenizer and chat template copied into a
// random-weight Hugging Face checkpoint, so servers can be tested end to end on real
// vocabularies. The vocabulary size and the BOS / EOS ids come from the tokenizer files.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/ids.h"
#include "core/status.h"

namespace densa {

struct TokenizerDirInfo {
  int vocab_size = 0;                       // highest id in the vocabulary or added tokens + 1
  std::optional<TokenId> bos_id;            // tokenizer_config.json bos_token, when it has one
  std::optional<TokenId> eos_id;            // eos_token, else generation_config.json's first
  std::vector<std::filesystem::path> files;  // what to copy into the checkpoint
};

// Reads DIR (tokenizer.json or tiktoken.model, with tokenizer_config.json,
// generation_config.json, special_tokens_map.json, chat_template.jinja when present).
Result<TokenizerDirInfo> inspect_tokenizer_dir(const std::filesystem::path& dir);

// Copies info.files into `out`.
Status copy_tokenizer_files(const TokenizerDirInfo& info, const std::filesystem::path& out);

}  // namespace densa
