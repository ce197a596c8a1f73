#include "shared/base/utf8.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace tessera::utf8 {
namespace {

TEST(Utf8Test, ValidTextPassesUnchanged) {
  for (std::string text : {std::string(), std::string("frame 12 done"),
                           std::string("caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x8E\xAC"),
                           std::string("\xF4\x8F\xBF\xBF")}) {
    EXPECT_FALSE(FirstInvalid(text)) << text;
    EXPECT_EQ(Sanitize(text), text);
    EXPECT_TRUE(Check(text, "name").ok());
  }
}

TEST(Utf8Test, FindsTheOffsetOfTheFirstBadByte) {
  EXPECT_EQ(FirstInvalid("\xFF"), 0u);
  EXPECT_EQ(FirstInvalid("abcdefghij\xFF"), 10u);        // after the 8-byte ASCII fast path
  EXPECT_EQ(FirstInvalid("ok \xC0\xAF"), 3u);            // overlong '/'
  EXPECT_EQ(FirstInvalid("\xE0\x80\xAF"), 0u);           // overlong
  EXPECT_EQ(FirstInvalid("x\xED\xA0\x80"), 1u);          // a surrogate
  EXPECT_EQ(FirstInvalid("xy\xF4\x90\x80\x80"), 2u);     // above U+10FFFF
  EXPECT_EQ(FirstInvalid("\xC3"), 0u);                   // truncated at the end
  EXPECT_EQ(FirstInvalid("\xE6\x97"), 0u);               // truncated
  EXPECT_EQ(FirstInvalid(std::string("a\x80", 2)), 1u);  // a lone continuation byte
}

TEST(Utf8Test, CheckNamesTheFieldAndOffset) {
  Status st = Check("tag\xFF", "tags[2]");
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "tags[2]: not valid UTF-8 (byte 3)");
}

TEST(Utf8Test, SanitizeReplacesEachMaximalSubpartOnce) {
  // Unicode's example: each maximal subpart of an ill-formed sequence becomes one U+FFFD.
  EXPECT_EQ(Sanitize("a\xF1\x80\x80"
                     "b"),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(Sanitize("\xFF\xFE"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(Sanitize("\xE6\x97"
                     "x"),
            "\xEF\xBF\xBD"
            "x");
  EXPECT_EQ(Sanitize("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  std::string s = "bad \xC3";
  EXPECT_TRUE(SanitizeInPlace(s));
  EXPECT_EQ(s, "bad \xEF\xBF\xBD");
  EXPECT_FALSE(SanitizeInPlace(s));
}

TEST(Utf8Test, SanitizedTextAlwaysSerialisesAsJson) {
  // What the sanitiser is for: nlohmann::json::dump throws on invalid UTF-8.
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  for (int i = 255; i >= 0; --i) all.push_back(static_cast<char>(i));
  EXPECT_THROW(nlohmann::json(all).dump(), nlohmann::json::type_error);
  const std::string clean = Sanitize(all);
  EXPECT_TRUE(IsValid(clean));
  EXPECT_NO_THROW(nlohmann::json(clean).dump());
}

}  // namespace
}  // namespace tessera::utf8
