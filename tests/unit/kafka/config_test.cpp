#include "kpipe/kafka/config.h"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "helpers.h"

using namespace kpipe;
using kpipe::test::TempDir;

namespace {

using Props = std::vector<std::pair<std::string, std::string>>;

Props props(std::string_view text) {
  auto p = parse_properties(text, "client.properties");
  INFO(text);
  if (!p) FAIL("refused: " << p.error().message);
  return *p;
}

std::string props_error(std::string_view text) {
  auto p = parse_properties(text, "client.properties");
  INFO(text);
  if (p) FAIL("accepted");
  CHECK(p.error().status == ExitStatus::kUsage);
  return p.error().message;
}

KafkaConfig resolve(const KafkaOptions& o, const char* env = nullptr) {
  auto c = resolve_kafka_config(o, env);
  if (!c) FAIL("refused: " << c.error().message);
  return *c;
}

std::string value_of(const KafkaConfig& c, std::string_view key) {
  const std::string* v = c.get(key);
  return v != nullptr ? *v : "<unset>";
}

}  // namespace

// --- .properties syntax ---------------------------------------------------------

TEST_CASE("properties: comments and blank lines", "[kafka_config]") {
  CHECK(props("# a comment\n! another\n\n   \n  # indented comment\na=1\n") == Props{{"a", "1"}});
  CHECK(props("").empty());
  CHECK(props("a=1#not a comment\n") == Props{{"a", "1#not a comment"}});
}

TEST_CASE("properties: the three separators and the blanks around them", "[kafka_config]") {
  CHECK(props("a=1\nb:2\nc 3\nd = 4\ne : 5\nf\t6\n  g=7\n") ==
        Props{{"a", "1"}, {"b", "2"}, {"c", "3"}, {"d", "4"}, {"e", "5"}, {"f", "6"}, {"g", "7"}});
  // Only the first separator counts; a blank then '=' or ':' is one separator.
  CHECK(props("url=http://h:1/?a=b\nk :=v\nsp   =  x y  \n") ==
        Props{{"url", "http://h:1/?a=b"}, {"k", "=v"}, {"sp", "x y  "}});
  CHECK(props("empty=\nbare\nblank   \n") == Props{{"empty", ""}, {"bare", ""}, {"blank", ""}});
}

TEST_CASE("properties: continuation lines", "[kafka_config]") {
  CHECK(props("list=a,\\\n    b,\\\n\tc\nnext=1\n") == Props{{"list", "a,b,c"}, {"next", "1"}});
  // An even number of backslashes is escaped backslashes, not a continuation.
  CHECK(props("path=C:\\\\dir\\\\\nnext=1\n") == Props{{"path", "C:\\dir\\"}, {"next", "1"}});
  // A continued line is never a comment, a comment is never continued.
  CHECK(props("a=1\\\n# kept\n#c\\\nb=2\n") == Props{{"a", "1# kept"}, {"b", "2"}});
  // Continued into the end of the file.
  CHECK(props("a=x\\") == Props{{"a", "x"}});
  CHECK(props("a=x\\\r\n  y\r\n") == Props{{"a", "xy"}});
}

TEST_CASE("properties: escapes", "[kafka_config]") {
  CHECK(props("a=tab\\there\\nnl\\rcr\\fff\n") == Props{{"a", "tab\there\nnl\rcr\fff"}});
  CHECK(props("my\\ key\\=x\\:y=v\\=w\n") == Props{{"my key=x:y", "v=w"}});
  CHECK(props("a=\\q\\\\\n") == Props{{"a", "q\\"}});
}

TEST_CASE("properties: \\uXXXX escapes become UTF-8", "[kafka_config]") {
  CHECK(props("a=\\u0041\\u00e9\\u20AC\n") == Props{{"a", "A\xc3\xa9\xe2\x82\xac"}});
  CHECK(props("\\u006bey=v\n") == Props{{"key", "v"}});
  // Java strings are UTF-16: a surrogate pair is one character.
  CHECK(props("a=\\uD83D\\uDE00!\n") == Props{{"a", "\xf0\x9f\x98\x80!"}});
}

TEST_CASE("properties: errors name the file and the line", "[kafka_config]") {
  CHECK(props_error("a=1\nb=\\u12\n") == "client.properties: line 2: incomplete \\u escape");
  CHECK(props_error("a=\\u12G4\n") == "client.properties: line 1: malformed \\u escape");
  CHECK(props_error("# c\n\na=1\\\n  2\n=value\n") == "client.properties: line 5: missing key");
  CHECK(props_error("x=1\ny=long\\\n  \\u00\n") ==
        "client.properties: line 2: incomplete \\u escape");
}

// --- resolve_kafka_config: precedence ------------------------------------------------

TEST_CASE("resolve: the file, then -X in order, then -b", "[kafka_config]") {
  TempDir dir;
  KafkaOptions o;
  o.config_file = dir.write("client.properties",
                            "bootstrap.servers=file:9092\nclient.id=from-file\n"
                            "acks=1\nlinger.ms=7\n");
  KafkaConfig c = resolve(o, "env:9092");
  CHECK(c.brokers() == "file:9092");
  CHECK(value_of(c, "client.id") == "from-file");

  o.properties = {"client.id=from-x", "acks=all", "client.id=later-x"};
  c = resolve(o, "env:9092");
  CHECK(value_of(c, "client.id") == "later-x");
  CHECK(value_of(c, "acks") == "all");
  CHECK(value_of(c, "linger.ms") == "7");
  CHECK(c.brokers() == "file:9092");

  o.properties.push_back("bootstrap.servers=x:9092");
  CHECK(resolve(o, "env:9092").brokers() == "x:9092");

  o.brokers = "b:9092";
  c = resolve(o, "env:9092");
  CHECK(c.brokers() == "b:9092");
  // A key set twice keeps its first place.
  size_t n = 0;
  for (const auto& [k, v] : c.properties) n += k == "client.id";
  CHECK(n == 1);
}

TEST_CASE("resolve: KPIPE_BROKERS only when nothing else names brokers", "[kafka_config]") {
  KafkaOptions o;
  CHECK(resolve(o, "env:9092").brokers() == "env:9092");
  o.properties = {"bootstrap.servers=x:1"};
  CHECK(resolve(o, "env:9092").brokers() == "x:1");
  o.properties.clear();
  o.brokers = "b:1";
  CHECK(resolve(o, "env:9092").brokers() == "b:1");
  o.brokers.clear();
  for (const char* env : {static_cast<const char*>(nullptr), ""}) {
    auto c = resolve_kafka_config(o, env);
    REQUIRE_FALSE(c.ok());
    CHECK(c.error().status == ExitStatus::kUsage);
    CHECK(c.error().message == "no brokers given: use -b HOST:PORT or set KPIPE_BROKERS");
  }
}

TEST_CASE("resolve: --timeout", "[kafka_config]") {
  KafkaOptions o;
  o.brokers = "b:1";
  CHECK(resolve(o).timeout == 10 * kSecond);
  o.timeout = "1m30s";
  CHECK(resolve(o).timeout == 90 * kSecond);
  o.timeout = "10";
  auto c = resolve_kafka_config(o, nullptr);
  REQUIRE_FALSE(c.ok());
  CHECK(c.error().status == ExitStatus::kUsage);
  CHECK(c.error().message.starts_with("--timeout: "));
}

TEST_CASE("resolve: bad -X and a missing file are usage errors", "[kafka_config]") {
  KafkaOptions o;
  o.brokers = "b:1";
  o.properties = {"acks"};
  CHECK(resolve_kafka_config(o, nullptr).error().message == "-X 'acks': expected key=value");
  // Without a key, nobody can tell whether the value is a secret.
  o.properties = {"=all"};
  CHECK(resolve_kafka_config(o, nullptr).error().message == "-X '=***': expected key=value");
  o.properties = {"sasl.password"};
  CHECK(resolve_kafka_config(o, nullptr).error().message ==
        "-X 'sasl.password': expected key=value");
  o.properties = {"acks:all"};
  CHECK(resolve_kafka_config(o, nullptr).error().message == "-X 'acks:all': expected key=value");
  o.properties = {"sasl.password=a=b"};
  CHECK(value_of(resolve(o), "sasl.password") == "a=b");
  TempDir dir;
  o.properties.clear();
  o.config_file = dir.file("missing.properties");
  auto c = resolve_kafka_config(o, nullptr);
  REQUIRE_FALSE(c.ok());
  CHECK(c.error().status == ExitStatus::kUsage);
  CHECK(c.error().message == "cannot open config file '" + dir.file("missing.properties") +
                                 "': No such file or directory");
  o.config_file = dir.write("bad.properties", "ok=1\n=x\n");
  CHECK(resolve_kafka_config(o, nullptr).error().message ==
        dir.file("bad.properties") + ": line 2: missing key");
}

TEST_CASE("resolve: a Java client file is translated to librdkafka's terms", "[kafka_config]") {
  // What --command-config takes for the Kafka CLI tools.
  TempDir dir;
  KafkaOptions o;
  o.config_file = dir.write(
      "java.properties",
      "bootstrap.servers=k1:9093\n"
      "security.protocol=SASL_SSL\n"
      "sasl.mechanism=PLAIN\n"
      "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
      "    username=\"alice\" password=\"s3cr3t-pw\";\n"
      "key.deserializer=org.apache.kafka.common.serialization.StringDeserializer\n"
      "ssl.truststore.location=/etc/kafka/truststore.jks\n");
  KafkaConfig c = resolve(o);
  CHECK(value_of(c, "sasl.username") == "alice");
  CHECK(value_of(c, "sasl.password") == "s3cr3t-pw");
  CHECK(value_of(c, "security.protocol") == "SASL_SSL");
  CHECK(c.get("sasl.jaas.config") == nullptr);
  CHECK(c.get("key.deserializer") == nullptr);
  CHECK(c.get("ssl.truststore.location") == nullptr);
  CHECK(c.ignored == std::vector<std::string>{"key.deserializer", "ssl.truststore.location"});
  // -X still wins over what the translation produced.
  o.properties = {"sasl.password=from-x"};
  CHECK(value_of(resolve(o), "sasl.password") == "from-x");
}

// --- the default client file (kcat's ~/.config/kcat.conf) -------------------------------

namespace {

// A home with ~/.config/kpipe/client.properties holding `text`.
std::string make_home(const TempDir& dir, std::string_view text) {
  std::string home = dir.file("home");
  std::string folder = home + "/.config/kpipe";
  REQUIRE(std::system(("mkdir -p '" + folder + "'").c_str()) == 0);
  dir.write("home/.config/kpipe/client.properties", text);
  return home;
}

}  // namespace

TEST_CASE("default_config_file: KPIPE_CONFIG, else XDG_CONFIG_HOME, else ~/.config",
          "[kafka_config]") {
  CHECK(default_config_file({}) == "");
  CHECK(default_config_file({"", "", "/home/u"}) == "/home/u/.config/kpipe/client.properties");
  CHECK(default_config_file({"", "/cfg", "/home/u"}) == "/cfg/kpipe/client.properties");
  // XDG's rule: a relative XDG_CONFIG_HOME is ignored.
  CHECK(default_config_file({"", "cfg", "/home/u"}) == "/home/u/.config/kpipe/client.properties");
  CHECK(default_config_file({"/etc/k.properties", "/cfg", "/home/u"}) == "/etc/k.properties");
}

TEST_CASE("resolve: the default file is read when --config is not given", "[kafka_config]") {
  TempDir dir;
  KafkaOptions o;
  o.env.home = make_home(dir, "bootstrap.servers=home:9092\nclient.id=from-home\n");
  KafkaConfig c = resolve(o);
  CHECK(c.brokers() == "home:9092");
  CHECK(value_of(c, "client.id") == "from-home");
  CHECK(c.file == o.env.home + "/.config/kpipe/client.properties");
  // XDG_CONFIG_HOME moves it.
  REQUIRE(std::system(("mkdir -p '" + dir.file("xdg/kpipe") + "'").c_str()) == 0);
  std::string xdg_file = dir.write("xdg/kpipe/client.properties", "bootstrap.servers=xdg:9092\n");
  o.env.xdg_config_home = dir.file("xdg");
  c = resolve(o);
  CHECK(c.brokers() == "xdg:9092");
  CHECK(c.file == xdg_file);
}

TEST_CASE("resolve: no default file is no error", "[kafka_config]") {
  TempDir dir;
  KafkaOptions o;
  o.env.home = dir.file("no-such-home");
  CHECK(resolve(o, "env:1").brokers() == "env:1");
  CHECK(resolve(o, "env:1").file.empty());
  // ~/.config is a file, not a folder: still no file to read.
  o.env.home = dir.path();
  dir.write(".config", "");
  CHECK(resolve(o, "env:1").file.empty());
  o.env = {};
  auto c = resolve_kafka_config(o, nullptr);
  REQUIRE_FALSE(c.ok());
  CHECK(c.error().message == "no brokers given: use -b HOST:PORT or set KPIPE_BROKERS");
}

TEST_CASE("resolve: KPIPE_CONFIG names the default file, which must exist", "[kafka_config]") {
  TempDir dir;
  KafkaOptions o;
  o.env.home = make_home(dir, "bootstrap.servers=home:9092\nacks=1\n");
  o.env.kpipe_config = dir.write("env.properties", "bootstrap.servers=env-file:9092\n");
  KafkaConfig c = resolve(o);
  CHECK(c.brokers() == "env-file:9092");
  CHECK(c.get("acks") == nullptr);  // the home file is not read
  CHECK(c.file == o.env.kpipe_config);
  o.env.kpipe_config = dir.file("missing.properties");
  auto missing = resolve_kafka_config(o, nullptr);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().status == ExitStatus::kUsage);
  CHECK(missing.error().message == "cannot open config file '" + dir.file("missing.properties") +
                                       "' (from KPIPE_CONFIG): No such file or directory");
}

TEST_CASE("resolve: --config FILE replaces the default file, --config none reads none",
          "[kafka_config]") {
  TempDir dir;
  KafkaOptions o;
  o.env.home = make_home(dir, "bootstrap.servers=home:9092\nacks=1\n");
  o.env.kpipe_config = dir.write("env.properties", "bootstrap.servers=env-file:9092\nacks=0\n");
  o.config_file = dir.write("given.properties", "linger.ms=5\n");
  KafkaConfig c = resolve(o, "env:9092");
  CHECK(c.brokers() == "env:9092");
  CHECK(c.get("acks") == nullptr);
  CHECK(value_of(c, "linger.ms") == "5");
  CHECK(c.file == o.config_file);
  o.config_file = "none";
  c = resolve(o, "env:9092");
  CHECK(c.file.empty());
  CHECK(c.brokers() == "env:9092");
  CHECK(c.get("acks") == nullptr);
  auto c2 = resolve_kafka_config(o, nullptr);
  REQUIRE_FALSE(c2.ok());
  CHECK(c2.error().message == "no brokers given: use -b HOST:PORT or set KPIPE_BROKERS");
  // A file named none is ./none.
  o.config_file = dir.write("none", "bootstrap.servers=none-file:1\n");
  CHECK(resolve(o).brokers() == "none-file:1");
}

TEST_CASE("resolve: -b, then -X, then KPIPE_BROKERS over the default file's brokers",
          "[kafka_config]") {
  TempDir dir;
  KafkaOptions o;
  o.env.home = make_home(dir, "bootstrap.servers=home:9092\nclient.id=home\nacks=1\n");
  // The environment is this shell's; the file is every run's.
  KafkaConfig c = resolve(o, "env:9092");
  CHECK(c.brokers() == "env:9092");
  CHECK(value_of(c, "client.id") == "home");
  o.properties = {"client.id=x", "bootstrap.servers=x:9092"};
  c = resolve(o, "env:9092");
  CHECK(c.brokers() == "x:9092");
  CHECK(value_of(c, "client.id") == "x");
  CHECK(value_of(c, "acks") == "1");
  o.brokers = "b:9092";
  CHECK(resolve(o, "env:9092").brokers() == "b:9092");
  // A file named on the command line names the brokers over KPIPE_BROKERS,
  // as before.
  o.properties.clear();
  o.brokers.clear();
  o.config_file = dir.write("given.properties", "bootstrap.servers=given:9092\n");
  CHECK(resolve(o, "env:9092").brokers() == "given:9092");
}

TEST_CASE("resolve: a bad default file is named with its line", "[kafka_config]") {
  TempDir dir;
  KafkaOptions o;
  o.env.home = make_home(dir, "bootstrap.servers=h:1\n\n=x\n");
  auto c = resolve_kafka_config(o, nullptr);
  REQUIRE_FALSE(c.ok());
  CHECK(c.error().status == ExitStatus::kUsage);
  CHECK(c.error().message == o.env.home + "/.config/kpipe/client.properties: line 3: missing key");
  // A file that is there but cannot be read is an error, not an absent file.
  TempDir other;
  o.env.home = other.path();
  std::string file = other.path() + "/.config/kpipe/client.properties";
  REQUIRE(std::system(("mkdir -p '" + file + "'").c_str()) == 0);
  c = resolve_kafka_config(o, nullptr);
  REQUIRE_FALSE(c.ok());
  CHECK(c.error().message == "cannot read config file '" + file + "': Is a directory");
}

// --- secrets --------------------------------------------------------------------------

TEST_CASE("is_secret_property knows every secret librdkafka takes", "[kafka_config]") {
  for (const char* k :
       {"sasl.password", "ssl.key.password", "ssl.keystore.password", "ssl.truststore.password",
        "sasl.jaas.config", "sasl.oauthbearer.client.secret", "ssl.key.pem",
        "sasl.oauthbearer.config", "ssl_key", "password", "SASL.Password", "my.plugin.api.token",
        "some.client_secret", "sasl.oauthbearer.token.endpoint.url"})
    CHECK(is_secret_property(k));
  for (const char* k : {"sasl.username", "bootstrap.servers", "ssl.key.location", "sasl.mechanism",
                        "ssl.certificate.pem", "enable.sasl.oauthbearer.unsecure.jwt"})
    CHECK_FALSE(is_secret_property(k));
}

TEST_CASE("a mistyped -X never echoes a secret", "[kafka_config]") {
  KafkaOptions o;
  o.brokers = "b:1";
  auto error_of = [&](std::string x) {
    o.properties = {std::move(x)};
    auto c = resolve_kafka_config(o, nullptr);
    REQUIRE_FALSE(c.ok());
    CHECK(c.error().status == ExitStatus::kUsage);
    return c.error().message;
  };
  // The separator is wrong: the value is still a password.
  CHECK(error_of("sasl.password:SECRET123") == "-X 'sasl.password:***': expected key=value");
  CHECK(error_of("sasl.password SECRET123") == "-X 'sasl.password ***': expected key=value");
  CHECK(error_of("ssl.key.password:SECRET123=x") ==
        "-X 'ssl.key.password:***': expected key=value");
  CHECK(error_of("sasl.oauthbearer.client.secret:SECRET123") ==
        "-X 'sasl.oauthbearer.client.secret:***': expected key=value");
  CHECK(error_of("ssl.key.pem:-----BEGIN") == "-X 'ssl.key.pem:***': expected key=value");
  CHECK(error_of("my.token:SECRET123") == "-X 'my.token:***': expected key=value");
  // The separator is missing: the password ran into its key.
  CHECK(error_of("sasl.passwordSECRET123") == "-X 'sasl.password***': expected key=value");
  CHECK(error_of("=SECRET123") == "-X '=***': expected key=value");
}

TEST_CASE("redact_property: a secret's value, however it was typed", "[kafka_config]") {
  CHECK(redact_property("sasl.password=hunter2") == "sasl.password=***");
  CHECK(redact_property("sasl.password:hunter2") == "sasl.password:***");
  CHECK(redact_property("sasl.password") == "sasl.password");
  CHECK(redact_property("acks=all") == "acks=all");
  CHECK(redact_property("bootstrap.servers:h:9092") == "bootstrap.servers:h:9092");
}

TEST_CASE("redact replaces every secret value in a message", "[kafka_config]") {
  KafkaConfig c;
  c.set("bootstrap.servers", "h:1");
  c.set("sasl.username", "alice");
  c.set("sasl.password", "hunter2!");
  c.set("ssl.key.password", "k3y-pass");
  c.set("sasl.oauthbearer.client.secret", "oauth-secret");
  CHECK(c.redact("auth failed for alice with hunter2! (hunter2!) at h:1") ==
        "auth failed for alice with *** (***) at h:1");
  CHECK(c.redact("bad key k3y-pass, token oauth-secret") == "bad key ***, token ***");
  CHECK(c.redact("nothing secret here") == "nothing secret here");
  CHECK(c.redact("hunter2!hunter2!") == "******");
}

TEST_CASE("redact covers the password inside a sasl.jaas.config", "[kafka_config]") {
  KafkaConfig c;
  c.set("sasl.jaas.config", "PlainLoginModule required username=\"bob\" password=\"pa55word\";");
  std::string jaas = *c.get("sasl.jaas.config");
  CHECK(c.redact("invalid value \"" + jaas + "\"") == "invalid value \"***\"");
  translate_java_properties(c);
  CHECK(c.redact("login failed: bad password pa55word") == "login failed: bad password ***");
}

// --- Java properties translation -----------------------------------------------------------

TEST_CASE("translate_java_properties: jaas config to sasl.username and sasl.password",
          "[kafka_config]") {
  KafkaConfig c;
  c.set("security.protocol", "SASL_PLAINTEXT");
  c.set("sasl.jaas.config",
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        "username = 'carol' password=\"p w\";");
  auto dropped = translate_java_properties(c);
  CHECK(dropped.empty());
  CHECK(value_of(c, "sasl.username") == "carol");
  CHECK(value_of(c, "sasl.password") == "p w");
  CHECK(c.get("sasl.jaas.config") == nullptr);
  CHECK(c.properties.front().first == "security.protocol");
}

TEST_CASE("translate_java_properties: explicit sasl settings are kept", "[kafka_config]") {
  KafkaConfig c;
  c.set("sasl.password", "explicit");
  c.set("sasl.jaas.config", "PlainLoginModule required username=\"u\" password=\"from-jaas\";");
  translate_java_properties(c);
  CHECK(value_of(c, "sasl.password") == "explicit");
  CHECK(value_of(c, "sasl.username") == "u");
}

TEST_CASE("translate_java_properties: Java-only keys are dropped and named", "[kafka_config]") {
  KafkaConfig c;
  for (const char* k :
       {"bootstrap.servers", "key.serializer", "value.serializer", "key.deserializer",
        "value.deserializer", "ssl.truststore.location", "ssl.truststore.password",
        "ssl.truststore.type", "ssl.keystore.type", "ssl.keystore.location",
        "ssl.keystore.password", "interceptor.classes", "sasl.login.callback.handler.class",
        "sasl.client.callback.handler.class", "ssl.protocol", "acks", "ssl.ca.location"})
    c.set(k, "x");
  c.set("ssl.keystore.type", "JKS");
  auto dropped = translate_java_properties(c);
  CHECK(dropped == std::vector<std::string>{
                       "key.serializer", "value.serializer", "key.deserializer",
                       "value.deserializer", "ssl.truststore.location", "ssl.truststore.password",
                       "ssl.truststore.type", "ssl.keystore.type", "ssl.keystore.location",
                       "ssl.keystore.password", "interceptor.classes",
                       "sasl.login.callback.handler.class", "sasl.client.callback.handler.class",
                       "ssl.protocol"});
  std::vector<std::string> kept;
  for (const auto& [k, v] : c.properties) kept.push_back(k);
  CHECK(kept == std::vector<std::string>{"bootstrap.servers", "acks", "ssl.ca.location"});
}

TEST_CASE("translate_java_properties: PEM stores become librdkafka's CA, key and certificate",
          "[kafka_config]") {
  KafkaConfig c;
  c.set("security.protocol", "SASL_SSL");
  c.set("ssl.truststore.type", "PEM");
  c.set("ssl.truststore.location", "/etc/kafka/ca.crt");
  c.set("ssl.keystore.type", "PEM");
  c.set("ssl.keystore.location", "/etc/kafka/client.pem");
  c.set("ssl.key.password", "k3y");
  auto dropped = translate_java_properties(c);
  CHECK(dropped.empty());
  CHECK(value_of(c, "ssl.ca.location") == "/etc/kafka/ca.crt");
  CHECK(value_of(c, "ssl.key.location") == "/etc/kafka/client.pem");
  CHECK(value_of(c, "ssl.certificate.location") == "/etc/kafka/client.pem");
  CHECK(value_of(c, "ssl.key.password") == "k3y");
  CHECK(c.get("ssl.truststore.location") == nullptr);
  CHECK(c.get("ssl.truststore.type") == nullptr);
  CHECK(c.get("ssl.keystore.type") == nullptr);

  // Inline PEM, and librdkafka's own name given as well: that one wins.
  KafkaConfig inline_pem;
  inline_pem.set("ssl.truststore.type", "pem");
  inline_pem.set("ssl.truststore.certificates", "-----BEGIN CERTIFICATE-----...");
  inline_pem.set("ssl.keystore.type", "PEM");
  inline_pem.set("ssl.keystore.key", "-----BEGIN PRIVATE KEY-----...");
  inline_pem.set("ssl.keystore.certificate.chain", "-----BEGIN CERTIFICATE-----chain");
  inline_pem.set("ssl.ca.pem", "-----BEGIN CERTIFICATE-----own");
  CHECK(translate_java_properties(inline_pem).empty());
  CHECK(value_of(inline_pem, "ssl.ca.pem") == "-----BEGIN CERTIFICATE-----own");
  CHECK(value_of(inline_pem, "ssl.key.pem") == "-----BEGIN PRIVATE KEY-----...");
  CHECK(value_of(inline_pem, "ssl.certificate.pem") == "-----BEGIN CERTIFICATE-----chain");

  // A JKS truststore (Java's default type) librdkafka cannot read: dropped
  // and named, as before.
  KafkaConfig jks;
  jks.set("ssl.truststore.location", "/etc/kafka/truststore.jks");
  CHECK(translate_java_properties(jks) == std::vector<std::string>{"ssl.truststore.location"});
  CHECK(jks.get("ssl.ca.location") == nullptr);
}

TEST_CASE("translate_java_properties: a PKCS#12 keystore is kept, librdkafka reads it",
          "[kafka_config]") {
  KafkaConfig c;
  c.set("ssl.keystore.location", "/etc/kafka/client.p12");
  c.set("ssl.keystore.password", "secret");
  auto dropped = translate_java_properties(c);
  CHECK(dropped.empty());
  CHECK(value_of(c, "ssl.keystore.location") == "/etc/kafka/client.p12");
  c.set("ssl.keystore.type", "PKCS12");
  dropped = translate_java_properties(c);
  CHECK(dropped == std::vector<std::string>{"ssl.keystore.type"});
  CHECK(value_of(c, "ssl.keystore.password") == "secret");
}

TEST_CASE("KafkaConfig: set replaces in place, get finds", "[kafka_config]") {
  KafkaConfig c;
  c.set("a", "1");
  c.set("b", "2");
  c.set("a", "3");
  REQUIRE(c.properties.size() == 2);
  CHECK(c.properties[0] == std::pair<std::string, std::string>{"a", "3"});
  CHECK(c.get("b") != nullptr);
  CHECK(c.get("c") == nullptr);
  CHECK(c.brokers().empty());
}

TEST_CASE("translate_java_properties: Schema Registry settings are kept apart, not librdkafka's",
          "[kafka_config]") {
  KafkaConfig c;
  c.set("bootstrap.servers", "b:9092");
  c.set("schema.registry.url", "https://reg:8081");
  c.set("basic.auth.credentials.source", "USER_INFO");
  c.set("basic.auth.user.info", "svc:hunter2");
  c.set("schema.registry.ssl.ca.location", "/etc/ca.pem");
  CHECK(translate_java_properties(c).empty());
  std::vector<std::string> kept;
  for (const auto& [k, v] : c.properties) kept.push_back(k);
  CHECK(kept == std::vector<std::string>{"bootstrap.servers"});
  CHECK(c.registry == Props{{"schema.registry.url", "https://reg:8081"},
                            {"basic.auth.credentials.source", "USER_INFO"},
                            {"basic.auth.user.info", "svc:hunter2"},
                            {"schema.registry.ssl.ca.location", "/etc/ca.pem"}});
  CHECK(is_secret_property("basic.auth.user.info"));
  CHECK(redact_property("basic.auth.user.info=svc:hunter2") == "basic.auth.user.info=***");
}

TEST_CASE("resolve: -X KEY=@FILE reads the value from FILE, one trailing newline left out",
          "[kafka_config]") {
  TempDir dir;
  KafkaOptions o;
  o.brokers = "b:1";
  std::string pw = dir.write("pw", "s3cret\n");
  o.properties = {"sasl.password=@" + pw, "sasl.username=@" + dir.write("user", "app\n\n"),
                  "client.id=@" + dir.write("id", "no-newline")};
  KafkaConfig c = resolve(o);
  CHECK(value_of(c, "sasl.password") == "s3cret");
  CHECK(value_of(c, "sasl.username") == "app\n");
  CHECK(value_of(c, "client.id") == "no-newline");
  // "@@" is a value that starts with a literal '@'.
  o.properties = {"sasl.password=@@" + pw, "client.id=@@", "acks=a@b"};
  c = resolve(o);
  CHECK(value_of(c, "sasl.password") == "@" + pw);
  CHECK(value_of(c, "client.id") == "@");
  CHECK(value_of(c, "acks") == "a@b");
}

TEST_CASE("resolve: an unreadable -X @FILE is a usage error naming the key and the file",
          "[kafka_config]") {
  TempDir dir;
  KafkaOptions o;
  o.brokers = "b:1";
  auto error_of = [&](const std::string& property) {
    o.properties = {property};
    auto c = resolve_kafka_config(o, nullptr);
    REQUIRE_FALSE(c.ok());
    CHECK(c.error().status == ExitStatus::kUsage);
    return c.error().message;
  };
  CHECK(error_of("sasl.password=@" + dir.file("missing")) ==
        "-X sasl.password: cannot open '" + dir.file("missing") + "': No such file or directory");
  CHECK(error_of("sasl.password=@") ==
        "-X sasl.password: cannot open '': No such file or directory");
  CHECK(error_of("sasl.password=@" + dir.path()) ==
        "-X sasl.password: cannot read '" + dir.path() + "': Is a directory");
  // What the file holds is never quoted, not even when it cannot be used.
  std::string nul = dir.write("nul", std::string("hunter2\0x", 9));
  std::string message = error_of("sasl.password=@" + nul);
  CHECK(message == "-X sasl.password: '" + nul + "' holds a NUL byte");
  CHECK(message.find("hunter2") == std::string::npos);
}
