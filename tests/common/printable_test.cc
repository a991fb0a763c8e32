#include "common/printable.h"

#include <string>

#include "gtest/gtest.h"

namespace pbert {
namespace {

TEST(PrintableTest, ControlCharactersAreEscaped) {
  EXPECT_EQ(Printable("plain text, UTF-8 \xc3\xa9 and \\ kept"),
            "plain text, UTF-8 \xc3\xa9 and \\ kept");
  EXPECT_EQ(Printable("a\nb\rc\td"), "a\\nb\\rc\\td");
  EXPECT_EQ(Printable("\x1b[2J\x07\x7f"), "\\x1b[2J\\x07\\x7f");
  EXPECT_EQ(Printable(std::string("nul\0here", 8)), "nul\\x00here");
  // C1 controls as UTF-8 (U+009B is a CSI where a terminal takes C1).
  EXPECT_EQ(Printable("\xc2\x9b" "2J \xc2\x85"), "\\u009b2J \\u0085");
  EXPECT_EQ(Printable("\xc2\xa0"), "\xc2\xa0");  // no-break space: printable
}

TEST(PrintableTest, ALongLineKeepsItsStartAndEnd) {
  const std::string text = "start " + std::string(10'000, 'x') + " end";
  const std::string shown = Printable(text, 120);
  EXPECT_LE(shown.size(), 120u + 40u);
  EXPECT_EQ(shown.substr(0, 6), "start ");
  EXPECT_EQ(shown.substr(shown.size() - 4), " end");
  EXPECT_NE(shown.find(" ... (9890 bytes left out) ... "), std::string::npos) << shown;
  EXPECT_EQ(Printable(std::string(120, 'y'), 120), std::string(120, 'y'));
  // Never cut inside a UTF-8 character.
  std::string accents;
  for (int i = 0; i < 200; ++i) accents += "\xc3\xa9";
  const std::string cut = Printable(accents, 101);
  const size_t gap = cut.find(" ... (");
  ASSERT_NE(gap, std::string::npos);
  EXPECT_EQ(gap % 2, 0u) << cut;
  EXPECT_EQ((cut.size() - cut.find(") ... ") - 6) % 2, 0u) << cut;
}

}  // namespace
}  // namespace pbert
