// The one table of exit statuses shared by every kpipe program (kpipe(7), EXIT STATUS).
// Each man page's EXIT STATUS section repeats it; tests/cli checks that it does.
#pragma once

namespace kpipe {

enum class ExitStatus : int {
  kOk = 0,          // done, including a downstream pipe that closed (`| head`)
  kFailure = 1,     // I/O, broker or state database failure
  kUsage = 2,       // bad command line
  kAlert = 3,       // an alert condition the user asked to be told of (klag)
  kDataError = 65,  // bad input under --on-error fail (sysexits' EX_DATAERR)
};

constexpr int to_int(ExitStatus s) {
  return static_cast<int>(s);
}

}  // namespace kpipe
