#include "router/request_cost.h"

#include <gtest/gtest.h>

namespace densa::router {
namespace {

using api::ApiKind;

TEST(RouterRequestCost, CompletionTextPromptAndMaxTokens) {
  // 11 bytes -> 3 tokens, + BOS.
  const RequestCost c = estimate_request_cost(api::ApiKind::kCompletion, R"({"prompt": "hello world", "max_tokens": 40})");
  EXPECT_EQ(c.prompt_tokens, 4);
  EXPECT_EQ(c.max_new_tokens, 40);
  EXPECT_EQ(c.prefill_tokens(), 4);
  EXPECT_EQ(c.decode_tokens(), 44);
  EXPECT_FALSE(c.stream);
}

TEST(RouterRequestCost, TokenIdsListsOfPromptsAndN) {
  RequestCost c = estimate_request_cost(api::ApiKind::kCompletion, R"({"prompt": [1, 2, 3, 4, 5], "stream": true})");
  EXPECT_EQ(c.prompt_tokens, 5);
  EXPECT_EQ(c.max_new_tokens, kDefaultCompletionMaxTokens);
  EXPECT_TRUE(c.stream);
  c = estimate_request_cost(api::ApiKind::kCompletion, R"({"prompt": ["abcd", [7, 8]], "max_tokens": 10, "n": 3})");
  EXPECT_EQ(c.prompt_tokens, 2 + 2);
  EXPECT_EQ(c.max_new_tokens, 10 * 3 * 2);
}

TEST(RouterRequestCost, ChatMessagesWithTextParts) {
  const RequestCost c = estimate_request_cost(
      api::ApiKind::kChat,
      R"({"messages": [{"role": "system", "content": "12345678"},
                       {"role": "user", "content": [{"type": "text", "text": "abcd"}, {"type": "image_url"}]}],
          "max_completion_tokens": 7})");
  EXPECT_EQ(c.prompt_tokens, 2 + 1 + 2 * 4);
  EXPECT_EQ(c.max_new_tokens, 7);
  EXPECT_EQ(estimate_request_cost(api::ApiKind::kChat, R"({"messages": []})").max_new_tokens, kDefaultChatMaxTokensGuess);
}

TEST(RouterRequestCost, AnyBodyGetsACost) {
  for (const char* body : {"", "not json", "[1,2]", "{\"prompt\": {}}", "{\"max_tokens\": -5, \"n\": \"x\"}",
                           "{\"max_tokens\": 1e300}", "{\"messages\": [1, null, {\"content\": 5}]}"}) {
    const RequestCost c = estimate_request_cost(api::ApiKind::kCompletion, body);
    EXPECT_GE(c.prompt_tokens, 0) << body;
    EXPECT_EQ(c.max_new_tokens, kDefaultCompletionMaxTokens) << body;
  }
  const RequestCost huge = estimate_request_cost(api::ApiKind::kCompletion, R"({"max_tokens": 9223372036854775807, "n": 16})");
  EXPECT_EQ(huge.max_new_tokens, (int64_t{1} << 30) * 16);
}

TEST(RouterRequestCost, DeeplyNestedBodiesAreNotParsed) {
  // A megabyte of "[" would keep a JSON parser busy for seconds; its cost is a byte count.
  const std::string deep(1 << 20, '[');
  const RequestCost c = estimate_request_cost(api::ApiKind::kCompletion, deep);
  EXPECT_EQ(c.prompt_tokens, (1 << 20) / kBytesPerTokenGuess);
  EXPECT_EQ(c.max_new_tokens, kDefaultCompletionMaxTokens);
  // Brackets inside strings do not count as nesting.
  const std::string text = "{\"prompt\": \"" + std::string(64, '[') + "\\\"]\", \"max_tokens\": 3}";
  const RequestCost t = estimate_request_cost(api::ApiKind::kCompletion, text);
  EXPECT_EQ(t.max_new_tokens, 3) << text;
  EXPECT_EQ(t.prompt_tokens, (66 + 3) / 4 + 1);
}

}  // namespace
}  // namespace densa::router
