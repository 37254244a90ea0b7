#include "kpipe/choices.h"

#include <catch2/catch.hpp>

using namespace kpipe;

TEST_CASE("parse_choice: the index of an exact match", "[choices]") {
  CHECK(*parse_choice("--format", "table", {"table", "ndjson"}) == 0);
  CHECK(*parse_choice("--format", "ndjson", {"table", "ndjson"}) == 1);
}

TEST_CASE("parse_choice: a near miss gets a suggestion", "[choices]") {
  auto e = parse_choice("window kind", "tumblin", {"tumble", "hop", "session"});
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().status == ExitStatus::kUsage);
  CHECK(e.error().message == "unknown window kind 'tumblin', did you mean 'tumble'?");
  CHECK(parse_choice("mode", "sesion", {"tumble", "hop", "session"}).error().message ==
        "unknown mode 'sesion', did you mean 'session'?");
  // A prefix counts as close, however short.
  CHECK(parse_choice("--on-error mode", "sk", {"fail", "dlq", "skip"}).error().message ==
        "unknown --on-error mode 'sk', did you mean 'skip'?");
  // Three letters missing is too far for a word of four, unless they are its end.
  CHECK(closest_choice("sess", {"tumble", "hop", "session"}) == "session");
  CHECK(closest_choice("sesn", {"tumble", "hop", "session"}).empty());
}

TEST_CASE("parse_choice: a far miss lists the choices", "[choices]") {
  CHECK(parse_choice("--on-error mode", "banana", {"fail", "dlq", "skip"}).error().message ==
        "unknown --on-error mode 'banana' (expected fail, dlq or skip)");
  CHECK(parse_choice("x", "zzzzzz", {"a1", "b2"}).error().message ==
        "unknown x 'zzzzzz' (expected a1 or b2)");
  CHECK(parse_choice("x", "zzzzzz", {"only"}).error().message ==
        "unknown x 'zzzzzz' (expected only)");
}

TEST_CASE("closest_choice: distance grows with the word, ties go to the first", "[choices]") {
  CHECK(closest_choice("latets", {"earliest", "latest"}) == "latest");  // a transposition: 2 edits
  CHECK(closest_choice("xyz", {"abc"}).empty());                        // 3 edits for 3 letters
  CHECK(closest_choice("chekpoitn", {"checkpoint", "commit"}) == "checkpoint");
  // 4 edits for 14 letters
  CHECK(closest_choice("checkpointzzzz", {"checkpoint"}) == "checkpoint");
  CHECK(closest_choice("cxxxxpoint", {"checkpoint"}).empty());  // 4 edits for 10
  CHECK(closest_choice("ab", {"ax", "bb"}) == "ax");
  CHECK(closest_choice("anything", {}).empty());
}
