// Object bundles: one object is itself, several round-trip, and damaged framing is refused rather than misread.
#include <gtest/gtest.h>

#include "jit/object_bundle.hpp"

namespace tessera {
namespace {

TEST(ObjectBundle, OneObjectIsItselfAndSeveralRoundTrip) {
  EXPECT_EQ(bundle_objects({"\x7f"
                            "ELF one"}),
            "\x7f"
            "ELF one");
  EXPECT_EQ(unbundle_objects("\x7f"
                             "ELF one"),
            (std::vector<std::string>{"\x7f"
                                      "ELF one"}));
  const std::vector<std::string> parts{
      "\x7f"
      "ELF first",
      std::string(300, '\0'),
      "\x7f"
      "ELF third"};
  const std::string bundle = bundle_objects(parts);
  EXPECT_NE(bundle.find("tessera object bundle 1\n"), std::string::npos);
  EXPECT_EQ(unbundle_objects(bundle), parts);
}

TEST(ObjectBundle, DamagedFramingIsRefused) {
  const std::string bundle = bundle_objects({"first object", "second object"});
  for (std::size_t cut = 24; cut < bundle.size(); ++cut)  // every truncation past the magic line
    EXPECT_FALSE(unbundle_objects(bundle.substr(0, cut))) << cut;
  EXPECT_FALSE(unbundle_objects(bundle + "x"));                                                     // trailing bytes
  EXPECT_FALSE(unbundle_objects(std::string("tessera object bundle 1\n") + std::string(8, '\0')));  // no objects
  std::string huge = bundle;
  huge[24 + 8 + 7] = '\x7f';  // the first size's top byte: far past the end
  EXPECT_FALSE(unbundle_objects(huge));
  std::string many = bundle;
  many[24] = '\x03';  // three objects announced, two there
  EXPECT_FALSE(unbundle_objects(many));
}

}  // namespace
}  // namespace tessera
