// What the guard's tests and kdlq guard's stage tests share: requirements
// parsed from their command-line form.
#pragma once

#include <catch2/catch.hpp>

#include <initializer_list>
#include <vector>

#include "kpipe/guard.h"

namespace kpipe::test {

inline std::vector<Requirement> requirements(std::initializer_list<const char*> texts) {
  std::vector<Requirement> out;
  for (const char* t : texts) {
    auto r = parse_requirement(t);
    if (!r) FAIL(t << ": " << r.error().message);
    out.push_back(std::move(*r));
  }
  return out;
}

}  // namespace kpipe::test
