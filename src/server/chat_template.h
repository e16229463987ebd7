#pragma once
// The plain chat fallback: the prompt of a model that ships no chat template (models with one
// run it, server/chat_prompt.h). Documented in server/README.md and named in the start-up log
// and /v1/models:
//   "System: ...\nUser: ...\nAssistant: ...\nTool: ...\nAssistant:" (developer counts as
//   system), with "\nUser:" as a stop string so the model's invented next turn is cut.
#include <string>
#include <vector>

#include "api/openai_request.h"

namespace densa::server {

struct ChatPrompt {
  std::string text;                      // encode with the tokenizer's special tokens (BOS)
  std::vector<std::string> stop;         // text that ends the assistant turn
  std::vector<std::string> stop_pieces;  // control-token pieces that end the turn, if in vocab
};

// Formats `messages` and opens the assistant turn.
ChatPrompt plain_chat_prompt(const std::vector<api::ChatMessage>& messages);

}  // namespace densa::server
