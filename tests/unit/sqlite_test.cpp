#include "kpipe/sqlite.h"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

using namespace kpipe;

// A pipeline's stages open a new state file together. Switching it to WAL
// used to fail at once with "database is locked" in all but one of them.
TEST_CASE("sqlite: processes opening a new file together all get it") {
  char dir[] = "/tmp/kpipe-sqlite-test.XXXXXX";
  REQUIRE(::mkdtemp(dir) != nullptr);
  for (int round = 0; round < 80; ++round) {
    std::string path = std::string(dir) + "/race" + std::to_string(round) + ".db";
    std::vector<std::string> errors(6);
    std::vector<std::thread> openers;
    for (size_t i = 0; i < errors.size(); ++i) {
      openers.emplace_back([&, i] {
        auto db = Database::open(path);
        if (!db) errors[i] = db.error().message;
      });
    }
    for (auto& t : openers) t.join();
    for (const auto& e : errors) REQUIRE(e.empty());
  }
  REQUIRE(std::system(("rm -rf " + std::string(dir)).c_str()) == 0);
}
