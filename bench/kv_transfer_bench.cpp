// KV transfer throughput through densa's own disaggregation data plane: the functions the
// prefill and decode workers call, without the HTTP control plane. Per transfer, as a server
// does it: build_page_messages (convert each page into the receiver's format, xxh3 digest,
// header with the receiver's page tag), a KvReceiver (one UCX worker from the decode side's
// pool, one receive per page), send_page_messages on another thread (a worker from the prefill
// side's pool, connected to the receiver: send, flush), then KvReceiver::receive (every header,
// tag, size and digest verified, payload copied out) and the receiver's worker back to its
// pool. --fresh-workers turns pooling off: every transfer creates, connects and destroys a
// worker on each side (what every transfer did before the pools). Sender and receiver are two
// threads of this process sharing one UcxContext (the server has one per process); UCX_TLS
// from the environment picks the transport.
//
// Prints one row per conversion: the bytes on the wire per page and per token (the 48-byte
// header shown separately), the median times of the build step, of the receiver's checks
// alone, and of the transfer (receiver created -> every page verified and the sender's flush
// done), and payload / wire GB/s and pages/s of the transfer. Beside them: the same transfer
// with no pages (the fixed per-transfer cost: two workers acquired, flushed, released)
// and how fast this machine writes freshly allocated memory. bench/kv_transfer.sh pairs each
// row with ucx_perftest at the same message size. A plain main(), not a timed test.
//
//   UCX_TLS=tcp ./build/kv_transfer_bench [--layout fixture|large|L,H,D] [--pages N]
//       [--convert all|bf16-bf16|bf16-fp8|fp8-fp8|bf16-fp8dyn] [--transfers N] [--warmup N]
//       [--fresh-workers] [--tsv]
// fixture = the MoE fixture's KV (4 layers x 4 KV heads x head_dim 16), large = 24 x 4 x 128;
// page size 16 tokens; every page full.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/dtype.h"
#include "disagg/kv_page_convert.h"
#include "disagg/kv_receiver.h"
#include "disagg/kv_sender.h"
#include "disagg/kv_wire.h"
#include "disagg/ucx_pool.h"

namespace densa::disagg {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Conversion {
  const char* name;
  DType from_dtype;
  KvScaleMode from_mode;
  DType to_dtype;
  KvScaleMode to_mode;
};

constexpr Conversion kConversions[] = {
    {"bf16-bf16", DType::kBF16, KvScaleMode::kNone, DType::kBF16, KvScaleMode::kNone},
    {"bf16-fp8", DType::kBF16, KvScaleMode::kNone, DType::kFP8E4M3, KvScaleMode::kStatic},
    {"fp8-fp8", DType::kFP8E4M3, KvScaleMode::kStatic, DType::kFP8E4M3, KvScaleMode::kStatic},
    {"bf16-fp8dyn", DType::kBF16, KvScaleMode::kNone, DType::kFP8E4M3, KvScaleMode::kDynamic},
};

struct Options {
  KvLayout shape;          // dtype / scale mode set per conversion
  std::string layout_name = "fixture";
  int num_pages = 16;
  std::string convert = "all";
  int num_transfers = 20;
  int num_warmup = 2;
  bool tsv = false;
  bool fresh_workers = false;  // a fresh UCX worker per side and transfer (no pooling)
};

KvLayout with_format(KvLayout l, DType dtype, KvScaleMode mode) {
  l.dtype = dtype;
  l.scale_mode = mode;
  return l;
}

// Random BF16 pages (normal values, sd 2), the source of every conversion.
std::vector<std::vector<uint8_t>> random_bf16_pages(const KvLayout& l, int num_pages) {
  std::mt19937 rng(1234);
  std::normal_distribution<float> n(0.0f, 2.0f);
  std::vector<std::vector<uint8_t>> pages(static_cast<size_t>(num_pages));
  for (std::vector<uint8_t>& p : pages) {
    p.resize(static_cast<size_t>(l.page_bytes()));
    for (size_t i = 0; i + 1 < p.size(); i += 2) {
      const uint16_t h = f32_to_bf16(n(rng));
      std::memcpy(&p[i], &h, 2);
    }
  }
  return pages;
}

struct Row {
  int64_t payload_bytes_per_page = 0;
  int64_t message_bytes_per_page = 0;
  double build_s = 0;      // median build_page_messages (convert + digest + header)
  double verify_s = 0;     // median verify_page_message over every page, alone (part of transfer_s)
  double transfer_s = 0;   // median receiver created -> verified + sender flushed
  double best_transfer_s = 0;
};

// One transfer; returns false (after printing why) on any failure.
// The two workers' UCX worker pools (two processes in a server; here two threads, one context).
struct Pools {
  UcxWorkerPool& decode;   // receivers
  UcxWorkerPool& prefill;  // senders
};

bool transfer_once(Pools& pools, const KvPageFormat& from, const std::vector<const uint8_t*>& pages,
                   const KvPageFormat& to, uint64_t transfer_id, const std::vector<uint32_t>& tags, bool check_bytes,
                   double* build_s, double* transfer_s) {
  const int32_t num_tokens = static_cast<int32_t>(pages.size()) * to.layout.page_size;
  const Clock::time_point t0 = Clock::now();
  const std::vector<std::vector<uint8_t>> messages =
      build_page_messages(from, pages, num_tokens, to, transfer_id, tags);
  const Clock::time_point t1 = Clock::now();
  Result<std::unique_ptr<KvReceiver>> receiver = KvReceiver::create(pools.decode, transfer_id, tags, to.layout.page_bytes());
  if (!receiver.is_ok()) {
    std::fprintf(stderr, "receiver: %s\n", receiver.status().to_string().c_str());
    return false;
  }
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(60);
  const KvSendOrder order{transfer_id, (*receiver)->address(), tags};
  Result<int64_t> sent = int64_t{0};
  Clock::time_point sent_at;
  std::thread sender([&] {
    sent = send_page_messages(pools.prefill, order, messages, deadline);
    sent_at = Clock::now();
  });
  Result<KvImportData> got = (*receiver)->receive(deadline, [] { return false; });
  const Clock::time_point received_at = Clock::now();
  // The sender's flush needs this worker to keep answering (the decode worker keeps
  // progressing while it waits for the prefill worker's HTTP answer).
  std::atomic<bool> sender_done{false};
  std::thread progress([&] {
    while (!sender_done.load()) (*receiver)->progress();
  });
  sender.join();
  sender_done = true;
  progress.join();
  if (got.is_ok() && sent.is_ok()) (*receiver)->recycle();  // as the decode worker does after a 200
  if (!got.is_ok() || !sent.is_ok()) {
    std::fprintf(stderr, "transfer: receive %s, send %s\n", got.status().to_string().c_str(),
                 sent.status().to_string().c_str());
    return false;
  }
  const int64_t wire = static_cast<int64_t>(pages.size()) * kv_page_message_bytes(to.layout);
  if (*sent != wire || !got->holds(pages.size(), to.layout.page_bytes())) {
    std::fprintf(stderr, "transfer: %lld bytes sent, %lld expected; %zu bytes received\n",
                 static_cast<long long>(*sent), static_cast<long long>(wire), got->bytes.size());
    return false;
  }
  if (check_bytes) {
    const size_t pb = static_cast<size_t>(to.layout.page_bytes());
    for (size_t k = 0; k < messages.size(); ++k) {
      if (std::memcmp(got->page(k, to.layout.page_bytes()), messages[k].data() + kKvPageHeaderBytes, pb) != 0) {
        std::fprintf(stderr, "transfer: page %zu differs from what was sent\n", k);
        return false;
      }
    }
  }
  *build_s = seconds(t0, t1);
  *transfer_s = seconds(t1, std::max(received_at, sent_at));
  return true;
}

bool run_conversion(Pools& pools, const Options& o, const Conversion& c, uint64_t& transfer_id, Row* row) {
  const KvLayout bf16 = with_format(o.shape, DType::kBF16, KvScaleMode::kNone);
  const KvLayout from = with_format(o.shape, c.from_dtype, c.from_mode);
  const KvLayout to = with_format(o.shape, c.to_dtype, c.to_mode);
  // Static scales sized for the source values (|x| up to ~10): [layer][k|v][kv_head].
  const std::vector<float> scales(static_cast<size_t>(o.shape.num_layers) * 2 * o.shape.num_kv_heads, 10.0f / 448.0f);
  const KvPageFormat bf16_format{bf16, {}};
  const KvPageFormat from_format{from, from.scale_mode == KvScaleMode::kStatic ? std::span<const float>(scales)
                                                                               : std::span<const float>()};
  const KvPageFormat to_format{to, to.scale_mode == KvScaleMode::kStatic ? std::span<const float>(scales)
                                                                         : std::span<const float>()};
  std::vector<std::vector<uint8_t>> source = random_bf16_pages(bf16, o.num_pages);
  if (!same_kv_format(bf16_format, from_format)) {  // e.g. an FP8 prefill cache: convert once, untimed
    for (std::vector<uint8_t>& p : source) {
      std::vector<uint8_t> q(static_cast<size_t>(from.page_bytes()));
      convert_kv_page(bf16_format, p.data(), from_format, from.page_size, q.data());
      p = std::move(q);
    }
  }
  std::vector<const uint8_t*> ptrs;
  for (const std::vector<uint8_t>& p : source) ptrs.push_back(p.data());
  std::vector<uint32_t> tags(static_cast<size_t>(o.num_pages));
  for (size_t k = 0; k < tags.size(); ++k) tags[k] = 0x100u + 7u * static_cast<uint32_t>(k);

  std::vector<double> builds, transfers;
  for (int i = 0; i < o.num_warmup + o.num_transfers; ++i) {
    double b = 0, t = 0;
    if (!transfer_once(pools, from_format, ptrs, to_format, transfer_id++, tags, i == 0, &b, &t)) return false;
    if (i < o.num_warmup) continue;
    builds.push_back(b);
    transfers.push_back(t);
  }
  // The receiver's checks on their own (they run inside KvReceiver::receive above).
  const uint64_t verify_id = transfer_id++;
  const std::vector<std::vector<uint8_t>> messages =
      build_page_messages(from_format, ptrs, o.num_pages * o.shape.page_size, to_format, verify_id, tags);
  std::vector<double> verifies;
  for (int i = 0; i < 5; ++i) {
    KvImportData data;
    const Clock::time_point t0 = Clock::now();
    for (size_t k = 0; k < messages.size(); ++k) {
      const Status s = verify_page_message(messages[k], verify_id, static_cast<uint32_t>(k),
                                           static_cast<uint32_t>(messages.size()), tags[k], to.page_bytes(), data);
      if (!s.is_ok()) {
        std::fprintf(stderr, "verify: %s\n", s.to_string().c_str());
        return false;
      }
    }
    verifies.push_back(seconds(t0, Clock::now()));
  }
  row->verify_s = median(verifies);
  row->payload_bytes_per_page = to.page_bytes();
  row->message_bytes_per_page = kv_page_message_bytes(to);
  row->build_s = median(builds);
  row->transfer_s = median(transfers);
  row->best_transfer_s = *std::min_element(transfers.begin(), transfers.end());
  return true;
}

// GB/s of writing freshly allocated memory for the first time (page faults included): every
// transfer writes three fresh copies of its payload (the sender's messages, the receiver's
// staging buffers, the verified KvImportData), so this bounds what a transfer can reach here.
double first_touch_gbps() {
  const size_t bytes = size_t{64} << 20;
  const Clock::time_point t0 = Clock::now();
  std::vector<uint8_t> v(bytes, 1);
  const Clock::time_point t1 = Clock::now();
  const volatile uint8_t keep = v[bytes / 2];  // the writes are observable
  (void)keep;
  return static_cast<double>(bytes) / seconds(t0, t1) / 1e9;
}

// The per-transfer cost that does not depend on the pages: the same calls with no pages
// (receiver and sender workers from their pools, or fresh ones with --fresh-workers: created,
// connected, flushed, destroyed). Median seconds, or a negative value on failure.
double fixed_cost_s(Pools& pools, const Options& o, uint64_t& transfer_id) {
  const KvPageFormat bf16{with_format(o.shape, DType::kBF16, KvScaleMode::kNone), {}};
  std::vector<double> times;
  for (int i = 0; i < o.num_warmup + o.num_transfers; ++i) {
    double b = 0, t = 0;
    if (!transfer_once(pools, bf16, {}, bf16, transfer_id++, {}, false, &b, &t)) return -1;
    if (i >= o.num_warmup) times.push_back(t);
  }
  return median(times);
}

bool parse_layout(const std::string& s, Options* o) {
  o->shape.page_size = 16;
  if (s == "fixture") {
    o->shape.num_layers = 4, o->shape.num_kv_heads = 4, o->shape.head_dim = 16;
  } else if (s == "large") {
    o->shape.num_layers = 24, o->shape.num_kv_heads = 4, o->shape.head_dim = 128;
  } else if (std::sscanf(s.c_str(), "%d,%d,%d", &o->shape.num_layers, &o->shape.num_kv_heads,
                         &o->shape.head_dim) != 3) {
    return false;
  }
  o->layout_name = s;
  return o->shape.num_layers > 0 && o->shape.num_kv_heads > 0 && o->shape.head_dim > 0;
}

int main_impl(int argc, char** argv) {
  Options o;
  parse_layout("fixture", &o);
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : "";
    if (a == "--tsv") {
      o.tsv = true;
      continue;
    }
    if (a == "--fresh-workers") {
      o.fresh_workers = true;
      continue;
    }
    ++i;
    if (a == "--layout" && parse_layout(v, &o)) continue;
    if (a == "--pages" && (o.num_pages = std::atoi(v)) > 0) continue;
    if (a == "--convert") {
      o.convert = v;
      continue;
    }
    if (a == "--transfers" && (o.num_transfers = std::atoi(v)) > 0) continue;
    if (a == "--warmup" && (o.num_warmup = std::atoi(v)) >= 0) continue;
    std::fprintf(stderr,
                 "usage: %s [--layout fixture|large|L,H,D] [--pages N] [--convert all|bf16-bf16|bf16-fp8|fp8-fp8|"
                 "bf16-fp8dyn] [--transfers N] [--warmup N] [--fresh-workers] [--tsv]\n",
                 argv[0]);
    return 2;
  }
  const char* tls = std::getenv("UCX_TLS");
  Result<std::unique_ptr<UcxContext>> ctx = UcxContext::create();
  if (!ctx.is_ok()) {
    std::fprintf(stderr, "%s\n", ctx.status().to_string().c_str());
    return 1;
  }
  const int page_size = o.shape.page_size;
  UcxWorkerPool::Limits limits;
  if (o.fresh_workers) limits.max_idle = 0;
  UcxWorkerPool decode_pool(**ctx, limits), prefill_pool(**ctx, limits);
  Pools pools{decode_pool, prefill_pool};
  uint64_t transfer_id = 1;
  const double fixed_s = fixed_cost_s(pools, o, transfer_id);
  if (fixed_s < 0) return 1;
  const double touch_gbps = first_touch_gbps();
  if (o.tsv) {
    std::printf(
        "tls\tworkers\tlayout\tpages\tfirst_touch_GBps\tfixed_ms\tconvert\tpayload_B_per_page\tmsg_B_per_page\t"
        "wire_B_per_token\tbuild_ms\tverify_ms\ttransfer_ms\tbest_transfer_ms\tpayload_GBps\twire_GBps\tpages_per_s\n");
  } else {
    std::printf("UCX_TLS=%s, %s UCX workers, layout %s (%d layers x %d KV heads x head_dim %d, %d tokens/page), %d pages, "
                "%d transfers (+%d warmup), medians; a transfer of no pages takes %.3f ms; fresh memory is written at "
                "%.3f GB/s\n",
                tls ? tls : "(unset)", o.fresh_workers ? "fresh" : "pooled", o.layout_name.c_str(), o.shape.num_layers, o.shape.num_kv_heads,
                o.shape.head_dim, page_size, o.num_pages, o.num_transfers, o.num_warmup, fixed_s * 1e3, touch_gbps);
    std::printf("%-12s %10s %10s %9s %9s %9s %9s %9s %12s %10s %10s\n", "convert", "payload/pg", "msg/pg", "hdr %",
                "wire/tok", "build ms", "verify ms", "xfer ms", "payload", "wire", "pages/s");
  }
  int failures = 0;
  for (const Conversion& c : kConversions) {
    if (o.convert != "all" && o.convert != c.name) continue;
    Row r;
    if (!run_conversion(pools, o, c, transfer_id, &r)) {
      ++failures;
      continue;
    }
    const double payload = static_cast<double>(r.payload_bytes_per_page) * o.num_pages;
    const double wire = static_cast<double>(r.message_bytes_per_page) * o.num_pages;
    const double wire_per_token = static_cast<double>(r.message_bytes_per_page) / page_size;
    if (o.tsv) {
      std::printf("%s\t%s\t%s\t%d\t%.3f\t%.3f\t%s\t%lld\t%lld\t%.1f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.0f\n",
                  tls ? tls : "", o.fresh_workers ? "fresh" : "pooled", o.layout_name.c_str(), o.num_pages, touch_gbps, fixed_s * 1e3, c.name,
                  static_cast<long long>(r.payload_bytes_per_page),
                  static_cast<long long>(r.message_bytes_per_page), wire_per_token, r.build_s * 1e3,
                  r.verify_s * 1e3, r.transfer_s * 1e3, r.best_transfer_s * 1e3, payload / r.transfer_s / 1e9,
                  wire / r.transfer_s / 1e9, o.num_pages / r.transfer_s);
    } else {
      std::printf("%-12s %10lld %10lld %8.2f%% %9.1f %9.3f %9.3f %9.3f %7.3f GB/s %5.3f GB/s %10.0f\n", c.name,
                  static_cast<long long>(r.payload_bytes_per_page), static_cast<long long>(r.message_bytes_per_page),
                  100.0 * static_cast<double>(kKvPageHeaderBytes) / static_cast<double>(r.message_bytes_per_page),
                  wire_per_token, r.build_s * 1e3, r.verify_s * 1e3, r.transfer_s * 1e3, payload / r.transfer_s / 1e9,
                  wire / r.transfer_s / 1e9, o.num_pages / r.transfer_s);
    }
    std::fflush(stdout);
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace densa::disagg

int main(int argc, char** argv) { return densa::disagg::main_impl(argc, argv); }
