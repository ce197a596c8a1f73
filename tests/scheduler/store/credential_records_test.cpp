// Credentials on the store's clock: a join token admits enrolments until the clock passes its
// expiry, and creation and revocation times are the clock's. Exercised through the
// CredentialRecords interface, as the broker and the API hold it.

#include <gtest/gtest.h>

#include <chrono>

#include "tests/scheduler/store/store_fixture.h"

namespace tessera::store {
namespace {

using namespace std::chrono_literals;

class CredentialRecordsTest : public StoreFixture {
 protected:
  CredentialRecordsTest() : StoreFixture("credential-records") {}
};
TSR_STORE_TEST_ON_BOTH_ENGINES(CredentialRecordsTest);

TEST_P(CredentialRecordsTest, AJoinTokenEnrolsUntilTheClockPassesItsExpiry) {
  CredentialRecords& credentials = *store_;
  const int64_t made_at = clock_.WallMs();
  auto token = credentials.CreateJoinToken("token-key", "an hour", made_at + 3'600'000, 0);
  ASSERT_TRUE(token.ok()) << token.status().ToString();
  EXPECT_EQ(token->created_at_ms, made_at);

  clock_.Advance(59min);
  auto first = credentials.EnrolWorker("render-1", "key-1", token->id);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(first->token_usable);
  ASSERT_EQ(credentials.ListWorkerKeys()->size(), 1u);
  EXPECT_EQ(credentials.ListWorkerKeys()->at(0).enrolled_at_ms, made_at + 59 * 60'000);

  clock_.Advance(1min);  // exactly at its expiry: no longer usable
  auto late = credentials.EnrolWorker("render-2", "key-2", token->id);
  EXPECT_EQ(late.status().code(), StatusCode::kFailedPrecondition) << late.status().ToString();
  EXPECT_NE(late.status().message().find("expired"), std::string::npos) << late.status().message();
  EXPECT_EQ(credentials.ListWorkerKeys()->size(), 1u) << "nothing enrolled after the expiry";
}

TEST_P(CredentialRecordsTest, RevocationsAreStampedWithTheClockAndTheFirstOneStands) {
  CredentialRecords& credentials = *store_;
  auto join = credentials.CreateJoinToken("token-key", "", std::nullopt, 0);
  ASSERT_TRUE(join.ok()) << join.status().ToString();
  clock_.Advance(10s);
  const int64_t revoked_at = clock_.WallMs();
  ASSERT_EQ(credentials.RevokeJoinToken(join->id)->revoked_at_ms, revoked_at);
  clock_.Advance(10s);
  EXPECT_EQ(credentials.RevokeJoinToken(join->id)->revoked_at_ms, revoked_at);

  ApiTokenRecord record;
  record.secret_hash = "hash";
  record.user = "ana";
  record.role = "viewer";
  record.expires_at_ms = clock_.WallMs() + 60'000;
  auto api = credentials.CreateApiToken(record);
  ASSERT_TRUE(api.ok()) << api.status().ToString();
  EXPECT_EQ(api->created_at_ms, clock_.WallMs());
  EXPECT_TRUE(api->usable(clock_.WallMs()));
  clock_.Advance(1min);
  EXPECT_FALSE(credentials.ListApiTokens()->at(0).usable(clock_.WallMs()))
      << "expired once the clock passed its time to live";
  clock_.Advance(5s);
  EXPECT_EQ(credentials.RevokeApiToken(api->id)->revoked_at_ms, clock_.WallMs());

  ASSERT_TRUE(credentials.EnrolWorker("render-1", "key-1", join->id).status().code() ==
              StatusCode::kFailedPrecondition)
      << "a revoked token enrols nobody";
}

TEST_P(CredentialRecordsTest, ARevokedWorkerKeyCarriesTheClocksTime) {
  CredentialRecords& credentials = *store_;
  auto join = credentials.CreateJoinToken("token-key", "", std::nullopt, 0);
  ASSERT_TRUE(join.ok()) << join.status().ToString();
  ASSERT_TRUE(credentials.EnrolWorker("render-1", "key-1", join->id).ok());
  clock_.Advance(2h);
  auto revoked = credentials.SetWorkerRevoked("render-1", true);
  ASSERT_TRUE(revoked.ok()) << revoked.status().ToString();
  EXPECT_EQ(revoked->revoked_at_ms, clock_.WallMs());
}

}  // namespace
}  // namespace tessera::store
