#include "tools/bench/bench_serve_client.h"

#include <httplib.h>

#include <algorithm>
#include <fstream>
#include <random>

namespace densa::bench {

using json = nlohmann::json;

// ---- SSE ----

void SseParser::feed(std::string_view bytes, const std::function<void(std::string_view)>& on_data) {
  for (char c : bytes) {
    if (c != '\n') {
      line_.push_back(c);
      continue;
    }
    if (!line_.empty() && line_.back() == '\r') line_.pop_back();
    if (line_.empty()) {  // blank line: the event ends
      if (has_data_) on_data(data_);
      data_.clear();
      has_data_ = false;
    } else if (line_.rfind("data:", 0) == 0) {
      std::string_view value = std::string_view(line_).substr(5);
      if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
      if (has_data_) data_.push_back('\n');
      data_.append(value);
      has_data_ = true;
    }  // other fields (event:, id:, retry:, comments) carry nothing the benchmark needs
    line_.clear();
  }
}

StreamChunk parse_stream_chunk(std::string_view payload) {
  StreamChunk c;
  if (payload == "[DONE]") {
    c.done = true;
    return c;
  }
  const json j = json::parse(payload, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    c.error = "unparsable stream chunk: " + std::string(payload.substr(0, 200));
    return c;
  }
  if (auto e = j.find("error"); e != j.end()) {
    c.error = e->is_object() && e->contains("message") && (*e)["message"].is_string()
                  ? (*e)["message"].get<std::string>()
                  : e->dump();
    return c;
  }
  if (auto choices = j.find("choices"); choices != j.end() && choices->is_array()) {
    for (const json& ch : *choices) {
      const json* text = nullptr;
      if (auto t = ch.find("text"); t != ch.end()) text = &*t;
      if (auto d = ch.find("delta"); d != ch.end() && d->is_object()) {
        if (auto t = d->find("content"); t != d->end()) text = &*t;
      }
      const bool has_text = text && text->is_string() && !text->get_ref<const std::string&>().empty();
      auto fr = ch.find("finish_reason");
      const bool finished = fr != ch.end() && !fr->is_null();
      if (has_text || (!finished && text)) c.is_token = true;
      if (auto t = ch.find("densa_timing"); t != ch.end() && t->is_object()) {
        const auto seconds = [&](const char* key) {
          auto v = t->find(key);
          return v != t->end() && v->is_number() ? v->get<double>() / 1e3 : 0.0;
        };
        c.server = ServerStages{seconds("server_ms"), seconds("queue_ms"), seconds("prefill_ms"), seconds("decode_ms")};
      }
    }
  }
  if (auto u = j.find("usage"); u != j.end() && u->is_object()) {
    if (auto p = u->find("prompt_tokens"); p != u->end() && p->is_number_integer()) c.prompt_tokens = p->get<int64_t>();
    if (auto p = u->find("completion_tokens"); p != u->end() && p->is_number_integer())
      c.completion_tokens = p->get<int64_t>();
  }
  return c;
}

// ---- endpoint ----

Result<Endpoint> parse_endpoint(std::string_view base_url, std::string_view endpoint_path) {
  const size_t scheme_end = base_url.find("://");
  if (scheme_end == std::string_view::npos) {
    return invalid_argument("--base-url '" + std::string(base_url) + "' needs a scheme (http://host:port)");
  }
  const std::string_view scheme = base_url.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https") {
    return invalid_argument("--base-url '" + std::string(base_url) + "': scheme must be http or https");
  }
  const size_t path_start = base_url.find('/', scheme_end + 3);
  Endpoint ep;
  ep.origin = std::string(base_url.substr(0, path_start));
  std::string prefix = path_start == std::string_view::npos ? "" : std::string(base_url.substr(path_start));
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  std::string path(endpoint_path);
  if (path.empty() || path.front() != '/') path.insert(path.begin(), '/');
  // Overlap of the prefix's tail with the endpoint's head ("/v1" + "/v1/completions").
  if (!prefix.empty() && path.rfind(prefix, 0) != 0) {
    const size_t slash = prefix.rfind('/');
    const std::string last = prefix.substr(slash);
    if (path.rfind(last + "/", 0) == 0) prefix.resize(slash);
    path = prefix + path;
  }
  ep.path = path;
  ep.chat = path.size() >= 17 && path.ends_with("/chat/completions");
  return ep;
}

// ---- client ----

json request_body(const ClientOptions& opts, const BenchPrompt& prompt) {
  json body = {{"model", opts.model},
               {"max_tokens", prompt.max_tokens},
               {"temperature", 0},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  if (opts.endpoint.chat) {
    body["messages"] = json::array({{{"role", "user"}, {"content", prompt.text}}});
  } else if (!prompt.ids.empty()) {
    body["prompt"] = prompt.ids;
  } else {
    body["prompt"] = prompt.text;
  }
  if (opts.extra_body.is_object()) body.update(opts.extra_body);
  return body;
}

StreamingClient::StreamingClient(ClientOptions opts)
    : opts_(std::move(opts)), http_(std::make_unique<httplib::Client>(opts_.endpoint.origin)) {
  const auto secs = static_cast<time_t>(opts_.timeout_s);
  http_->set_connection_timeout(10, 0);
  http_->set_tcp_nodelay(true);
  http_->set_read_timeout(secs, 0);
  http_->set_write_timeout(secs, 0);
  http_->set_keep_alive(true);
}

StreamingClient::~StreamingClient() = default;

RequestRecord StreamingClient::send(const BenchPrompt& prompt, std::chrono::steady_clock::time_point epoch) {
  using Clock = std::chrono::steady_clock;
  const auto since = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  RequestRecord rec;
  rec.prompt_tokens = prompt.num_tokens;
  httplib::Request req;
  req.method = "POST";
  req.path = opts_.endpoint.path;
  req.body = request_body(opts_, prompt).dump();
  req.set_header("Content-Type", "application/json");
  req.set_header("Accept", "text/event-stream");
  if (!opts_.api_key.empty()) req.set_header("Authorization", "Bearer " + opts_.api_key);

  SseParser sse;
  int64_t num_token_chunks = 0;
  std::optional<int64_t> usage_prompt, usage_completion;
  std::string stream_error, raw_prefix;
  Clock::time_point last_token;
  const Clock::time_point start = Clock::now();
  rec.start_s = since(epoch, start);
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    const Clock::time_point now = Clock::now();
    if (raw_prefix.size() < 512) raw_prefix.append(data, std::min<size_t>(len, 512 - raw_prefix.size()));
    sse.feed(std::string_view(data, len), [&](std::string_view payload) {
      const StreamChunk c = parse_stream_chunk(payload);
      if (!c.error.empty() && stream_error.empty()) stream_error = c.error;
      if (c.prompt_tokens) usage_prompt = c.prompt_tokens;
      if (c.completion_tokens) usage_completion = c.completion_tokens;
      if (c.server) rec.server = c.server;
      if (!c.is_token) return;
      if (num_token_chunks == 0) {
        rec.ttft_s = since(start, now);
      } else {
        rec.itl_s.push_back(since(last_token, now));
      }
      last_token = now;
      ++num_token_chunks;
    });
    return true;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  const bool sent = http_->send(req, res, err);
  rec.e2e_s = since(start, Clock::now());
  if (!sent) {
    rec.error = "http error: " + httplib::to_string(err);
  } else if (res.status != 200) {
    rec.error = "HTTP " + std::to_string(res.status) + ": " + raw_prefix.substr(0, 200);
  } else if (!stream_error.empty()) {
    rec.error = stream_error;
  } else if (num_token_chunks == 0 && !usage_completion.value_or(0)) {
    rec.error = "stream ended without a token";
  } else {
    rec.ok = true;
  }
  if (usage_prompt) rec.prompt_tokens = *usage_prompt;
  rec.output_tokens = usage_completion.value_or(num_token_chunks);
  if (rec.ok && num_token_chunks == 0) rec.ttft_s = rec.e2e_s;  // everything in one final chunk
  return rec;
}

// ---- datasets ----

namespace {

// Common short English words: most are one or two tokens for any BPE vocabulary.
constexpr const char* kWords[] = {
    "the", "a", "little", "girl", "boy", "dog", "cat", "bird", "tree", "house", "sun", "moon",
    "park", "ball", "toy", "friend", "mom", "dad", "happy", "sad", "big", "small", "red", "blue",
    "green", "day", "night", "play", "run", "jump", "see", "look", "find", "make", "help", "want",
    "like", "love", "go", "come", "say", "said", "was", "is", "went", "saw", "had", "and", "then",
    "but", "so", "very", "one", "two", "three", "time", "home", "water", "food", "cake", "book",
    "box", "car", "boat", "fish", "flower", "garden", "sky", "rain", "snow", "wind", "hat", "shoe",
    "door", "window", "bed", "chair", "table", "apple", "bear", "rabbit", "frog", "duck", "king",
    "queen", "school", "teacher", "story", "song", "game", "walk", "talk", "smile", "laugh", "cry",
    "sleep", "eat", "drink", "open", "close", "give", "take", "share", "kind", "brave", "funny",
    "quiet", "loud", "fast", "slow", "old", "new", "warm", "cold", "soft", "hard", "bright", "dark",
    "in", "on", "under", "over", "with", "to", "from", "for", "of", "at", "by", "up", "down",
    "out", "they", "she", "he", "it", "we", "you", "her", "his", "their", "our", "all", "some",
    "many", "every", "again", "together", "today", "after", "before", "when", "where", "why",
    "how", "what", "who", "yes", "no", "thank", "please", "hello", "goodbye", "named", "lived",
    "wanted", "decided", "learned", "felt", "thought", "asked", "found", "made", "played"};
constexpr int kNumWords = sizeof(kWords) / sizeof(kWords[0]);

std::string random_words(std::mt19937_64& rng, int n) {
  std::uniform_int_distribution<int> pick(0, kNumWords - 1);
  std::string s;
  for (int i = 0; i < n; ++i) {
    if (i) s.push_back(' ');
    s += kWords[pick(rng)];
  }
  return s;
}

// Adjusts `text` (random words) until count_tokens(text) == target, within a few rounds.
std::string fit_to_tokens(std::mt19937_64& rng, std::string text, int64_t target,
                          const std::function<int64_t(const std::string&)>& count_tokens) {
  for (int round = 0; round < 64; ++round) {
    const int64_t n = count_tokens(text);
    if (n == target) break;
    if (n < target) {
      text += " " + random_words(rng, static_cast<int>(std::max<int64_t>(1, (target - n) / 2)));
    } else {
      const size_t space = text.rfind(' ');
      if (space == std::string::npos) break;
      text.resize(space);
    }
  }
  return text;
}

}  // namespace

std::vector<BenchPrompt> random_word_prompts(int num_prompts, int input_len, int output_len, uint64_t seed,
                                             const std::function<int64_t(const std::string&)>& count_tokens) {
  std::mt19937_64 rng(seed);
  std::vector<BenchPrompt> out(num_prompts);
  for (BenchPrompt& p : out) {
    p.text = random_words(rng, std::max(1, input_len));
    if (count_tokens) {
      p.text = fit_to_tokens(rng, std::move(p.text), input_len, count_tokens);
      p.num_tokens = count_tokens(p.text);
    }
    p.max_tokens = output_len;
  }
  return out;
}

std::vector<BenchPrompt> random_id_prompts(int num_prompts, int input_len, int output_len, uint64_t seed,
                                           int32_t id_lo, int32_t id_hi) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> pick(id_lo, std::max(id_lo, id_hi - 1));
  std::vector<BenchPrompt> out(num_prompts);
  for (BenchPrompt& p : out) {
    p.ids.resize(std::max(1, input_len));
    for (int32_t& id : p.ids) id = pick(rng);
    p.num_tokens = static_cast<int64_t>(p.ids.size());
    p.max_tokens = output_len;
  }
  return out;
}

Result<std::vector<BenchPrompt>> file_prompts(const std::string& path, int num_prompts, int output_len,
                                              const std::function<int64_t(const std::string&)>& count_tokens) {
  std::ifstream in(path);
  if (!in) return not_found(path + ": cannot open the dataset file");
  std::vector<BenchPrompt> lines;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    BenchPrompt p;
    p.max_tokens = output_len;
    if (line.front() == '{') {
      const json j = json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.contains("prompt") || !j["prompt"].is_string()) {
        return invalid_argument(path + ":" + std::to_string(line_no) + ": expected {\"prompt\": \"...\"}");
      }
      p.text = j["prompt"].get<std::string>();
      if (j.contains("max_tokens") && j["max_tokens"].is_number_integer()) p.max_tokens = j["max_tokens"].get<int>();
    } else {
      p.text = line;
    }
    if (count_tokens) p.num_tokens = count_tokens(p.text);
    lines.push_back(std::move(p));
  }
  if (lines.empty()) return invalid_argument(path + ": no prompts");
  std::vector<BenchPrompt> out;
  for (int i = 0; i < num_prompts; ++i) out.push_back(lines[i % lines.size()]);
  return out;
}

}  // namespace densa::bench
