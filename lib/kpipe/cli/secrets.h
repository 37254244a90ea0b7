// Passwords given on the command line. A process's arguments are world
// readable (ps, /proc/PID/cmdline): a password among them is every local
// user's. The programs still take one there, as psql and kcat do, but say
// once where it would be safe (kpipe(7), KAFKA OPTIONS and STORES).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kpipe::cli {

// An option's value as the command line gave it, before anything read a
// file for it: `name` as the help spells it ("--state", "--property" for
// -X, a positional's bare name).
struct GivenOption {
  std::string name;
  std::string value;
};

// What of `given` puts a password in the arguments, each named without its
// value and once, in the order of `given`: "-X sasl.password", "--state's
// PostgreSQL URI", "--dlq's PostgreSQL conninfo", "--registry's
// user:password", "--registry-auth". Empty when none does. A value read
// from a file (-X KEY=@FILE) or the environment is not in `given`'s values,
// so it is never named.
std::vector<std::string> command_line_secrets(const std::vector<GivenOption>& given);

// The one warning line for what command_line_secrets found.
std::string command_line_secrets_warning(const std::vector<std::string>& found);

// Whether a URL's user info holds a password ("https://user:pw@host"),
// the '@' that ends it found as the registry's URL parser finds it.
bool url_has_password(std::string_view url);

// Whether a PostgreSQL store target (kpipe(7), STORES) writes a password:
// in a URI's user info or "password=" parameter, or a conninfo's
// "password=". A target that is not PostgreSQL's has none.
bool postgres_target_has_password(std::string_view target);

}  // namespace kpipe::cli
