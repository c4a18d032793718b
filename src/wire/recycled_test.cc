// Tests for the serving path's recycled messages: a recycled message comes back empty (every
// field, checked by reflection, so a field added to the proto later cannot leak from one request
// into the next) with its buffers, and a request still held elsewhere is not reused.
#include "wire/recycled.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace petal::wire {
namespace {

// Every field of `m` that is set, by name.
std::vector<std::string> SetFields(const google::protobuf::Message& m) {
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  m.GetReflection()->ListFields(m, &fields);
  std::vector<std::string> names;
  for (const auto* f : fields) names.push_back(f->name());
  return names;
}

void FillEveryField(v1::EmbedRequest* r) {
  r->set_protocol_version(1);
  r->set_request_id("request-with-a-long-enough-id-0123456789");
  r->mutable_token_ids()->assign(4096, 'x');
  r->mutable_token_type_ids()->assign(4096, 'y');
  for (int i = 0; i < 64; ++i) r->add_lengths(16);
  r->mutable_options()->set_dimensions(7);
  r->mutable_options()->set_sparse(true);
  r->add_span_counts(1);
  r->add_spans(0);
  r->add_spans(1);
  r->set_span_pooling(v1::SPAN_POOLING_MODEL);
}

TEST(Recycled, RequestComesBackEmptyWithItsBuffers) {
  std::shared_ptr<v1::EmbedRequest> r = TakeEmbedRequest();
  FillEveryField(r.get());
  // The test fills every field the proto has (a new field must be added here and to the reset).
  EXPECT_EQ(SetFields(*r).size(),
            static_cast<size_t>(v1::EmbedRequest::descriptor()->field_count()));
  const char* ids = r->token_ids().data();
  r.reset();  // the last holder: it goes back to the list
  std::shared_ptr<v1::EmbedRequest> again = TakeEmbedRequest();
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again.use_count(), 1);
  // Only the (empty) options submessage stays present; everything else is back to default.
  EXPECT_EQ(SetFields(*again), std::vector<std::string>{"options"});
  EXPECT_EQ(again->options().ByteSizeLong(), 0u);
  EXPECT_EQ(again->token_ids().data(), ids);  // the same buffer, reused
  EXPECT_GE(again->token_ids().capacity(), 4096u);
}

TEST(Recycled, RequestHeldElsewhereIsNotReusedUntilItsLastHolderLetsGo) {
  std::shared_ptr<v1::EmbedRequest> r = TakeEmbedRequest();
  FillEveryField(r.get());
  std::shared_ptr<v1::EmbedRequest> other = r;  // e.g. a transport still tearing its call down
  const v1::EmbedRequest* held = other.get();
  r.reset();
  // Whatever Take returns now, it is not the request still held, and that one is untouched.
  std::shared_ptr<v1::EmbedRequest> next = TakeEmbedRequest();
  EXPECT_NE(next.get(), held);
  EXPECT_EQ(other->lengths_size(), 64);
  EXPECT_EQ(other->token_ids().size(), 4096u);
  other.reset();  // now it goes back, from whichever thread lets go last
  std::shared_ptr<v1::EmbedRequest> reused = TakeEmbedRequest();
  EXPECT_EQ(reused.get(), held);
  EXPECT_EQ(reused->lengths_size(), 0);
}

TEST(Recycled, ResponseComesBackEmptyWithItsBuffers) {
  v1::EmbedResponse m = TakeEmbedResponse();
  m.set_request_id("r");
  m.mutable_data()->assign(1 << 16, 'z');
  m.add_shape(4);
  m.add_scales(0.5f);
  m.set_total_us(3);
  const char* data = m.data().data();
  RecycleEmbedResponse(std::move(m));
  v1::EmbedResponse again = TakeEmbedResponse();
  EXPECT_TRUE(SetFields(again).empty());
  EXPECT_EQ(again.data().data(), data);
}

TEST(Recycled, BuffersAreReusedAndHugeOnesFreed) {
  std::vector<int32_t> ints = TakeIntBuffer();
  ints.resize(1000);
  const int32_t* p = ints.data();
  RecycleIntBuffer(std::move(ints));
  std::vector<int32_t> back = TakeIntBuffer();
  EXPECT_TRUE(back.empty());
  EXPECT_EQ(back.data(), p);
  std::string huge(size_t{8} << 20, 'h');  // above the 4 MiB bound
  const char* h = huge.data();
  RecycleByteBuffer(std::move(huge));
  EXPECT_NE(TakeByteBuffer().data(), h);
}

}  // namespace
}  // namespace petal::wire
