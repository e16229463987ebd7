// Engine export / import, the engine half of disaggregation: a prefill engine's exported
// pages, converted and digested as the sender does, adopted by a decode engine. Same formats
// reproduce colocated greedy output token for token; a rejected import (tag changed, digest
// mismatch, failed or cancelled transfer) fails only its request and leaves the pool
// audit-clean with no page in use.
#include <gtest/gtest.h>

#include "disagg/kv_layout_descriptor.h"
#include "disagg/kv_page_convert.h"
#include "disagg/kv_wire.h"
#include "engine/engine_test_util.h"
#include "quality/kv_calibration.h"

namespace densa::disagg {
namespace {

using testing::Collected;
using testing::drain;
using testing::greedy_request;
using testing::moe_f16;
using testing::validation_ids;

std::unique_ptr<Engine> make_engine(DType kv_dtype, std::optional<KvScales> scales = std::nullopt) {
  EngineConfig c;
  c.kv_dtype = kv_dtype;
  c.kv_scales = std::move(scales);
  c.audit_every_step = true;
  c.num_threads = 2;
  return Engine::create(moe_f16(), c).value();
}

// Runs the prompt's first n-1 tokens on `prefill` and returns its pinned export.
std::shared_ptr<const KvExport> export_prompt(Engine& prefill, const std::vector<TokenId>& prompt) {
  GenerateRequest g;
  g.prompt.assign(prompt.begin(), prompt.end() - 1);
  g.max_new_tokens = 1;
  g.ignore_eos = true;
  g.export_kv = true;
  const Collected c = drain(*prefill.submit(g).value());
  EXPECT_EQ(c.finish, FinishReason::kLength);
  return c.events.back().kv_export;
}

// What the receiver hands the engine: pages converted into `decode`'s format, with digests
// and the reservation's tags. `strided`: the pages sit in a receive buffer between other bytes
// (a 48-byte header before each, one spare byte after), as KvReceiver hands them over.
KvImportData import_data(const KvExport& x, const Engine& decode, const KvImport& im, bool strided = false) {
  const KvLayout to = decode.kv_layout();
  const std::vector<float> scales = decode.kv_static_scales();
  KvImportData d;
  std::vector<uint8_t> page(static_cast<size_t>(to.page_bytes()));
  const std::vector<uint8_t> header(48, 0xee);
  if (strided) {
    d.offset = header.size();
    d.stride = header.size() + page.size() + 1;
  }
  for (size_t k = 0; k < x.pages.size(); ++k) {
    const int32_t tokens = std::clamp<int32_t>(x.num_tokens - static_cast<int32_t>(k) * to.page_size, 0, to.page_size);
    convert_kv_page({x.layout, x.static_scales}, x.data[k], {to, scales}, tokens, page.data());
    if (strided) d.bytes.insert(d.bytes.end(), header.begin(), header.end());
    d.bytes.insert(d.bytes.end(), page.begin(), page.end());
    if (strided) d.bytes.push_back(0xee);
    d.digests.push_back(payload_digest(page));
    d.tags.push_back(im.tags[k]);
  }
  return d;
}

// The stats snapshot is published at the end of the engine turn that changed it; audit()
// runs on the engine thread, so after it returns the snapshot is at most one turn behind.
EngineStats settled_stats(Engine& e) {
  EXPECT_TRUE(e.audit().is_ok());
  EXPECT_TRUE(e.audit().is_ok());  // a second turn: the first one's snapshot is published
  return e.stats();
}

void expect_idle_and_clean(Engine& e) {
  const Status audit = e.audit();
  EXPECT_TRUE(audit.is_ok()) << audit.to_string();
  const EngineStats s = settled_stats(e);
  EXPECT_EQ(s.kv_pages_used, 0);
  EXPECT_EQ(s.kv_pages_pinned, 0);
}

TEST(KvImport, SameFormatImportEqualsColocatedGreedy) {
  auto prefill = make_engine(DType::kBF16);
  auto decode = make_engine(DType::kBF16);
  auto colocated = make_engine(DType::kBF16);
  const std::vector<int32_t> text = validation_ids("tinystories-mixtral-3.6m");
  for (int len : {1, 15, 16, 17, 40}) {  // page boundaries on both sides of the last token
    GenerateRequest r = greedy_request(text, 100 + len, len, 24);
    r.num_top_logprobs = 1;
    const Collected want = drain(*colocated->submit(r).value());
    std::shared_ptr<const KvExport> x = export_prompt(*prefill, r.prompt);
    ASSERT_TRUE(x);
    ASSERT_EQ(x->num_tokens, len);
    auto [im, stream] = decode->begin_import(r, len).value();
    ASSERT_EQ(im.pages.size(), x->pages.size());
    const bool strided = len % 2 == 1;
    decode->finish_import(im.id, import_data(*x, *decode, im, strided));
    prefill->release_export(x->id);
    const Collected got = drain(*stream);
    EXPECT_EQ(got.tokens, want.tokens) << "prompt of " << len + 1 << " tokens" << (strided ? ", strided" : "");
    for (size_t i = 0; i < std::min(got.events.size(), want.events.size()); ++i)
      EXPECT_EQ(got.events[i].logprob, want.events[i].logprob) << i;
    EXPECT_EQ(got.finish, want.finish);
    // The timing breakdown names the transfer as its own stage; colocated has none.
    ASSERT_TRUE(got.events.back().timeline.has_value());
    ASSERT_TRUE(want.events.back().timeline.has_value());
    const RequestTimeline& t = *got.events.back().timeline;
    EXPECT_GT(t.kv_transfer_us, 0.0);
    EXPECT_EQ(want.events.back().timeline->kv_transfer_us, 0.0);
    EXPECT_GE(t.queue_us, 0.0);
    EXPECT_LE(t.queue_us + t.kv_transfer_us + t.prefill_us() + t.decode_us(), t.total_us + 1.0);
  }
  expect_idle_and_clean(*prefill);
  expect_idle_and_clean(*decode);
}

TEST(KvImport, Bf16PrefillIntoFp8StaticDecode) {
  ThreadPool pool(2);
  const KvScales scales = calibrate_kv_scales(moe_f16(), validation_ids("tinystories-mixtral-3.6m"), {}, &pool);
  auto prefill = make_engine(DType::kBF16);
  auto decode = make_engine(DType::kFP8E4M3, scales);
  ASSERT_EQ(decode->kv_layout().scale_mode, KvScaleMode::kStatic);
  ASSERT_EQ(decode->kv_static_scales(), scales.values);
  const std::vector<int32_t> text = validation_ids("tinystories-mixtral-3.6m");
  GenerateRequest r = greedy_request(text, 0, 40, 16);
  std::shared_ptr<const KvExport> x = export_prompt(*prefill, r.prompt);
  auto [im, stream] = decode->begin_import(r, 40).value();
  KvImportData d = import_data(*x, *decode, im);
  EXPECT_EQ(d.bytes.size() * 2, x->pages.size() * static_cast<size_t>(x->layout.page_bytes()))
      << "static fp8 pages are half the bytes of bf16";
  decode->finish_import(im.id, std::move(d));
  prefill->release_export(x->id);
  const Collected got = drain(*stream);
  EXPECT_EQ(got.finish, FinishReason::kLength);
  EXPECT_EQ(got.tokens.size(), 16u);
  expect_idle_and_clean(*prefill);
  expect_idle_and_clean(*decode);
}

struct Tamper {
  const char* name;
  void (*apply)(KvImportData&);
  const char* message;
};

class KvImportRejected : public ::testing::TestWithParam<Tamper> {};

TEST_P(KvImportRejected, FailsOnlyThatRequestAndFreesItsPages) {
  auto prefill = make_engine(DType::kBF16);
  auto decode = make_engine(DType::kBF16);
  const std::vector<int32_t> text = validation_ids("tinystories-mixtral-3.6m");
  GenerateRequest bystander = greedy_request(text, 500, 20, 40);
  auto other = decode->submit(bystander).value();
  GenerateRequest r = greedy_request(text, 0, 35, 8);
  std::shared_ptr<const KvExport> x = export_prompt(*prefill, r.prompt);
  auto [im, stream] = decode->begin_import(r, 35).value();
  EXPECT_GT(settled_stats(*decode).kv_pages_pinned, 0);
  KvImportData d = import_data(*x, *decode, im);
  GetParam().apply(d);
  decode->finish_import(im.id, std::move(d));
  prefill->release_export(x->id);
  const Collected got = drain(*stream);
  EXPECT_EQ(got.finish, FinishReason::kError);
  EXPECT_TRUE(got.tokens.empty());
  EXPECT_NE(got.events.back().error.message().find(GetParam().message), std::string::npos)
      << got.events.back().error.message();
  EXPECT_EQ(drain(*other).finish, FinishReason::kLength) << "the other request is untouched";
  expect_idle_and_clean(*decode);
  expect_idle_and_clean(*prefill);
}

INSTANTIATE_TEST_SUITE_P(
    Tampers, KvImportRejected,
    ::testing::Values(Tamper{"TagChanged", [](KvImportData& d) { d.tags[1] ^= 0x40; }, "write rejected"},
                      Tamper{"DigestMismatch", [](KvImportData& d) { d.bytes[d.bytes.size() / 2] ^= 1; }, "digest"},
                      Tamper{"TruncatedBytes", [](KvImportData& d) { d.bytes.pop_back(); }, "pages got"},
                      Tamper{"MissingPage",
                             [](KvImportData& d) {
                               d.digests.pop_back();
                               d.tags.pop_back();
                             },
                             "pages got"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(KvImport, FailedOrCancelledTransferFreesThePages) {
  auto decode = make_engine(DType::kBF16);
  const std::vector<int32_t> text = validation_ids("tinystories-mixtral-3.6m");
  GenerateRequest r = greedy_request(text, 0, 50, 8);
  auto [a, sa] = decode->begin_import(r, 50).value();
  auto [b, sb] = decode->begin_import(r, 50).value();
  EXPECT_EQ(settled_stats(*decode).kv_pages_pinned, static_cast<int32_t>(a.pages.size() + b.pages.size()));
  decode->fail_import(a.id, unavailable("kv_transfer_failed: prefill worker gone"));
  decode->cancel(b.id);
  const Collected ca = drain(*sa);
  EXPECT_EQ(ca.finish, FinishReason::kError);
  EXPECT_NE(ca.events.back().error.message().find("prefill worker gone"), std::string::npos);
  EXPECT_EQ(drain(*sb).finish, FinishReason::kAborted);
  decode->finish_import(b.id, {});  // late bytes for a cancelled import are ignored
  expect_idle_and_clean(*decode);
  // The engine serves normally afterwards.
  EXPECT_EQ(drain(*decode->submit(greedy_request(text, 0, 10, 4)).value()).tokens.size(), 4u);
  // Import bounds are checked before any page is reserved.
  EXPECT_FALSE(decode->begin_import(r, 51).is_ok());
  EXPECT_FALSE(decode->begin_import(r, 0).is_ok());
}

TEST(KvExport, CancelAfterFinishUnpinsTheExport) {
  auto prefill = make_engine(DType::kBF16);
  const std::vector<int32_t> text = validation_ids("tinystories-mixtral-3.6m");
  std::shared_ptr<const KvExport> x = export_prompt(*prefill, greedy_request(text, 0, 30, 1).prompt);
  ASSERT_TRUE(x);
  EXPECT_EQ(settled_stats(*prefill).kv_pages_pinned, static_cast<int32_t>(x->pages.size()));
  EXPECT_TRUE(prefill->audit().is_ok()) << "pinned exports are references the audit counts";
  prefill->cancel(x->id);
  expect_idle_and_clean(*prefill);
}

}  // namespace
}  // namespace densa::disagg
