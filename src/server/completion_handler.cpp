#include "server/completion_handler.h"

#include "text/chat_parse/chat_parse.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <random>

#include "api/sse.h"
#include "server/choice_stream.h"
#include "server/choice_timing.h"
#include "server/openai_response.h"
#include "server/serving_error.h"

namespace densa::server {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kPollWait{20};

// One prompt, ready for the engine.
struct PreparedPrompt {
  std::vector<TokenId> ids;
  std::string echo_text;  // prompt text for echo
};

// Everything a request needs after validation.
struct Plan {
  api::OpenAiRequest request;
  std::vector<PreparedPrompt> prompts;
  std::vector<std::string> stop;
  std::vector<TokenId> stop_token_ids;
  int max_tokens = 16;
  bool reasoning_open = false;  // chat: the rendered prompt ends inside a thinking block
  ConstraintPlan constraint;    // chat: structured output / tool-call grammar
  bool parse_chat = false;      // chat: the output is parsed for reasoning and tool calls
  bool skip_special = true;     // detokenize without special tokens
  std::vector<uint64_t> seeds;  // [choices] sampling seeds (they also seed tool-call ids)
};

// How a choice's output is parsed into content, reasoning_content and tool_calls: the
// model's tool parser when the request has tools (and tool_choice is not none), its reasoning
// parser always. Tool-call ids come from the choice's seed, so the streamed and the whole
// answer of one seed agree.
toolparse::ChatParseOptions chat_parse_options(const ServingContext& ctx, const Plan& plan, uint64_t seed) {
  toolparse::ChatParseOptions o;
  const api::OpenAiRequest& r = plan.request;
  if (!r.tools.empty() && r.tool_choice != api::ToolChoiceKind::kNone) {
    o.tool_parser = ctx.chat.tool_parser;
    Result<toolparse::ToolSet> tools = toolparse::ToolSet::from_openai(nlohmann::json::parse(r.tools.dump()));
    if (tools.is_ok()) o.tools = std::move(tools).value();
  }
  o.reasoning_parser = ctx.chat.reasoning_parser;
  o.reasoning_open_in_prompt = plan.reasoning_open;
  o.ids = toolparse::seeded_ids(seed);
  return o;
}


std::string new_request_id(api::ApiKind kind) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%s-%08llx%08llx", kind == api::ApiKind::kChat ? "chatcmpl" : "cmpl",
                static_cast<unsigned long long>(salt & 0xffffffffu),
                static_cast<unsigned long long>(counter.fetch_add(1)));
  return buf;
}

uint64_t random_seed() {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard<std::mutex> lock(mu);
  return rng();
}

// Tokenizes prompts / messages and settles max_tokens. Errors carry the offending field.
std::optional<Plan> make_plan(const ServingContext& ctx, api::OpenAiRequest request, api::ApiError& error) {
  Plan plan;
  const Tokenizer& tok = ctx.tokenizer;
  const char* prompt_param = request.kind == api::ApiKind::kChat ? "messages" : "prompt";
  if (request.inject_fault && !ctx.allow_fault_injection) {
    error = api_error(invalid_argument("'densa_inject_fault' breaks the request's KV on purpose and is served only by "
                                       "a server started with --test-allow-fault-injection"),
                      "densa_inject_fault");
    return std::nullopt;
  }
  if (request.kind == api::ApiKind::kChat) {
    // Refused by name until this model has what they need, never answered as plain text.
    if (!request.tools.empty() && request.tool_choice != api::ToolChoiceKind::kNone && ctx.chat.tool_parser.empty()) {
      error = api_error(invalid_argument("'tools' are not supported for this model: its chat template (" +
                                         ctx.chat.origin + ") has no tool-call format densa parses (see --tool-parser)"),
                        "tools");
      return std::nullopt;
    }
    Result<RenderedChat> chat = render_chat(ctx.chat, request);
    if (!chat.is_ok()) {
      error = api_error(chat.status(), "messages");
      return std::nullopt;
    }
    plan.prompts.push_back({tok.encode(chat->text, chat->add_special_tokens), chat->text});
    plan.stop = chat->stop;
    for (const std::string& piece : chat->stop_pieces)
      if (auto id = tok.token_to_id(piece)) plan.stop_token_ids.push_back(*id);
    plan.reasoning_open = chat->reasoning_open;
    std::string param;
    Result<ConstraintPlan> constraint = ctx.constraints->plan(request, ctx.chat, plan.reasoning_open, param);
    if (!constraint.is_ok()) {
      error = api_error(constraint.status(), param);
      return std::nullopt;
    }
    plan.constraint = std::move(constraint).value();
    const bool tools = !request.tools.empty() && request.tool_choice != api::ToolChoiceKind::kNone;
    plan.parse_chat = (tools && !ctx.chat.tool_parser.empty()) || !ctx.chat.reasoning_parser.empty();
    // Formats whose markers are special tokens are parsed from text that shows them.
    plan.skip_special = request.skip_special_tokens && (!tools || OutputConstraints::hermes_like(ctx.chat.tool_parser));
  } else {
    for (api::PromptInput& p : request.prompts) {
      if (p.is_ids) {
        for (TokenId id : p.ids)
          if (id >= tok.vocab_size()) {
            error = api_error(invalid_argument("token id " + std::to_string(id) + " in 'prompt' is outside the vocabulary (" +
                                               std::to_string(tok.vocab_size()) + ")"),
                              "prompt");
            return std::nullopt;
          }
        plan.prompts.push_back({p.ids, tok.decode(p.ids)});
      } else {
        plan.prompts.push_back({tok.encode(p.text, /*add_special_tokens=*/true), p.text});
      }
    }
    plan.skip_special = request.skip_special_tokens;
  }
  for (const std::string& s : request.stop) plan.stop.push_back(s);
  // Every id the model declares as an end of generation ends the turn (generation_config.json
  // may list several, e.g. <|im_end|> and <|endoftext|>).
  if (!request.ignore_eos)
    for (TokenId id : tok.eos_ids())
      if (std::find(plan.stop_token_ids.begin(), plan.stop_token_ids.end(), id) == plan.stop_token_ids.end())
        plan.stop_token_ids.push_back(id);

  const int64_t pool_tokens = static_cast<int64_t>(ctx.engine.stats().kv_pages_total) * ctx.page_size;
  const int64_t limit = pool_tokens > 0 ? std::min<int64_t>(ctx.context_tokens(), pool_tokens) : ctx.context_tokens();
  size_t longest = 0;
  for (const PreparedPrompt& p : plan.prompts) {
    if (p.ids.empty()) {
      error = api_error(invalid_argument("the prompt is empty"), prompt_param);
      return std::nullopt;
    }
    longest = std::max(longest, p.ids.size());
  }
  const int64_t room = limit - static_cast<int64_t>(longest);
  if (room < 1) {
    error = api_error(out_of_range("the prompt is " + std::to_string(longest) + " tokens; this model serves at most " +
                                   std::to_string(limit) + " tokens (context and KV pool) including the completion"),
                      prompt_param, "context_length_exceeded");
    return std::nullopt;
  }
  if (request.max_tokens) {
    if (*request.max_tokens > room) {
      error = api_error(out_of_range("max_tokens is " + std::to_string(*request.max_tokens) + " but the prompt (" +
                                     std::to_string(longest) + " tokens) leaves room for " + std::to_string(room) +
                                     " of the " + std::to_string(limit) + " tokens this model serves"),
                        "max_tokens", "context_length_exceeded");
      return std::nullopt;
    }
    plan.max_tokens = *request.max_tokens;
  } else {
    // OpenAI defaults: 16 for completions; chat runs until the end of the context.
    plan.max_tokens = static_cast<int>(request.kind == api::ApiKind::kChat ? room : std::min<int64_t>(16, room));
  }
  plan.request = std::move(request);
  return plan;
}

// Submits n requests per prompt; on any failure the ones already submitted are cancelled
// (ChoiceStream destructors) and the error is returned.
std::optional<std::vector<std::unique_ptr<ChoiceStream>>> submit_all(ServingContext& ctx, Plan& plan,
                                                                     Clock::time_point arrival,
                                                                     const std::string& prefill_url, api::ApiError& error) {
  std::vector<std::unique_ptr<ChoiceStream>> choices;
  const api::OpenAiRequest& r = plan.request;
  for (const PreparedPrompt& p : plan.prompts) {
    for (int i = 0; i < r.n; ++i) {
      GenerateRequest g;
      g.prompt = p.ids;
      g.sampling = r.sampling;
      g.sampling.seed = r.seed ? *r.seed + static_cast<uint64_t>(choices.size()) : random_seed();
      g.max_new_tokens = plan.max_tokens;
      g.ignore_eos = r.ignore_eos;
      g.stop_token_ids = plan.stop_token_ids;
      g.num_top_logprobs = r.num_top_logprobs;
      g.kv_integrity = r.kv_integrity;
      g.cache_salt = r.cache_salt;
      g.inject_fault = r.inject_fault;
      g.constraint = ctx.constraints->make(plan.constraint);
      plan.seeds.push_back(g.sampling.seed);
      // A decode worker gets the prompt's KV from the prefill worker the request names.
      Result<std::shared_ptr<RequestStream>> stream =
          ctx.disagg != nullptr ? ctx.disagg->submit(std::move(g), prefill_url) : ctx.engine.submit(std::move(g));
      if (!stream.is_ok()) {
        const bool too_long = stream.status().code() == StatusCode::kOutOfRange;
        error = api_error(stream.status(), too_long ? "max_tokens" : "", too_long ? "context_length_exceeded" : "");
        return std::nullopt;
      }
      choices.push_back(std::make_unique<ChoiceStream>(ctx.engine, std::move(stream).value(), ctx.tokenizer, p.ids,
                                                       plan.stop, arrival, plan.skip_special));
    }
  }
  return choices;
}

Usage usage_of(const Plan& plan, const std::vector<std::unique_ptr<ChoiceStream>>& choices) {
  Usage u;
  const size_t n = static_cast<size_t>(plan.request.n);
  for (size_t i = 0; i < choices.size(); ++i) {
    u.completion_tokens += choices[i]->num_generated_tokens();
    if (i % n == 0) {  // prompt tokens count once per prompt
      u.prompt_tokens += choices[i]->num_prompt_tokens();
      u.cached_tokens += choices[i]->num_cached_tokens();
    }
  }
  return u;
}

ResponseHeader header_of(const ServingContext& ctx, api::ApiKind kind) {
  return {kind, new_request_id(kind),
          std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count(),
          ctx.served_model_name};
}

// How long a finished choice waits for its engine request's final event (it carries the stage
// times) after a stop string cancelled it; only when the times are wanted (densa_timing / log).
constexpr milliseconds kTimelineWait{200};

bool wants_timing(const ServingContext& ctx, const Plan& plan) {
  return plan.request.timing || ctx.request_log != nullptr;
}

// Stage times of one finished choice (nullopt when the engine kept none), observed in /metrics.
std::optional<ChoiceTiming> finish_timing(ServingContext& ctx, ChoiceStream& choice, bool wait) {
  if (wait) choice.await_engine(kTimelineWait);
  if (!choice.engine_timeline()) return std::nullopt;
  ChoiceTiming t = make_choice_timing(*choice.engine_timeline(), choice.arrival(), Clock::now());
  ctx.metrics.observe_stages(t);
  return t;
}

const char* finish_name(ChoiceFinish f) {
  switch (f) {
    case ChoiceFinish::kNone: return "none";
    case ChoiceFinish::kStop: return "stop";
    case ChoiceFinish::kLength: return "length";
    case ChoiceFinish::kError: return "error";
    case ChoiceFinish::kToolCalls: return "tool_calls";
  }
  return "error";
}

// One line of the structured request log.
void log_request(ServingContext& ctx, const Plan& plan, const std::string& id, int status,
                 const std::vector<std::unique_ptr<ChoiceStream>>& choices,
                 const std::vector<std::optional<ChoiceTiming>>& timings, const std::vector<ChoiceFinish>& finishes,
                 const std::string& error) {
  if (ctx.request_log == nullptr) return;
  const Usage u = usage_of(plan, choices);
  nlohmann::json line = {
      {"time", std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count()},
      {"id", id},
      {"route", plan.request.kind == api::ApiKind::kChat ? "/v1/chat/completions" : "/v1/completions"},
      {"stream", plan.request.stream},
      {"status", status},
      {"prompt_tokens", u.prompt_tokens},
      {"completion_tokens", u.completion_tokens},
      {"cached_tokens", u.cached_tokens}};
  nlohmann::json per_choice = nlohmann::json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    nlohmann::json c = {{"index", i},
                        {"finish_reason", finish_name(i < finishes.size() ? finishes[i] : ChoiceFinish::kNone)},
                        {"completion_tokens", choices[i]->num_generated_tokens()}};
    if (i < timings.size() && timings[i]) c["timing"] = choice_timing_json(*timings[i], /*with_steps=*/false);
    per_choice.push_back(std::move(c));
  }
  line["choices"] = std::move(per_choice);
  if (!error.empty()) line["error"] = error;
  ctx.request_log->write(line);
}

void respond_blocking(ServingContext& ctx, const Plan& plan, std::vector<std::unique_ptr<ChoiceStream>> choices,
                      httplib::Response& res) {
  const api::OpenAiRequest& r = plan.request;
  std::vector<ChoiceResult> results(choices.size());
  while (true) {
    bool waited = false, all_done = true;
    for (size_t i = 0; i < choices.size(); ++i) {
      if (choices[i]->finished()) continue;
      ChoiceUpdate u = choices[i]->poll(waited ? milliseconds(0) : kPollWait);
      waited = true;
      results[i].text += u.text;
      for (TokenLogprob& t : u.tokens) results[i].tokens.push_back(std::move(t));
      if (u.finish == ChoiceFinish::kError) {
        const api::ApiError e = api_error(u.error);
        api::send_error(res, e);
        std::vector<ChoiceFinish> finishes;
        for (const ChoiceResult& c : results) finishes.push_back(c.finish);
        finishes[i] = ChoiceFinish::kError;
        log_request(ctx, plan, "", e.http_status, choices, {}, finishes, u.error.message());
        return;  // the other choices are cancelled by their destructors
      }
      if (u.finish != ChoiceFinish::kNone) {
        results[i].finish = u.finish;
        ctx.metrics.observe_request(choices[i]->timing());
      }
      all_done = all_done && choices[i]->finished();
    }
    if (all_done) break;
    if (ctx.stopping.load()) {
      api::send_error(res, api_error(unavailable("the server is shutting down")));
      return;
    }
  }
  if (r.echo)
    for (size_t i = 0; i < results.size(); ++i) results[i].text = plan.prompts[i / r.n].echo_text + results[i].text;
  const ResponseHeader header = header_of(ctx, r.kind);
  nlohmann::json body = response_json(header, ctx.tokenizer, results, r.num_top_logprobs >= 0, usage_of(plan, choices));
  if (plan.parse_chat) {
    for (size_t i = 0; i < results.size(); ++i) {
      const toolparse::ChatParseOptions o = chat_parse_options(ctx, plan, plan.seeds[i]);
      // The same fold of the same parser a stream sends, so both answers agree; a call cut
      // short by max_tokens is sent as far as it got, as its stream was.
      Result<toolparse::ParsedMessage> m = toolparse::parse_chat_output(results[i].text, o);
      if (!m.is_ok()) continue;
      body["choices"][i]["message"] = toolparse::to_openai_message(m.value());
      if (!m->tool_calls.empty() && results[i].finish == ChoiceFinish::kStop) {
        results[i].finish = ChoiceFinish::kToolCalls;
        body["choices"][i]["finish_reason"] = "tool_calls";
      }
    }
  }
  std::vector<std::optional<ChoiceTiming>> timings;
  const std::optional<ChoiceTiming>* slowest = nullptr;
  for (size_t i = 0; i < choices.size(); ++i) {
    timings.push_back(finish_timing(ctx, *choices[i], wants_timing(ctx, plan)));
    if (timings.back() && (slowest == nullptr || (*slowest)->server_ms < timings.back()->server_ms))
      slowest = &timings.back();
    if (r.timing) body["choices"][i]["densa_timing"] = timings[i] ? choice_timing_json(*timings[i]) : nlohmann::json();
  }
  // The response's Server-Timing is its slowest choice's.
  std::optional<ChoiceTiming> header_timing = slowest != nullptr ? *slowest : std::nullopt;
  if (header_timing) res.set_header("Server-Timing", server_timing_header(*header_timing));
  res.status = 200;
  res.set_content(dump_json(body), "application/json");
  std::vector<ChoiceFinish> finishes;
  for (const ChoiceResult& c : results) finishes.push_back(c.finish);
  log_request(ctx, plan, header.id, 200, choices, timings, finishes, "");
}

// State of one SSE response, shared by httplib's content provider and releaser.
struct StreamState {
  ServingContext& ctx;
  Plan plan;
  ResponseHeader header;
  std::vector<std::unique_ptr<ChoiceStream>> choices;
  std::vector<size_t> text_bytes;  // [choices] bytes sent so far (completions text_offset)
  std::vector<std::optional<ChoiceTiming>> timings;  // [choices] once finished
  std::vector<ChoiceFinish> finishes;                // [choices]
  // [choices] chat output parsers (Plan::parse_chat): content, reasoning and tool-call deltas
  // from the text so far, so the deltas concatenate to the whole answer's message.
  std::vector<std::unique_ptr<toolparse::ChatStreamParser>> parsers;
  bool started = false;
  bool done = false;

  // The chunks for one update of choice i: one per parsed delta when parsing, else one.
  void emit(std::string& out, size_t i, const ChoiceUpdate& u, const nlohmann::json& logprobs) {
    const api::OpenAiRequest& r = plan.request;
    ChoiceFinish finish = u.finish;
    if (parsers.empty() || parsers[i] == nullptr) {
      append_chunk(out, i, chunk_json(header, static_cast<int>(i), u.text, logprobs, finish, false, r.include_usage), finish);
      return;
    }
    std::vector<toolparse::ChatDelta> deltas = parsers[i]->feed(u.text);
    if (finish != ChoiceFinish::kNone) {
      for (toolparse::ChatDelta& d : parsers[i]->finish()) deltas.push_back(std::move(d));
      if (finish == ChoiceFinish::kStop && !parsers[i]->message().tool_calls.empty()) finish = ChoiceFinish::kToolCalls;
    }
    for (size_t k = 0; k < deltas.size(); ++k) {
      const bool last = k + 1 == deltas.size();
      nlohmann::json chunk = chunk_json(header, static_cast<int>(i), "", k == 0 ? logprobs : nlohmann::json(),
                                        last ? finish : ChoiceFinish::kNone, false, r.include_usage);
      chunk["choices"][0]["delta"] = toolparse::to_openai_delta(deltas[k]);
      append_chunk(out, i, std::move(chunk), last ? finish : ChoiceFinish::kNone);
    }
    // Logprobs or the finish with no text delta still get their chunk.
    if (deltas.empty() && (!logprobs.is_null() || finish != ChoiceFinish::kNone))
      append_chunk(out, i, chunk_json(header, static_cast<int>(i), "", logprobs, finish, false, r.include_usage), finish);
  }

  void append_chunk(std::string& out, size_t i, nlohmann::json chunk, ChoiceFinish finish) {
    // The choice's final chunk carries its stage times when asked (densa_timing).
    if (plan.request.timing && finish != ChoiceFinish::kNone)
      chunk["choices"][0]["densa_timing"] = timings[i] ? choice_timing_json(*timings[i]) : nlohmann::json();
    out += api::sse_event(dump_json(chunk));
  }

  // Returns the SSE text to send now (empty when nothing happened).
  std::string step() {
    std::string out;
    const api::OpenAiRequest& r = plan.request;
    const bool lp = r.num_top_logprobs >= 0;
    if (!started) {
      started = true;
      for (size_t i = 0; i < choices.size(); ++i) {
        const std::string echo = r.echo ? plan.prompts[i / r.n].echo_text : std::string();
        text_bytes[i] = echo.size();
        if (r.kind == api::ApiKind::kChat || !echo.empty())
          out += api::sse_event(dump_json(chunk_json(header, static_cast<int>(i), echo, nullptr, ChoiceFinish::kNone,
                                                /*first=*/true, r.include_usage)));
      }
    }
    bool waited = false, all_done = true;
    for (size_t i = 0; i < choices.size(); ++i) {
      if (choices[i]->finished()) continue;
      ChoiceUpdate u = choices[i]->poll(waited || !out.empty() ? milliseconds(0) : kPollWait);
      waited = true;
      if (u.finish == ChoiceFinish::kError) {
        const api::ApiError e = api_error(u.error);
        out += api::sse_event(api::error_body(e));
        out += api::sse_done();
        done = true;
        finishes[i] = ChoiceFinish::kError;
        log_request(ctx, plan, header.id, e.http_status, choices, timings, finishes, u.error.message());
        return out;
      }
      if (u.finish != ChoiceFinish::kNone) {
        ctx.metrics.observe_request(choices[i]->timing());
        finishes[i] = u.finish;
        timings[i] = finish_timing(ctx, *choices[i], wants_timing(ctx, plan));
      }
      if (!u.text.empty() || !u.tokens.empty() || u.finish != ChoiceFinish::kNone) {
        nlohmann::json logprobs = lp ? logprobs_json(r.kind, ctx.tokenizer, u.tokens, text_bytes[i]) : nlohmann::json();
        emit(out, i, u, logprobs);
        text_bytes[i] += u.text.size();
      }
      all_done = all_done && choices[i]->finished();
    }
    if (all_done) {
      if (r.include_usage) out += api::sse_event(dump_json(usage_chunk_json(header, usage_of(plan, choices))));
      out += api::sse_done();
      done = true;
      log_request(ctx, plan, header.id, 200, choices, timings, finishes, "");
    }
    return out;
  }

  void cancel_unfinished() {
    for (auto& c : choices)
      if (!c->finished()) c->cancel();
  }
};

void respond_streaming(ServingContext& ctx, Plan plan, std::vector<std::unique_ptr<ChoiceStream>> choices,
                       httplib::Response& res) {
  auto state = std::make_shared<StreamState>(StreamState{ctx, std::move(plan), header_of(ctx, api::ApiKind::kCompletion),
                                                         std::move(choices), {}, {}, {}, {}, false, false});
  state->header = header_of(ctx, state->plan.request.kind);
  state->text_bytes.assign(state->choices.size(), 0);
  state->timings.assign(state->choices.size(), std::nullopt);
  state->finishes.assign(state->choices.size(), ChoiceFinish::kNone);
  if (state->plan.parse_chat) {
    for (size_t i = 0; i < state->choices.size(); ++i) {
      Result<std::unique_ptr<toolparse::ChatStreamParser>> p =
          toolparse::ChatStreamParser::create(chat_parse_options(ctx, state->plan, state->plan.seeds[i]));
      state->parsers.push_back(p.is_ok() ? std::move(p).value() : nullptr);
    }
  }
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [state](size_t /*offset*/, httplib::DataSink& sink) -> bool {
        try {
          if (state->ctx.stopping.load()) {
            state->cancel_unfinished();
            return false;
          }
          const std::string out = state->step();
          // A failed write or a closed socket means the client left: cancel its requests.
          if ((!out.empty() && !sink.write(out.data(), out.size())) || !sink.is_writable()) {
            state->cancel_unfinished();
            return false;
          }
          if (state->done) {
            state->cancel_unfinished();
            sink.done();
          }
          return true;
        } catch (...) {
          state->cancel_unfinished();
          return false;
        }
      },
      [state](bool /*success*/) { state->cancel_unfinished(); });
}

}  // namespace

Status CompletionHandler::check_role(const httplib::Request& req, std::string& prefill_url) const {
  if (ctx_.disagg == nullptr) {
    // A prefill worker computes prompts for decode workers only.
    if (ctx_.prefill_only) {
      return invalid_argument("this is a prefill worker: it serves /disagg/v1/prefill for decode workers, not "
                              "OpenAI requests; send them to a decode worker or a colocated server");
    }
    return Status::ok();
  }
  prefill_url = req.get_header_value(kPrefillUrlHeader);
  if (prefill_url.empty()) {
    return invalid_argument(std::string("this is a decode worker: name the prefill worker in the ") +
                            kPrefillUrlHeader + " header (http://host:port), or use densa router");
  }
  if (prefill_url.rfind("http://", 0) != 0) {
    return invalid_argument(std::string(kPrefillUrlHeader) + " must be an http://host:port URL, not \"" + prefill_url +
                            "\"");
  }
  return Status::ok();
}

void CompletionHandler::handle(api::ApiKind kind, const httplib::Request& req, httplib::Response& res) {
  const Clock::time_point arrival = Clock::now();
  api::RequestError parse_error;
  std::optional<api::OpenAiRequest> request = api::parse_openai_request(kind, req.body, parse_error);
  if (!request) return api::send_error(res, api_error(parse_error.status, parse_error.param));
  if (!request->model.empty() && request->model != ctx_.served_model_name)
    return api::send_error(res, api_error(not_found("The model '" + request->model + "' does not exist; this server serves '" +
                                               ctx_.served_model_name + "'"),
                                     "model", "model_not_found"));
  std::string prefill_url;
  if (Status s = check_role(req, prefill_url); !s.is_ok()) return api::send_error(res, api_error(s));
  api::ApiError error;
  std::optional<Plan> plan = make_plan(ctx_, std::move(*request), error);
  if (!plan) return api::send_error(res, error);
  auto choices = submit_all(ctx_, *plan, arrival, prefill_url, error);
  if (!choices) return api::send_error(res, error);
  if (plan->request.stream) return respond_streaming(ctx_, std::move(*plan), std::move(*choices), res);
  respond_blocking(ctx_, *plan, std::move(*choices), res);
}

}  // namespace densa::server
