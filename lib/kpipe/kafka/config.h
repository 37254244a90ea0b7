// Kafka client configuration from the command line (kpipe(7), KAFKA OPTIONS): -b, -X
// key=value, --config FILE (Java .properties), the default client file and
// KPIPE_BROKERS. Pure: the environment comes in as values, and the kafka
// module applies the result to librdkafka.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kpipe/status.h"
#include "kpipe/time.h"

namespace kpipe {

// What the environment says of the default client file, as kcat reads
// ~/.config/kcat.conf: read by the CLI layer, so that tests give their own
// (and a test that gives none reads no file of the user's).
struct ConfigEnv {
  std::string kpipe_config;     // $KPIPE_CONFIG: the file, which must exist; empty: unset
  std::string xdg_config_home;  // $XDG_CONFIG_HOME (absolute, or ignored)
  std::string home;             // $HOME, for ~/.config
};

// The word --config takes for "no file at all"; ./none is a file of that name.
inline constexpr std::string_view kNoConfigFile = "none";

struct KafkaOptions {
  std::string brokers;                  // -b; empty: KPIPE_BROKERS
  std::vector<std::string> properties;  // -X key=value, in order
  std::string config_file;              // --config; empty: the default file; "none": no file
  std::string timeout = "10s";          // --timeout: how long to wait for a broker
  ConfigEnv env;                        // where the default file is
};

struct KafkaConfig {
  std::vector<std::pair<std::string, std::string>> properties;  // later wins
  Millis timeout = 10 * kSecond;
  // Java-only keys of --config FILE that were left out (clients warn).
  std::vector<std::string> ignored;
  // The properties file read (--config or the default file); empty: none.
  std::string file;
  // Its Schema Registry settings (schema.registry.*, basic.auth.*), as
  // Confluent's clients name them: not librdkafka's.
  std::vector<std::pair<std::string, std::string>> registry;

  void set(std::string key, std::string value);
  const std::string* get(std::string_view key) const;
  std::string brokers() const;
  // Replaces every secret's value in `text` by "***", so that no message
  // quotes a password that a library error happened to include.
  std::string redact(std::string_view text) const;
};

// The properties file (translated by translate_java_properties), then -X in
// order, then -b. The file is --config FILE; with no --config, $KPIPE_CONFIG
// (which must exist), else $XDG_CONFIG_HOME/kpipe/client.properties (or
// ~/.config/kpipe/client.properties) when it exists; with --config none, no
// file. `env_brokers`, KPIPE_BROKERS's value or nullptr, names the brokers
// when neither -b, -X nor --config FILE does: over the default file's, since
// the environment is set for this shell or script, and that file for every
// run.
Expected<KafkaConfig> resolve_kafka_config(const KafkaOptions& options, const char* env_brokers);

// The default client file options.env names, present or not (empty when it
// names none): $KPIPE_CONFIG, else the one under $XDG_CONFIG_HOME or ~/.config.
std::string default_config_file(const ConfigEnv& env);

// Java .properties syntax: '#'/'!' comments, key=value, key:value or
// "key value", backslash continuations and escapes (\t, \n, \uXXXX).
Expected<std::vector<std::pair<std::string, std::string>>> parse_properties(std::string_view text,
                                                                            std::string_view name);

// Translates what the Java tools take and librdkafka spells differently:
// sasl.jaas.config's username and password become sasl.username and
// sasl.password. Java-only keys that librdkafka lacks are dropped, with
// their names returned so the caller can warn. Schema Registry settings
// move to config.registry.
std::vector<std::string> translate_java_properties(KafkaConfig& config);

// The value of -X KEY=VALUE: VALUE, or with "@FILE" the text of FILE, one
// trailing newline left out, so that a password need not be an argument
// (which every local user sees in ps). "@@..." is a value starting with a
// literal '@'. A file that cannot be read is a usage error naming KEY and
// FILE, never quoting what the file holds.
Expected<std::string> property_value(std::string_view key, std::string_view value);

// Whether a property's value is a secret: passwords, secrets, tokens, key
// material, and settings that embed them (sasl.jaas.config).
bool is_secret_property(std::string_view key);
// `text`, a "key=value" as given (-X, a line of --config), fit to quote in
// a message: a secret's value, also after a mistyped separator
// ("sasl.password:hunter2"), is replaced by "***".
std::string redact_property(std::string_view text);

}  // namespace kpipe
