// disagg: layout compatibility, page conversion against the reference quantization, and real
// UCX transfers between two workers of this process (tcp and shared memory), including the
// rejections (a write for a page whose tag changed, a digest mismatch), and the worker pools:
// transfers one after another on kept workers, and no worker that failed or holds a stray
// message is kept.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>

#include "core/dtype.h"
#include "disagg/disagg_error.h"
#include "disagg/kv_layout_descriptor.h"
#include "disagg/kv_page_convert.h"
#include "disagg/kv_receiver.h"
#include "disagg/kv_sender.h"
#include "disagg/kv_wire.h"
#include "kernels/reference/attention_ref.h"
#include "quant/fp8.h"

namespace densa::disagg {
namespace {

KvLayout layout(DType dtype, KvScaleMode mode, int page_size = 16) {
  KvLayout l;
  l.num_layers = 2;
  l.num_kv_heads = 3;
  l.head_dim = 16;
  l.page_size = page_size;
  l.dtype = dtype;
  l.scale_mode = mode;
  return l;
}

KvLayoutDescriptor descriptor(DType dtype, KvScaleMode mode, int page_size = 16) {
  KvLayoutDescriptor d{0x1234, layout(dtype, mode, page_size), {}};
  if (mode == KvScaleMode::kStatic) d.static_scales.assign(2 * 2 * 3, 0.01f);
  return d;
}

// A BF16 page with random rows (values around +-2, some large) in every slot.
std::vector<uint8_t> random_bf16_page(const KvLayout& l, uint32_t seed) {
  std::vector<uint8_t> page(static_cast<size_t>(l.page_bytes()));
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (size_t i = 0; i + 1 < page.size(); i += 2) {
    const uint16_t h = f32_to_bf16(n(rng) * (i % 37 == 0 ? 40.0f : 2.0f));
    std::memcpy(&page[i], &h, 2);
  }
  return page;
}

float bf16_at(const std::vector<uint8_t>& page, int64_t offset) {
  uint16_t h;
  std::memcpy(&h, &page[static_cast<size_t>(offset)], 2);
  return bf16_to_f32(h);
}

TEST(KvLayoutDescriptor, SameShapeDifferentPrecisionIsCompatible) {
  EXPECT_TRUE(check_compatible(descriptor(DType::kBF16, KvScaleMode::kNone),
                               descriptor(DType::kFP8E4M3, KvScaleMode::kDynamic))
                  .is_ok());
  EXPECT_TRUE(check_compatible(descriptor(DType::kBF16, KvScaleMode::kNone),
                               descriptor(DType::kFP8E4M3, KvScaleMode::kStatic))
                  .is_ok());
}

TEST(KvLayoutDescriptor, MismatchesAreRefusedNamingTheField) {
  const KvLayoutDescriptor a = descriptor(DType::kBF16, KvScaleMode::kNone);
  struct Case {
    KvLayoutDescriptor b;
    const char* field;
  };
  std::vector<Case> cases;
  cases.push_back({a, "different models"});
  cases.back().b.model_fingerprint = 99;
  cases.push_back({a, "num_layers"});
  cases.back().b.layout.num_layers = 3;
  cases.push_back({a, "num_kv_heads"});
  cases.back().b.layout.num_kv_heads = 4;
  cases.push_back({a, "head_dim"});
  cases.back().b.layout.head_dim = 32;
  cases.push_back({descriptor(DType::kBF16, KvScaleMode::kNone, 8), "page_size"});
  cases.push_back({descriptor(DType::kFP8E4M3, KvScaleMode::kStatic), "decode KV format"});
  cases.back().b.static_scales.pop_back();  // wrong number of static scales
  cases.push_back({descriptor(DType::kFP8E4M3, KvScaleMode::kNone), "decode KV format"});
  for (const Case& c : cases) {
    const Status s = check_compatible(a, c.b);
    ASSERT_FALSE(s.is_ok()) << c.field;
    EXPECT_EQ(disagg_error_code(s), kKvLayoutMismatch) << s.message();
    EXPECT_NE(s.message().find(c.field), std::string::npos) << s.message();
  }
}

TEST(KvPageConvert, Bf16ToFp8DynamicEqualsReferenceQuantization) {
  const KvLayout from = layout(DType::kBF16, KvScaleMode::kNone);
  const KvLayout to = layout(DType::kFP8E4M3, KvScaleMode::kDynamic);
  const std::vector<uint8_t> src = random_bf16_page(from, 7);
  std::vector<uint8_t> dst(static_cast<size_t>(to.page_bytes()), 0xab);
  const int num_tokens = 11;  // a partial page
  convert_kv_page({from, {}}, src.data(), {to, {}}, num_tokens, dst.data());
  for (int l = 0; l < 2; ++l)
    for (int kv = 0; kv < 2; ++kv)
      for (int h = 0; h < 3; ++h)
        for (int t = 0; t < 16; ++t) {
          float row[16];
          for (int d = 0; d < 16; ++d) row[d] = bf16_at(src, from.data_offset(l, kv, h, t) + 2 * d);
          float scale;
          std::memcpy(&scale, &dst[to.scale_offset(l, kv, h, t)], 4);
          const float want_scale = t < num_tokens ? ref::kv_fp8_dynamic_scale(row, 16) : 0.0f;
          ASSERT_EQ(scale, want_scale) << l << kv << h << t;
          for (int d = 0; d < 16; ++d) {
            const uint8_t want = t < num_tokens ? fp8_e4m3_from_f32(row[d] / want_scale) : 0;
            ASSERT_EQ(dst[to.data_offset(l, kv, h, t) + d], want) << l << kv << h << t << " d" << d;
          }
        }
}

// MLA + DSA pages: one latent row per (layer, slot), then the indexer's FP8 keys and scales.
KvLayout latent_layout(DType dtype, KvScaleMode mode) {
  KvLayout l;
  l.num_layers = 2;
  l.page_size = 8;
  l.latent_dim = 40;  // kv_lora_rank 32 + rope 8
  l.index_dim = 16;
  l.dtype = dtype;
  l.scale_mode = mode;
  return l;
}

TEST(KvPageConvert, LatentBf16ToFp8DynamicQuantizesEachRowAndKeepsTheIndexKeys) {
  const KvLayout from = latent_layout(DType::kBF16, KvScaleMode::kNone);
  const KvLayout to = latent_layout(DType::kFP8E4M3, KvScaleMode::kDynamic);
  std::vector<uint8_t> src = random_bf16_page(from, 11);
  for (int l = 0; l < 2; ++l) {  // index keys: arbitrary codes and a positive scale
    for (int t = 0; t < 8; ++t) {
      for (int d = 0; d < 16; ++d) src[static_cast<size_t>(from.index_key_offset(l, t) + d)] = static_cast<uint8_t>(7 * t + d + l);
      const float sc = 0.5f + static_cast<float>(t + l);
      std::memcpy(&src[static_cast<size_t>(from.index_scale_offset(l, t))], &sc, 4);
    }
  }
  std::vector<uint8_t> dst(static_cast<size_t>(to.page_bytes()), 0xab);
  const int num_tokens = 5;
  convert_kv_page({from, {}}, src.data(), {to, {}}, num_tokens, dst.data());
  for (int l = 0; l < 2; ++l) {
    for (int t = 0; t < 8; ++t) {
      float row[40];
      for (int d = 0; d < 40; ++d) row[d] = bf16_at(src, from.row_offset(l, 0, t) + 2 * d);
      float scale;
      std::memcpy(&scale, &dst[static_cast<size_t>(to.row_scale_offset(l, 0, t))], 4);
      const float want_scale = t < num_tokens ? ref::kv_fp8_dynamic_scale(row, 40) : 0.0f;
      ASSERT_EQ(scale, want_scale) << l << " " << t;
      for (int d = 0; d < 40; ++d) {
        const uint8_t want = t < num_tokens ? fp8_e4m3_from_f32(row[d] / want_scale) : 0;
        ASSERT_EQ(dst[static_cast<size_t>(to.row_offset(l, 0, t) + d)], want) << l << " " << t << " d" << d;
      }
      for (int d = 0; d < 16; ++d) {
        const uint8_t want = t < num_tokens ? src[static_cast<size_t>(from.index_key_offset(l, t) + d)] : 0;
        ASSERT_EQ(dst[static_cast<size_t>(to.index_key_offset(l, t) + d)], want) << "index key " << l << " " << t;
      }
      ASSERT_EQ(std::memcmp(&dst[static_cast<size_t>(to.index_scale_offset(l, t))],
                            t < num_tokens ? &src[static_cast<size_t>(from.index_scale_offset(l, t))] : std::vector<uint8_t>(4, 0).data(), 4),
                0) << "index scale " << l << " " << t;
    }
  }
}

TEST(KvLayoutDescriptor, LatentLayoutsTravelAndMustAgree) {
  KvLayoutDescriptor a{0x1234, latent_layout(DType::kBF16, KvScaleMode::kNone), {}};
  KvLayoutDescriptor b{0x1234, latent_layout(DType::kFP8E4M3, KvScaleMode::kDynamic), {}};
  EXPECT_TRUE(check_compatible(a, b).is_ok());
  auto back = descriptor_from_json(descriptor_to_json(b));
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(back->layout.latent_dim, 40);
  EXPECT_EQ(back->layout.index_dim, 16);
  EXPECT_EQ(back->layout.page_bytes(), b.layout.page_bytes());
  KvLayoutDescriptor c = b;
  c.layout.latent_dim = 48;
  EXPECT_NE(check_compatible(a, c).message().find("latent_dim"), std::string::npos);
  c = b;
  c.layout.index_dim = 0;
  EXPECT_NE(check_compatible(a, c).message().find("index_dim"), std::string::npos);
  // Static latent scales split each row at kv_lora_rank, which the layout does not carry:
  // such pages move only unconverted.
  KvLayoutDescriptor st{0x1234, latent_layout(DType::kFP8E4M3, KvScaleMode::kStatic), std::vector<float>(4, 0.02f)};
  const Status s = check_compatible(a, st);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("static"), std::string::npos) << s.message();
  EXPECT_TRUE(check_compatible(st, st).is_ok());
}

TEST(KvPageConvert, Bf16ToFp8StaticUsesTheReceiversScales) {
  const KvLayout from = layout(DType::kBF16, KvScaleMode::kNone);
  const KvLayout to = layout(DType::kFP8E4M3, KvScaleMode::kStatic);
  std::vector<float> scales(12);
  for (size_t i = 0; i < scales.size(); ++i) scales[i] = 0.003f * (1 + i);
  const std::vector<uint8_t> src = random_bf16_page(from, 9);
  std::vector<uint8_t> dst(static_cast<size_t>(to.page_bytes()));
  convert_kv_page({from, {}}, src.data(), {to, scales}, 16, dst.data());
  ASSERT_EQ(dst.size() * 2, src.size()) << "static fp8 pages are half of bf16";
  for (int l = 0; l < 2; ++l)
    for (int kv = 0; kv < 2; ++kv)
      for (int h = 0; h < 3; ++h)
        for (int t = 0; t < 16; ++t)
          for (int d = 0; d < 16; ++d) {
            const float x = bf16_at(src, from.data_offset(l, kv, h, t) + 2 * d);
            const float s = scales[(l * 2 + kv) * 3 + h];
            ASSERT_EQ(dst[to.data_offset(l, kv, h, t) + d], fp8_e4m3_from_f32(x / s));
          }
}

TEST(KvPageConvert, SameFormatCopiesValidSlotsAndZeroesTheRest) {
  const KvLayout l = layout(DType::kBF16, KvScaleMode::kNone);
  const std::vector<uint8_t> src = random_bf16_page(l, 3);
  std::vector<uint8_t> dst(src.size(), 0xff);
  convert_kv_page({l, {}}, src.data(), {l, {}}, 5, dst.data());
  for (int t = 0; t < 16; ++t) {
    const int64_t off = l.data_offset(1, 1, 2, t);
    for (int b = 0; b < 32; ++b) EXPECT_EQ(dst[off + b], t < 5 ? src[off + b] : 0) << t;
  }
}

// ---- real UCX transfers ----

struct Transfer {
  std::vector<std::vector<uint8_t>> messages;
  std::vector<uint32_t> tags;
  int64_t page_bytes = 0;
};

Transfer make_transfer(uint64_t transfer_id, int num_pages) {
  const KvLayout from = layout(DType::kBF16, KvScaleMode::kNone);
  const KvLayout to = layout(DType::kFP8E4M3, KvScaleMode::kDynamic);
  std::vector<std::vector<uint8_t>> pages;
  std::vector<const uint8_t*> ptrs;
  Transfer t;
  for (int k = 0; k < num_pages; ++k) {
    pages.push_back(random_bf16_page(from, 100 + k));
    t.tags.push_back(0x1000u + 17u * k);
  }
  for (auto& p : pages) ptrs.push_back(p.data());
  t.messages = build_page_messages({from, {}}, ptrs, num_pages * 16 - 3, {to, {}}, transfer_id, t.tags);
  t.page_bytes = to.page_bytes();
  return t;
}

// One transfer between a decode-side pool (receivers) and a prefill-side pool (senders), as
// the two workers run it: `sent` (t's messages, possibly tampered with) goes to a receiver
// expecting t; the receiver goes back to its pool after the sender has flushed.
struct PooledResult {
  Result<KvImportData> got = Status(StatusCode::kUnavailable, "not run");
  Status sent;
  std::vector<uint8_t> receiver_address;
  bool recycled = false;
};

PooledResult pooled_transfer(UcxWorkerPool& decode, UcxWorkerPool& prefill, const Transfer& t,
                             const std::vector<std::vector<uint8_t>>& sent, uint64_t id) {
  PooledResult r;
  Result<std::unique_ptr<KvReceiver>> receiver = KvReceiver::create(decode, id, t.tags, t.page_bytes);
  if (!receiver.is_ok()) {
    r.got = receiver.status();
    return r;
  }
  r.receiver_address = (*receiver)->address();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::thread sender([&] { r.sent = send_page_messages(prefill, {id, r.receiver_address, t.tags}, sent, deadline).status(); });
  r.got = (*receiver)->receive(deadline, [] { return false; });
  std::atomic<bool> joined{false};
  std::thread progress([&] {
    while (!joined.load()) (*receiver)->progress();
  });
  sender.join();
  joined = true;
  progress.join();
  if (r.got.is_ok() && r.sent.is_ok()) r.recycled = (*receiver)->recycle();
  return r;
}

// Receives `t` in this thread while another thread sends `sent` (the same pages, possibly
// tampered with) to this worker, on a fresh context and pool.
Result<KvImportData> run_transfer(const char* tls, const Transfer& t, const std::vector<std::vector<uint8_t>>& sent,
                                  uint64_t transfer_id, Status* send_status) {
  setenv("UCX_TLS", tls, 1);
  Result<std::unique_ptr<UcxContext>> ctx = UcxContext::create();
  EXPECT_TRUE(ctx.is_ok()) << ctx.status().to_string();
  if (!ctx.is_ok()) return ctx.status();
  UcxWorkerPool pool(**ctx);
  PooledResult r = pooled_transfer(pool, pool, t, sent, transfer_id);
  *send_status = r.sent;
  return std::move(r.got);
}

class KvTransferOverUcx : public ::testing::TestWithParam<const char*> {};

TEST_P(KvTransferOverUcx, PagesArriveIntactAndVerified) {
  const uint64_t id = 0xabc123;
  const Transfer t = make_transfer(id, 5);
  Status send_status;
  Result<KvImportData> got = run_transfer(GetParam(), t, t.messages, id, &send_status);
  ASSERT_TRUE(got.is_ok()) << got.status().to_string();
  EXPECT_TRUE(send_status.is_ok()) << send_status.to_string();
  ASSERT_EQ(got->digests.size(), 5u);
  ASSERT_TRUE(got->holds(5, t.page_bytes));
  for (size_t k = 0; k < 5; ++k) {
    EXPECT_EQ(std::memcmp(got->page(k, t.page_bytes), t.messages[k].data() + kKvPageHeaderBytes,
                          static_cast<size_t>(t.page_bytes)),
              0)
        << "page " << k;
    EXPECT_EQ(got->tags[k], t.tags[k]);
    EXPECT_EQ(got->digests[k], payload_digest({got->page(k, t.page_bytes), static_cast<size_t>(t.page_bytes)}));
  }
}

TEST_P(KvTransferOverUcx, WriteForAPageWhoseTagChangedIsRejected) {
  const uint64_t id = 0xabc124;
  const Transfer t = make_transfer(id, 3);
  // The sender writes page 1 for a tag the receiver no longer holds it under.
  std::vector<uint32_t> stale = t.tags;
  stale[1] += 1;
  Transfer sent = t;
  {
    const KvLayout from = layout(DType::kBF16, KvScaleMode::kNone);
    const KvLayout to = layout(DType::kFP8E4M3, KvScaleMode::kDynamic);
    std::vector<std::vector<uint8_t>> pages;
    std::vector<const uint8_t*> ptrs;
    for (int k = 0; k < 3; ++k) pages.push_back(random_bf16_page(from, 100 + k));
    for (auto& p : pages) ptrs.push_back(p.data());
    sent.messages = build_page_messages({from, {}}, ptrs, 3 * 16 - 3, {to, {}}, id, stale);
  }
  Status send_status;
  Result<KvImportData> got = run_transfer(GetParam(), t, sent.messages, id, &send_status);
  ASSERT_FALSE(got.is_ok());
  EXPECT_EQ(disagg_error_code(got.status()), kKvTransferFailed);
  EXPECT_NE(got.status().message().find("write rejected"), std::string::npos) << got.status().message();
}

TEST_P(KvTransferOverUcx, DigestMismatchIsRejected) {
  const uint64_t id = 0xabc125;
  const Transfer t = make_transfer(id, 4);
  std::vector<std::vector<uint8_t>> corrupt = t.messages;
  corrupt[2][kKvPageHeaderBytes + 100] ^= 0x10;  // one bit flipped after the digest was taken
  Status send_status;
  Result<KvImportData> got = run_transfer(GetParam(), t, corrupt, id, &send_status);
  ASSERT_FALSE(got.is_ok());
  EXPECT_NE(got.status().message().find("digest mismatch"), std::string::npos) << got.status().message();
}

INSTANTIATE_TEST_SUITE_P(Transports, KvTransferOverUcx, ::testing::Values("tcp", "sm,self"),
                         [](const auto& info) { return std::string(info.param[0] == 't' ? "tcp" : "shared_memory"); });

TEST(KvTransferOverUcxFailure, ReceiverTimesOutWhenNothingIsSent) {
  setenv("UCX_TLS", "tcp", 1);
  Result<std::unique_ptr<UcxContext>> ctx = UcxContext::create();
  ASSERT_TRUE(ctx.is_ok());
  UcxWorkerPool pool(**ctx);
  Result<std::unique_ptr<KvReceiver>> receiver = KvReceiver::create(pool, 5, {1, 2}, 1024);
  ASSERT_TRUE(receiver.is_ok());
  Result<KvImportData> got =
      (*receiver)->receive(std::chrono::steady_clock::now() + std::chrono::milliseconds(200), [] { return false; });
  ASSERT_FALSE(got.is_ok());
  EXPECT_EQ(disagg_error_code(got.status()), kKvTransferFailed);
  EXPECT_NE(got.status().message().find("timed out"), std::string::npos) << got.status().message();
}

// ---- pooled UCX workers ----

void expect_pages(const PooledResult& r, const Transfer& t) {
  ASSERT_TRUE(r.got.is_ok()) << r.got.status().to_string();
  ASSERT_TRUE(r.sent.is_ok()) << r.sent.to_string();
  ASSERT_TRUE(r.got->holds(t.messages.size(), t.page_bytes));
  for (size_t k = 0; k < t.messages.size(); ++k) {
    EXPECT_EQ(std::memcmp(r.got->page(k, t.page_bytes), t.messages[k].data() + kKvPageHeaderBytes,
                          static_cast<size_t>(t.page_bytes)),
              0)
        << "page " << k;
  }
}

TEST_P(KvTransferOverUcx, PooledWorkersCarryOneTransferAfterAnother) {
  setenv("UCX_TLS", GetParam(), 1);
  Result<std::unique_ptr<UcxContext>> ctx = UcxContext::create();
  ASSERT_TRUE(ctx.is_ok()) << ctx.status().to_string();
  UcxWorkerPool decode(**ctx), prefill(**ctx);
  std::vector<uint8_t> first_address;
  for (uint64_t i = 0; i < 3; ++i) {
    const uint64_t id = 0xd00 + i;
    const Transfer t = make_transfer(id, 3 + static_cast<int>(i));  // different page contents each time
    const PooledResult r = pooled_transfer(decode, prefill, t, t.messages, id);
    expect_pages(r, t);
    EXPECT_TRUE(r.recycled) << "transfer " << i;
    if (i == 0) first_address = r.receiver_address;
    EXPECT_EQ(r.receiver_address, first_address) << "transfer " << i << " got a fresh receiving worker";
  }
  const UcxWorkerPool::Counts d = decode.counts(), p = prefill.counts();
  EXPECT_EQ(d.created, 1u);
  EXPECT_EQ(d.reused, 2u);
  EXPECT_EQ(d.discarded, 0u);
  EXPECT_EQ(d.idle, 1u);
  EXPECT_EQ(p.created, 1u) << "the sender's connection to the receiver is kept";
  EXPECT_EQ(p.reused, 2u);
  EXPECT_EQ(p.idle, 1u);
}

// A message nobody asked for (here: a page the transfer does not have) waits unmatched in the
// receiving worker. It could never match a later transfer's tags, but the worker is not
// pooled again: the next transfer gets a fresh worker and its own pages intact.
TEST_P(KvTransferOverUcx, AWorkerHoldingAnUnmatchedMessageIsNotReused) {
  setenv("UCX_TLS", GetParam(), 1);
  Result<std::unique_ptr<UcxContext>> ctx = UcxContext::create();
  ASSERT_TRUE(ctx.is_ok()) << ctx.status().to_string();
  UcxWorkerPool decode(**ctx), prefill(**ctx);
  const uint64_t id = 0xe00;
  const Transfer t = make_transfer(id, 2);
  Result<std::unique_ptr<UcxWorker>> receiving = decode.acquire();
  ASSERT_TRUE(receiving.is_ok());
  Result<std::unique_ptr<UcxWorker>> sending = prefill.acquire((*receiving)->address());
  ASSERT_TRUE(sending.is_ok()) << sending.status().to_string();
  // Page 0 is asked for and arrives; "page 5" of the same transfer was never asked for.
  std::vector<uint8_t> buffer(t.messages[0].size() + 1);
  ASSERT_TRUE((*receiving)->post_recv(page_message_tag(id, 0), buffer).is_ok());
  ASSERT_TRUE((*sending)->post_send(page_message_tag(id, 0), t.messages[0]).is_ok());
  ASSERT_TRUE((*sending)->post_send(page_message_tag(id, 5), t.messages[1]).is_ok());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::atomic<bool> sent{false};
  std::thread progress([&] {
    while (!sent.load()) (*receiving)->progress();
  });
  EXPECT_TRUE((*sending)->wait_all(deadline, [] { return false; }).is_ok());
  EXPECT_TRUE((*sending)->flush_endpoint(deadline).is_ok());
  sent = true;
  progress.join();
  ASSERT_TRUE((*receiving)->wait_all(deadline, [] { return false; }).is_ok());
  bool unmatched = false;
  while (!unmatched && std::chrono::steady_clock::now() < deadline) unmatched = (*receiving)->has_unmatched_message();
  ASSERT_TRUE(unmatched) << "the stray message never reached the receiving worker";
  const std::vector<uint8_t> stale_address = (*receiving)->address();
  EXPECT_FALSE(decode.release(std::move(receiving).value())) << "a worker holding a stray message was pooled";
  EXPECT_TRUE(prefill.release(std::move(sending).value())) << "the sender itself completed cleanly";
  EXPECT_EQ(decode.counts().discarded, 1u);
  EXPECT_EQ(decode.counts().idle, 0u);

  const uint64_t next = 0xe01;
  const Transfer u = make_transfer(next, 2);
  const PooledResult r = pooled_transfer(decode, prefill, u, u.messages, next);
  expect_pages(r, u);
  EXPECT_NE(r.receiver_address, stale_address);
  EXPECT_EQ(decode.counts().created, 2u);
  EXPECT_EQ(prefill.counts().created, 2u) << "a new receiver address needs a new connection";
}

// A receive that timed out leaves its receives posted: the worker is destroyed, never pooled,
// so whatever arrives late for that transfer has no worker to land in.
TEST(KvTransferOverUcxFailure, ATimedOutReceiverIsNotPooled) {
  setenv("UCX_TLS", "tcp", 1);
  Result<std::unique_ptr<UcxContext>> ctx = UcxContext::create();
  ASSERT_TRUE(ctx.is_ok());
  UcxWorkerPool pool(**ctx);
  Result<std::unique_ptr<KvReceiver>> receiver = KvReceiver::create(pool, 6, {1, 2}, 1024);
  ASSERT_TRUE(receiver.is_ok());
  const std::vector<uint8_t> address = (*receiver)->address();
  EXPECT_FALSE((*receiver)->receive(std::chrono::steady_clock::now() + std::chrono::milliseconds(100), [] {
                             return false;
                           }).is_ok());
  EXPECT_FALSE((*receiver)->recycle());
  EXPECT_EQ(pool.counts().discarded, 1u);
  EXPECT_EQ(pool.counts().idle, 0u);
  // A receiver dropped without recycle() is not pooled either.
  Result<std::unique_ptr<KvReceiver>> second = KvReceiver::create(pool, 7, {1}, 1024);
  ASSERT_TRUE(second.is_ok());
  EXPECT_NE((*second)->address(), address);
  second->reset();
  EXPECT_EQ(pool.counts().created, 2u);
  EXPECT_EQ(pool.counts().discarded, 2u);
  EXPECT_EQ(pool.counts().idle, 0u);
}

size_t open_fds() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

// Waits up to 5 s for `pool` to hold no worker at all.
bool drained(const UcxWorkerPool& pool) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (pool.counts().live() != 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return pool.counts().live() == 0;
}

// Pooled workers hold fds: a receiving worker one socket per sender that connected to it over
// tcp, a restarted (dead) sender's included. With no transfer coming, the sweeper closes the
// idle workers past max_idle_age, and the process is back to the fds it had before the burst:
// what the soak's quiet-point fd check (docs/performance/soak.md) relies on.
TEST(UcxWorkerPool, IdleWorkersAreClosedWithoutATransferAndTheirFdsComeBack) {
  setenv("UCX_TLS", "tcp", 1);
  Result<std::unique_ptr<UcxContext>> ctx = UcxContext::create();
  ASSERT_TRUE(ctx.is_ok()) << ctx.status().to_string();
  UcxWorkerPool::Limits limits;
  limits.max_idle_age = std::chrono::milliseconds(200);
  UcxWorkerPool decode(**ctx, limits);
  // One transfer first, so whatever UCX sets up once per context is in the baseline.
  {
    UcxWorkerPool prefill(**ctx, limits);
    const Transfer t = make_transfer(0xf00, 2);
    expect_pages(pooled_transfer(decode, prefill, t, t.messages, 0xf00), t);
  }
  ASSERT_TRUE(drained(decode));
  const size_t baseline = open_fds();

  // Transfers from two "peer lives" (a sender pool that then goes away, as a killed prefill
  // worker's does), then a burst: three receiving workers at once, each connected to.
  uint64_t id = 0xf10;
  for (int life = 0; life < 2; ++life) {
    UcxWorkerPool prefill(**ctx, limits);
    for (int k = 0; k < 3; ++k) {
      const Transfer t = make_transfer(++id, 2);
      PooledResult r = pooled_transfer(decode, prefill, t, t.messages, id);
      expect_pages(r, t);
    }
  }
  {
    UcxWorkerPool prefill(**ctx, limits);
    std::vector<std::unique_ptr<UcxWorker>> held;
    for (int k = 0; k < 3; ++k) held.push_back(std::move(decode.acquire()).value());
    for (auto& w : held) {
      Result<std::unique_ptr<UcxWorker>> s = prefill.acquire(w->address());
      ASSERT_TRUE(s.is_ok()) << s.status().to_string();
      EXPECT_TRUE(prefill.release(std::move(s).value()));
    }
    for (auto& w : held) EXPECT_TRUE(decode.release(std::move(w)));
    EXPECT_EQ(decode.counts().idle, 3u);
    EXPECT_GT(open_fds(), baseline) << "three idle workers hold no fd: the check below proves nothing";
  }
  // No acquire or release from here on: only the sweeper can close them.
  ASSERT_TRUE(drained(decode)) << decode.counts().idle << " idle workers left";
  EXPECT_EQ(decode.counts().expired, decode.counts().created);
  EXPECT_EQ(open_fds(), baseline);
}


TEST(UcxWorkerPool, KeepsAtMostMaxIdleAndDropsOldOnes) {
  setenv("UCX_TLS", "tcp", 1);
  Result<std::unique_ptr<UcxContext>> ctx = UcxContext::create();
  ASSERT_TRUE(ctx.is_ok());
  UcxWorkerPool::Limits limits;
  limits.max_idle = 2;
  UcxWorkerPool pool(**ctx, limits);
  std::vector<std::unique_ptr<UcxWorker>> held;
  for (int i = 0; i < 3; ++i) {
    Result<std::unique_ptr<UcxWorker>> w = pool.acquire();
    ASSERT_TRUE(w.is_ok());
    held.push_back(std::move(w).value());
  }
  const std::vector<uint8_t> oldest = held[0]->address(), newest = held[2]->address();
  for (auto& w : held) EXPECT_TRUE(pool.release(std::move(w)));
  EXPECT_EQ(pool.counts().idle, 2u) << "the oldest idle worker goes past max_idle";
  Result<std::unique_ptr<UcxWorker>> again = pool.acquire();
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ((*again)->address(), newest) << "the most recently used worker is handed out first";
  EXPECT_NE((*again)->address(), oldest);
  EXPECT_EQ(pool.counts().reused, 1u);

  UcxWorkerPool::Limits short_lived;
  short_lived.max_idle_age = std::chrono::milliseconds(0);
  UcxWorkerPool expiring(**ctx, short_lived);
  Result<std::unique_ptr<UcxWorker>> w = expiring.acquire();
  ASSERT_TRUE(w.is_ok());
  EXPECT_TRUE(expiring.release(std::move(w).value()));
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ASSERT_TRUE(expiring.acquire().is_ok());
  EXPECT_EQ(expiring.counts().created, 2u) << "an idle worker past max_idle_age is closed, not handed out";
  EXPECT_EQ(expiring.counts().reused, 0u);
}

}  // namespace
}  // namespace densa::disagg
