// kcheckpoint reset's arithmetic; the subcommands themselves run against a
// state file and a broker in integration/.
#include "kpipe/programs/kcheckpoint.h"

#include <catch2/catch.hpp>

#include <limits>

using namespace kpipe;
using Kind = ResetSpec::Kind;

namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

}  // namespace

TEST_CASE("reset_target: each reset kind, clamped to the log", "[checkpoint]") {
  // The log holds offsets 100..249 (low 100, high 250), stored offset 180.
  CHECK(reset_target({Kind::kEarliest, 0}, 180, 100, 250, 0) == 100);
  CHECK(reset_target({Kind::kLatest, 0}, 180, 100, 250, 0) == 250);
  CHECK(reset_target({Kind::kTime, 0}, 180, 100, 250, 130) == 130);
  CHECK(reset_target({Kind::kTime, 0}, 180, 100, 250, 20) == 100);
  CHECK(reset_target({Kind::kOffset, 200}, 180, 100, 250, 0) == 200);
  CHECK(reset_target({Kind::kOffset, 7}, 180, 100, 250, 0) == 100);
  CHECK(reset_target({Kind::kOffset, 1000}, 180, 100, 250, 0) == 250);
  CHECK(reset_target({Kind::kShift, -30}, 180, 100, 250, 0) == 150);
  CHECK(reset_target({Kind::kShift, 30}, 180, 100, 250, 0) == 210);
  CHECK(reset_target({Kind::kShift, -500}, 180, 100, 250, 0) == 100);
  CHECK(reset_target({Kind::kShift, 500}, 180, 100, 250, 0) == 250);
}

TEST_CASE("reset_target: a shift without a stored offset starts from the log start",
          "[checkpoint]") {
  CHECK(reset_target({Kind::kShift, 10}, std::nullopt, 100, 250, 0) == 110);
  CHECK(reset_target({Kind::kShift, -10}, std::nullopt, 100, 250, 0) == 100);
  CHECK(reset_target({Kind::kEarliest, 0}, std::nullopt, 100, 250, 0) == 100);
}

TEST_CASE("reset_target: a stored offset outside the log is clamped too", "[checkpoint]") {
  CHECK(reset_target({Kind::kShift, 0}, 20, 100, 250, 0) == 100);
  CHECK(reset_target({Kind::kShift, 0}, 999, 100, 250, 0) == 250);
}

TEST_CASE("reset_target: a huge shift saturates instead of overflowing", "[checkpoint]") {
  CHECK(reset_target({Kind::kShift, kMax}, 180, 100, 250, 0) == 250);
  CHECK(reset_target({Kind::kShift, kMin}, 180, 100, 250, 0) == 100);
  CHECK(reset_target({Kind::kShift, kMax}, kMax, 100, 250, 0) == 250);
}
