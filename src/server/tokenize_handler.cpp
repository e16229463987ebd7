#include "server/tokenize_handler.h"

#include <limits>

#include <nlohmann/json.hpp>

#include "server/completion_handler.h"
#include "server/openai_response.h"
#include "server/serving_error.h"

namespace densa::server {
namespace {

using nlohmann::json;

void send(httplib::Response& res, const json& body) {
  res.status = 200;
  res.set_content(dump_json(body), "application/json");
}

void fail(httplib::Response& res, const std::string& message, const std::string& param) {
  api::send_error(res, api_error(invalid_argument(message), param));
}

// The body as a JSON object whose fields are all in `known`; else a 400 naming the field.
std::optional<json> read_body(const httplib::Request& req, httplib::Response& res,
                              std::initializer_list<const char*> known) {
  if (api::json_nesting_depth(req.body, api::kMaxRequestJsonDepth) > api::kMaxRequestJsonDepth) {
    fail(res, "Request body nests JSON deeper than " + std::to_string(api::kMaxRequestJsonDepth) + " levels", "");
    return std::nullopt;
  }
  json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded() || !body.is_object()) {
    fail(res, "Request body must be a JSON object", "");
    return std::nullopt;
  }
  for (const auto& [key, value] : body.items()) {
    bool ok = false;
    for (const char* k : known) ok = ok || key == k;
    if (!ok) {
      fail(res, "'" + key + "' is not supported by densa on " + req.path, key);
      return std::nullopt;
    }
  }
  return body;
}

bool model_matches(const ServingContext& ctx, const json& body, httplib::Response& res) {
  auto m = body.find("model");
  if (m == body.end() || m->is_null()) return true;
  if (!m->is_string()) {
    fail(res, "'model' must be a string", "model");
    return false;
  }
  if (m->get<std::string>() != ctx.served_model_name) {
    api::send_error(res, api_error(not_found("The model '" + m->get<std::string>() + "' does not exist"), "model",
                              "model_not_found"));
    return false;
  }
  return true;
}

}  // namespace

void register_tokenize_routes(httplib::Server& http, ServingContext& ctx) {
  http.Post("/tokenize", [&ctx](const httplib::Request& req, httplib::Response& res) {
    std::optional<json> body = read_body(req, res, {"model", "prompt", "messages", "tools", "add_generation_prompt",
                                                    "chat_template_kwargs", "add_special_tokens", "return_token_strs"});
    if (!body || !model_matches(ctx, *body, res)) return;
    std::optional<bool> add_special;
    bool token_strs = false;
    for (const char* name : {"add_special_tokens", "return_token_strs"}) {
      auto f = body->find(name);
      if (f == body->end() || f->is_null()) continue;
      if (!f->is_boolean()) return fail(res, std::string("'") + name + "' must be a boolean", name);
      if (std::string(name) == "add_special_tokens") add_special = f->get<bool>();
      else token_strs = f->get<bool>();
    }
    std::string text;
    bool default_special = true;
    if (body->contains("messages")) {
      // A conversation: rendered exactly as /v1/chat/completions renders it.
      if (body->contains("prompt")) return fail(res, "give 'prompt' or 'messages', not both", "prompt");
      // Re-read with the key order kept: the template prints objects (tojson) in the order sent.
      nlohmann::ordered_json chat = nlohmann::ordered_json::parse(req.body);
      chat.erase("add_special_tokens");
      chat.erase("return_token_strs");
      api::RequestError error;
      std::optional<api::OpenAiRequest> request = api::parse_openai_request(api::ApiKind::kChat, chat.dump(), error);
      if (!request) return api::send_error(res, api_error(error.status, error.param));
      Result<RenderedChat> rendered = render_chat(ctx.chat, *request);
      if (!rendered.is_ok()) return api::send_error(res, api_error(rendered.status(), "messages"));
      text = std::move(rendered->text);
      default_special = rendered->add_special_tokens;
    } else {
      for (const char* chat_only : {"tools", "add_generation_prompt", "chat_template_kwargs"})
        if (body->contains(chat_only)) return fail(res, std::string("'") + chat_only + "' needs 'messages'", chat_only);
      auto prompt = body->find("prompt");
      if (prompt == body->end() || !prompt->is_string()) return fail(res, "'prompt' must be a string", "prompt");
      text = prompt->get<std::string>();
    }
    const Tokenizer& tok = ctx.tokenizer;
    const std::vector<TokenId> ids = tok.encode(text, add_special.value_or(default_special));
    json out = {{"count", ids.size()}, {"max_model_len", ctx.context_tokens()}, {"tokens", ids}};
    if (token_strs) {
      json strs = json::array();
      for (TokenId id : ids) strs.push_back(tok.token_bytes(id));
      out["token_strs"] = std::move(strs);
    }
    send(res, out);
  });
  http.Post("/detokenize", [&ctx](const httplib::Request& req, httplib::Response& res) {
    std::optional<json> body = read_body(req, res, {"model", "tokens"});
    if (!body || !model_matches(ctx, *body, res)) return;
    auto tokens = body->find("tokens");
    if (tokens == body->end() || !tokens->is_array()) return fail(res, "'tokens' must be an array of token ids", "tokens");
    std::vector<TokenId> ids;
    for (const json& t : *tokens) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= ctx.tokenizer.vocab_size())
        return fail(res, "'tokens' holds " + t.dump() + ", not a token id of this model's vocabulary (" +
                             std::to_string(ctx.tokenizer.vocab_size()) + ")",
                    "tokens");
      ids.push_back(t.get<TokenId>());
    }
    send(res, {{"prompt", ctx.tokenizer.decode(ids)}});
  });
}

}  // namespace densa::server
