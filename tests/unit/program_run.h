// A program run as its main() would run it, short of the command line:
// its input in a file, its standard output captured, the clock fake. For
// the tests of programs/ that check what a filter writes (kdedup, kwindow,
// kjoin). Not a test file itself (the CMake glob takes *_test.cpp only).
#pragma once

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <functional>
#include <string>

#include "fakes.h"
#include "helpers.h"
#include "kpipe/stage/io.h"

namespace kpipe::test {

struct ProgramRun {
  Status status;
  std::string out;
  RecordingReporter reporter;
};

// Writes `input` to a file in `dir`, makes it the program's one input, and
// runs `run` with standard output into another file, read back into
// `r.out`.
inline void run_program(const char* program, const std::string& input, const TempDir& dir,
                        InputOptions& inputs, ProgramRun& r,
                        const std::function<Status(Io&)>& run) {
  inputs.inputs = {dir.write("in.ndjson", input)};
  int fd = ::open(dir.file("out.ndjson").c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
  REQUIRE(fd >= 0);
  {
    Output out(fd, "<stdout>");
    FakeClock clock(1795946400000);
    Io io{out, r.reporter, clock, nullptr, program, nullptr};
    r.status = run(io);
    (void)out.flush();
  }
  ::close(fd);
  r.out = read_file(dir.file("out.ndjson"));
}

}  // namespace kpipe::test
