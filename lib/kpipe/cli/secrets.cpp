#include "kpipe/cli/secrets.h"

#include <algorithm>

#include "kpipe/kafka/config.h"
#include "kpipe/percent.h"
#include "kpipe/target.h"

namespace kpipe::cli {

namespace {

constexpr std::string_view kBlanks = " \t\n\r\f\v";

// The '@' that ends the user info of the URL whose authority starts at
// `start`, or npos, as the registry's and libpq's readers of kpipe find it
// (schema/registry.cpp, store/postgres.cpp): the authority's last '@';
// without one, the last before `stop` when a password holding a '/' ended
// the authority early ("user:pa/ss@host"), unless the ':' starts a port
// ("host:8081/a@b" has no user info).
size_t userinfo_end(std::string_view url, size_t start, size_t stop) {
  size_t end = url.find_first_of("/?#", start);
  if (end == std::string_view::npos) end = url.size();
  size_t at = url.substr(start, end - start).rfind('@');
  if (at != std::string_view::npos) return start + at;
  size_t last = url.substr(0, stop).rfind('@');
  size_t colon = url.find(':', start);
  if (last == std::string_view::npos || last < end || colon >= end) return std::string_view::npos;
  std::string_view port = url.substr(colon + 1, end - colon - 1);
  if (port.find_first_not_of("0123456789") == std::string_view::npos) return std::string_view::npos;
  return last;
}

// Whether the user info before `at` (from `start`) holds a password that
// is not empty: "user:pw".
bool userinfo_has_password(std::string_view url, size_t start, size_t at) {
  if (at == std::string_view::npos) return false;
  size_t colon = url.substr(start, at - start).find(':');
  return colon != std::string_view::npos && start + colon + 1 < at;
}

bool uri_has_password(std::string_view target) {
  size_t start = target.find("://") + 3;
  size_t query = target.find('?', start);
  size_t at = userinfo_end(target, start, query == std::string_view::npos ? target.size() : query);
  if (userinfo_has_password(target, start, at)) return true;
  query = target.find('?', at == std::string_view::npos ? start : at + 1);
  if (query == std::string_view::npos) return false;
  for (size_t p = query + 1; p < target.size();) {
    size_t amp = target.find('&', p);
    size_t eq = target.find('=', p);
    std::string key;
    if (eq < amp) (void)percent_decode(target.substr(p, eq - p), key);
    if (key == "password" && eq + 1 < target.size() && target[eq + 1] != '&') return true;
    if (amp == std::string_view::npos) break;
    p = amp + 1;
  }
  return false;
}

// Every "password =" of a conninfo, even inside another quoted value,
// as store/postgres.cpp's redaction finds them, with a value after it.
bool conninfo_has_password(std::string_view target) {
  for (size_t at = target.find("password"); at != std::string_view::npos;
       at = target.find("password", at + 1)) {
    size_t eq = target.find_first_not_of(kBlanks, at + 8);
    if (eq == std::string_view::npos || target[eq] != '=') continue;
    size_t value = target.find_first_not_of(kBlanks, eq + 1);
    if (value == std::string_view::npos) continue;
    // An empty quoted value is no password.
    if (target.substr(value).starts_with("''")) continue;
    return true;
  }
  return false;
}

void add_once(std::vector<std::string>& found, std::string what) {
  if (std::find(found.begin(), found.end(), what) == found.end()) found.push_back(std::move(what));
}

// How the warning names an option: its long name, or a positional's own.
std::string shown(std::string_view name) {
  return name.starts_with("-") ? std::string(name) : "the " + std::string(name) + " argument";
}

}  // namespace

bool url_has_password(std::string_view url) {
  size_t scheme = url.find("://");
  size_t start = scheme == std::string_view::npos ? 0 : scheme + 3;
  return userinfo_has_password(url, start, userinfo_end(url, start, url.size()));
}

bool postgres_target_has_password(std::string_view target) {
  if (!is_postgres_target(target)) return false;
  if (is_postgres_uri(target)) return uri_has_password(target);
  return conninfo_has_password(postgres_conninfo(target));
}

std::vector<std::string> command_line_secrets(const std::vector<GivenOption>& given) {
  std::vector<std::string> found;
  for (const GivenOption& o : given) {
    const std::string& v = o.value;
    if (o.name == "--property") {
      // -X KEY=@FILE reads the value from FILE; "@@" starts a literal '@'.
      size_t eq = v.find('=');
      if (eq == std::string::npos || !is_secret_property(v.substr(0, eq))) continue;
      std::string_view value = std::string_view(v).substr(eq + 1);
      if (value.empty() || (value.starts_with('@') && !value.starts_with("@@"))) continue;
      add_once(found, "-X " + v.substr(0, eq));
      continue;
    }
    if (o.name == "--registry-auth") {
      if (!v.empty()) add_once(found, "--registry-auth");
      continue;
    }
    if (o.name == "--registry") {
      if (url_has_password(v)) add_once(found, "--registry's user:password");
      continue;
    }
    // Any other value naming a PostgreSQL database is a store target
    // (--state, --dlq, --db, kjoin's --table, klag's --history, ...): the
    // "postgresql:" that starts it says so, whichever option took it.
    if (!postgres_target_has_password(v)) continue;
    // kjoin's "postgresql://...#TABLE" is a URI too.
    add_once(found,
             shown(o.name) + (is_postgres_uri(v) ? "'s PostgreSQL URI" : "'s PostgreSQL conninfo"));
  }
  return found;
}

std::string command_line_secrets_warning(const std::vector<std::string>& found) {
  std::string what;
  for (size_t i = 0; i < found.size(); ++i) {
    if (i > 0) what += i + 1 == found.size() ? " and " : ", ";
    what += found[i];
  }
  return what + (found.size() == 1 ? " puts" : " put") +
         " a password on the command line, where every local user can read it (ps): keep it in "
         "the client file (--config), PGPASSWORD or ~/.pgpass, or a systemd credential "
         "(LoadCredential=), or read it from a file with -X KEY=@FILE";
}

}  // namespace kpipe::cli
