#include "kpipe/kafka/config.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <optional>

namespace kpipe {

void KafkaConfig::set(std::string key, std::string value) {
  for (auto& [k, v] : properties) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  properties.emplace_back(std::move(key), std::move(value));
}

const std::string* KafkaConfig::get(std::string_view key) const {
  for (const auto& [k, v] : properties)
    if (k == key) return &v;
  return nullptr;
}

std::string KafkaConfig::brokers() const {
  const std::string* b = get("bootstrap.servers");
  return b != nullptr ? *b : std::string();
}

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Words that make a key a secret's, wherever they appear in it: librdkafka
// adds properties over time, and a plugin's own secrets are named so too.
constexpr std::string_view kSecretWords[] = {"password", "secret", "token"};

}  // namespace

bool is_secret_property(std::string_view key) {
  // Secrets whose names say nothing of it: key material, and settings that
  // embed a password or credentials.
  static constexpr std::string_view kSecrets[] = {
      "sasl.jaas.config",        "ssl.key.pem",          "ssl_key",
      "sasl.oauthbearer.config", "basic.auth.user.info", "schema.registry.basic.auth.user.info"};
  std::string k = lower(key);
  if (std::find(std::begin(kSecrets), std::end(kSecrets), k) != std::end(kSecrets)) return true;
  return std::any_of(std::begin(kSecretWords), std::end(kSecretWords),
                     [&](std::string_view w) { return k.find(w) != std::string::npos; });
}

std::string redact_property(std::string_view text) {
  // A key ends at the first character no property name holds: the '=' of
  // key=value, or the ':' or blank of a mistyped separator.
  size_t sep = text.find_first_of("=: \t");
  if (sep == std::string_view::npos) {
    // No separator: a key alone, or a key run into its value
    // ("sasl.passwordhunter2"): what follows the secret word goes.
    std::string k = lower(text);
    for (std::string_view w : kSecretWords) {
      size_t at = k.find(w);
      if (at != std::string::npos && at + w.size() < text.size())
        return std::string(text.substr(0, at + w.size())) + "***";
    }
    return std::string(text);
  }
  std::string_view key = text.substr(0, sep);
  // Without a key nobody can tell whose value it is: assume a secret's.
  if (key.empty() || is_secret_property(key)) return std::string(text.substr(0, sep + 1)) + "***";
  return std::string(text);
}

std::string KafkaConfig::redact(std::string_view text) const {
  std::string out(text);
  for (const auto& [k, v] : properties) {
    if (!is_secret_property(k) || v.size() < 3) continue;
    for (size_t at = out.find(v); at != std::string::npos; at = out.find(v, at + 3))
      out.replace(at, v.size(), "***");
  }
  return out;
}

namespace {

// A line of a properties file once its continuations are joined.
struct LogicalLine {
  std::string text;
  size_t number;  // the first physical line's, for messages
};

std::string_view skip_blanks(std::string_view s) {
  size_t first = s.find_first_not_of(" \t\f");
  return first == std::string_view::npos ? std::string_view() : s.substr(first);
}

// A line ending in an odd number of backslashes continues on the next,
// whose leading blanks are dropped; comments and blank lines are dropped.
std::vector<LogicalLine> join_lines(std::string_view text) {
  std::vector<LogicalLine> logical;
  size_t pos = 0, number = 0;
  std::string pending;
  size_t pending_line = 0;
  bool continuing = false;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    bool last = nl == std::string_view::npos;
    std::string_view raw = text.substr(pos, last ? std::string_view::npos : nl - pos);
    pos = last ? text.size() + 1 : nl + 1;
    ++number;
    if (!raw.empty() && raw.back() == '\r') raw.remove_suffix(1);
    raw = skip_blanks(raw);
    if (!continuing) {
      pending_line = number;
      if (raw.empty() || raw[0] == '#' || raw[0] == '!') continue;
    }
    size_t slashes = 0;
    while (slashes < raw.size() && raw[raw.size() - 1 - slashes] == '\\') ++slashes;
    continuing = slashes % 2 == 1;
    pending.append(continuing ? raw.substr(0, raw.size() - 1) : raw);
    if (continuing) continue;
    logical.push_back({std::move(pending), pending_line});
    pending.clear();
  }
  if (continuing) logical.push_back({std::move(pending), pending_line});
  return logical;
}

// A key and its value, still escaped.
struct RawProperty {
  std::string_view key;
  std::string_view value;
};

// The key ends at the first unescaped '=', ':' or blank; blanks around
// the separator belong to neither side. Nothing for a blank line.
std::optional<RawProperty> split_property(std::string_view line) {
  std::string_view s = skip_blanks(line);
  if (s.empty()) return std::nullopt;
  size_t k = 0;
  while (k < s.size()) {
    if (s[k] == '\\') {
      k += 2;
      continue;
    }
    if (s[k] == '=' || s[k] == ':' || s[k] == ' ' || s[k] == '\t' || s[k] == '\f') break;
    ++k;
  }
  k = std::min(k, s.size());
  std::string_view rest = skip_blanks(s.substr(k));
  if (!rest.empty() && (rest[0] == '=' || rest[0] == ':')) rest = skip_blanks(rest.substr(1));
  return RawProperty{s.substr(0, k), rest};
}

// The code unit of the four hex digits after the 'u' at s[at].
Status read_hex4(std::string_view s, size_t at, std::string_view name, size_t line, unsigned& cp) {
  if (at + 4 >= s.size()) return usage_error("{}: line {}: incomplete \\u escape", name, line);
  cp = 0;
  for (size_t k = 1; k <= 4; ++k) {
    char h = s[at + k];
    cp <<= 4;
    if (h >= '0' && h <= '9')
      cp |= static_cast<unsigned>(h - '0');
    else if (h >= 'a' && h <= 'f')
      cp |= static_cast<unsigned>(h - 'a' + 10);
    else if (h >= 'A' && h <= 'F')
      cp |= static_cast<unsigned>(h - 'A' + 10);
    else
      return usage_error("{}: line {}: malformed \\u escape", name, line);
  }
  return {};
}

void append_utf8(std::string& dst, unsigned cp) {
  if (cp >= 0x10000) {
    dst.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    dst.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    dst.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    dst.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x80) {
    dst.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    dst.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    dst.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    dst.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    dst.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    dst.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// The \uXXXX escape whose 'u' is s[i]; leaves i on its last digit.
Status unescape_unicode(std::string_view s, size_t& i, std::string_view name, size_t line,
                        std::string& dst) {
  unsigned cp = 0;
  KPIPE_TRY(read_hex4(s, i, name, line, cp));
  i += 4;
  // Java strings are UTF-16: a high surrogate and the low one after
  // it are one character (written alone, each stays as it was read).
  unsigned low = 0;
  if (cp >= 0xD800 && cp < 0xDC00 && i + 2 < s.size() && s[i + 1] == '\\' && s[i + 2] == 'u' &&
      read_hex4(s, i + 2, name, line, low).ok() && low >= 0xDC00 && low < 0xE000) {
    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    i += 6;
  }
  append_utf8(dst, cp);
  return {};
}

Status unescape(std::string_view s, std::string_view name, size_t line, std::string& dst) {
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      dst.push_back(s[i]);
      continue;
    }
    char c = s[++i];
    switch (c) {
      case 't':
        dst.push_back('\t');
        break;
      case 'n':
        dst.push_back('\n');
        break;
      case 'r':
        dst.push_back('\r');
        break;
      case 'f':
        dst.push_back('\f');
        break;
      case 'u':
        KPIPE_TRY(unescape_unicode(s, i, name, line, dst));
        break;
      default:
        dst.push_back(c);
        break;
    }
  }
  return {};
}

}  // namespace

Expected<std::vector<std::pair<std::string, std::string>>> parse_properties(std::string_view text,
                                                                            std::string_view name) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const LogicalLine& line : join_lines(text)) {
    std::optional<RawProperty> raw = split_property(line.text);
    if (!raw) continue;
    std::string key, value;
    KPIPE_TRY(unescape(raw->key, name, line.number, key));
    KPIPE_TRY(unescape(raw->value, name, line.number, value));
    if (key.empty()) return usage_error("{}: line {}: missing key", name, line.number);
    out.emplace_back(std::move(key), std::move(value));
  }
  return out;
}

namespace {

// `origin`, when not empty, says who named the file: " (from KPIPE_CONFIG)".
// With `absent`, a file that does not exist is no error: *absent says so.
// Reads all of `fd` into `data` and closes it: 0, or the errno of a read
// that failed. Shared by the config file and -X KEY=@FILE.
int read_and_close(int fd, std::string& data) {
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return err;
    }
    data.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return 0;
}

Expected<std::string> read_file(const std::string& path, std::string_view origin = {},
                                bool* absent = nullptr) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 && absent != nullptr && (errno == ENOENT || errno == ENOTDIR)) {
    *absent = true;
    return std::string();
  }
  if (fd < 0)
    return usage_error("cannot open config file '{}'{}: {}", path, origin, std::strerror(errno));
  std::string data;
  if (int err = read_and_close(fd, data))
    return failure("cannot read config file '{}': {}", path, std::strerror(err));
  return data;
}

// The value of `name="..."` (or name='...') inside a JAAS entry.
std::string jaas_option(std::string_view jaas, std::string_view name) {
  size_t at = 0;
  while ((at = jaas.find(name, at)) != std::string_view::npos) {
    size_t eq = at + name.size();
    while (eq < jaas.size() && jaas[eq] == ' ') ++eq;
    if (eq < jaas.size() && jaas[eq] == '=') {
      size_t q = eq + 1;
      while (q < jaas.size() && jaas[q] == ' ') ++q;
      if (q < jaas.size() && (jaas[q] == '"' || jaas[q] == '\'')) {
        char quote = jaas[q];
        size_t end = jaas.find(quote, q + 1);
        if (end != std::string_view::npos) return std::string(jaas.substr(q + 1, end - q - 1));
      }
    }
    at = eq;
  }
  return {};
}

}  // namespace

Expected<std::string> property_value(std::string_view key, std::string_view value) {
  if (!value.starts_with('@')) return std::string(value);
  if (value.starts_with("@@")) return std::string(value.substr(1));
  // The file's text is never quoted: it is the secret.
  std::string path(value.substr(1));
  int fd = path.empty() ? -1 : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return usage_error("-X {}: cannot open '{}': {}", key, path,
                       std::strerror(path.empty() ? ENOENT : errno));
  std::string data;
  if (int err = read_and_close(fd, data))
    return usage_error("-X {}: cannot read '{}': {}", key, path, std::strerror(err));
  // librdkafka takes C strings: a NUL would end the value unseen.
  if (data.find('\0') != std::string::npos)
    return usage_error("-X {}: '{}' holds a NUL byte", key, path);
  // As `echo secret > FILE` and systemd-creds write it.
  if (data.ends_with('\n')) data.pop_back();
  return data;
}

std::vector<std::string> translate_java_properties(KafkaConfig& config) {
  std::vector<std::string> dropped;
  std::vector<std::pair<std::string, std::string>> kept;
  std::string user, password;
  // librdkafka reads PKCS#12 keystores (Java's default since Java 9), not
  // JKS ones.
  const std::string* store_type = config.get("ssl.keystore.type");
  bool jks = store_type != nullptr && (*store_type == "JKS" || *store_type == "jks");
  // PEM stores (KIP-651) are what librdkafka reads under other names: the
  // CA a Java client trusts is librdkafka's ssl.ca.location, its keystore
  // file (the key and the certificate chain) both ssl.key.location and
  // ssl.certificate.location. A file made for Kafka's own tools then
  // verifies the brokers as they do, instead of failing the handshake.
  auto pem = [&config](std::string_view key) {
    const std::string* type = config.get(key);
    return type != nullptr && (*type == "PEM" || *type == "pem");
  };
  bool pem_trust = pem("ssl.truststore.type");
  bool pem_keys = pem("ssl.keystore.type");
  std::vector<std::pair<std::string, std::string>> pem_settings;
  for (auto& [k, v] : config.properties) {
    if (pem_trust && k == "ssl.truststore.location") {
      pem_settings.emplace_back("ssl.ca.location", v);
      continue;
    }
    if (pem_trust && k == "ssl.truststore.certificates") {
      pem_settings.emplace_back("ssl.ca.pem", v);
      continue;
    }
    if (pem_keys && k == "ssl.keystore.location") {
      pem_settings.emplace_back("ssl.key.location", v);
      pem_settings.emplace_back("ssl.certificate.location", v);
      continue;
    }
    if (pem_keys && k == "ssl.keystore.key") {
      pem_settings.emplace_back("ssl.key.pem", v);
      continue;
    }
    if (pem_keys && k == "ssl.keystore.certificate.chain") {
      pem_settings.emplace_back("ssl.certificate.pem", v);
      continue;
    }
    if ((pem_trust && k == "ssl.truststore.type") || (pem_keys && k == "ssl.keystore.type"))
      continue;
    if (k == "sasl.jaas.config") {
      user = jaas_option(v, "username");
      password = jaas_option(v, "password");
      continue;
    }
    if (k.starts_with("schema.registry.") || k.starts_with("basic.auth.")) {
      config.registry.emplace_back(std::move(k), std::move(v));
      continue;
    }
    // Java client settings with no librdkafka meaning: serializers, JKS
    // stores and the like. Passing them on would fail the whole start.
    bool keystore = k == "ssl.keystore.location" || k == "ssl.keystore.password";
    if (k.ends_with(".serializer") || k.ends_with(".deserializer") ||
        k.starts_with("ssl.truststore.") || k == "ssl.keystore.type" || (keystore && jks) ||
        k == "ssl.key.password.type" || k == "interceptor.classes" ||
        k == "sasl.login.callback.handler.class" || k == "sasl.client.callback.handler.class" ||
        k == "ssl.protocol") {
      dropped.push_back(k);
      continue;
    }
    kept.emplace_back(std::move(k), std::move(v));
  }
  config.properties = std::move(kept);
  // librdkafka's own names, when the file gives them too, win.
  for (auto& [k, v] : pem_settings)
    if (config.get(k) == nullptr) config.set(std::move(k), std::move(v));
  if (!user.empty() && config.get("sasl.username") == nullptr) config.set("sasl.username", user);
  if (!password.empty() && config.get("sasl.password") == nullptr)
    config.set("sasl.password", password);
  return dropped;
}

std::string default_config_file(const ConfigEnv& env) {
  if (!env.kpipe_config.empty()) return env.kpipe_config;
  // XDG's base directory rules: a relative XDG_CONFIG_HOME is ignored.
  if (env.xdg_config_home.starts_with('/')) return env.xdg_config_home + "/kpipe/client.properties";
  if (env.home.empty()) return {};
  return env.home + "/.config/kpipe/client.properties";
}

Expected<KafkaConfig> resolve_kafka_config(const KafkaOptions& options, const char* env_brokers) {
  KafkaConfig config;
  auto timeout = parse_duration(options.timeout);
  if (!timeout) return usage_error("--timeout: {}", timeout.error().message);
  config.timeout = *timeout;
  bool given = !options.config_file.empty();
  std::string path = given ? options.config_file : default_config_file(options.env);
  if (given && path == kNoConfigFile) path.clear();
  // KPIPE_CONFIG names a file the user means to use: missing, it is an
  // error, as --config's is. The file under ~/.config is read when present.
  bool from_env = !given && !options.env.kpipe_config.empty();
  bool absent = false;
  if (!path.empty()) {
    auto text = read_file(path, from_env ? " (from KPIPE_CONFIG)" : "",
                          given || from_env ? nullptr : &absent);
    if (!text) return text.take_error();
    if (!absent) {
      auto props = parse_properties(*text, path);
      if (!props) return props.take_error();
      // The file is what the Java tools take (--command-config): translated
      // before -X, so that -X can still override what the translation sets.
      for (auto& [k, v] : *props) config.set(std::move(k), std::move(v));
      config.ignored = translate_java_properties(config);
      config.file = path;
    }
  }
  // KPIPE_BROKERS, set for this shell or script, wins over the brokers of
  // the default file, kept for every run; a file named on the command line
  // wins over it.
  bool env_set = env_brokers != nullptr && *env_brokers != '\0';
  if (!given && env_set && config.get("bootstrap.servers") != nullptr)
    config.set("bootstrap.servers", env_brokers);
  for (const std::string& p : options.properties) {
    // No property name holds ':' or a blank: "key:value" is a mistyped
    // key=value, whose value may be a password (never echoed).
    size_t eq = p.find_first_of("=: \t");
    if (eq == std::string::npos || eq == 0 || p[eq] != '=')
      return usage_error("-X '{}': expected key=value", redact_property(p));
    auto value = property_value(p.substr(0, eq), p.substr(eq + 1));
    if (!value) return value.take_error();
    config.set(p.substr(0, eq), std::move(*value));
  }
  if (!options.brokers.empty()) {
    config.set("bootstrap.servers", options.brokers);
  } else if (config.get("bootstrap.servers") == nullptr) {
    if (!env_set) return usage_error("no brokers given: use -b HOST:PORT or set KPIPE_BROKERS");
    config.set("bootstrap.servers", env_brokers);
  }
  return config;
}

}  // namespace kpipe
