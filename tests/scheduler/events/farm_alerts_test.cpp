// FarmAlerts: keyed alerts raised once, updated in place, cleared by key.

#include "scheduler/events/farm_alerts.h"

#include <gtest/gtest.h>

namespace tessera::events {
namespace {

TEST(FarmAlerts, RaisedOnceUpdatedInPlaceAndCleared) {
  FarmAlerts alerts;
  EXPECT_TRUE(alerts.Raise("outputs_full:/out", "outputs_full", "0 B free", 1000));
  EXPECT_FALSE(alerts.Raise("outputs_full:/out", "outputs_full", "12 KiB free", 2000));
  EXPECT_TRUE(alerts.Raise("data_full", "data_full", "read-only", 3000));
  auto list = alerts.List();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].message, "12 KiB free");
  EXPECT_EQ(list[0].since_ms, 1000);  // first raised, not last updated
  EXPECT_EQ(list[1].key, "data_full");
  EXPECT_TRUE(alerts.Active("data_full"));
  EXPECT_TRUE(alerts.Clear("outputs_full:/out"));
  EXPECT_FALSE(alerts.Clear("outputs_full:/out"));
  EXPECT_FALSE(alerts.Active("outputs_full:/out"));
  ASSERT_EQ(alerts.List().size(), 1u);
}

}  // namespace
}  // namespace tessera::events
