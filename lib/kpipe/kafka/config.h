// Kafka client configuration from the command line (kpipe(7), KAFKA OPTIONS): -b, -X
// key=value, --config FILE (Java .properties) and KPIPE_BROKERS. Pure: the
// kafka module applies the result to librdkafka.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kpipe/status.h"
#include "kpipe/time.h"

namespace kpipe {

struct KafkaOptions {
  std::string brokers;                  // -b; empty: KPIPE_BROKERS
  std::vector<std::string> properties;  // -X key=value, in order
  std::string config_file;              // --config
  std::string timeout = "10s";          // --timeout: how long to wait for a broker
};

struct KafkaConfig {
  std::vector<std::pair<std::string, std::string>> properties;  // later wins
  Millis timeout = 10 * kSecond;
  // Java-only keys of --config FILE that were left out (clients warn).
  std::vector<std::string> ignored;

  void set(std::string key, std::string value);
  const std::string* get(std::string_view key) const;
  std::string brokers() const;
  // Replaces every secret's value in `text` by "***", so that no message
  // quotes a password that a library error happened to include.
  std::string redact(std::string_view text) const;
};

// The properties file (translated by translate_java_properties), then -X in
// order, then -b (or KPIPE_BROKERS when -b is empty). `env_brokers` is
// KPIPE_BROKERS's value or nullptr.
Expected<KafkaConfig> resolve_kafka_config(const KafkaOptions& options, const char* env_brokers);

// Java .properties syntax: '#'/'!' comments, key=value, key:value or
// "key value", backslash continuations and escapes (\t, \n, \uXXXX).
Expected<std::vector<std::pair<std::string, std::string>>> parse_properties(std::string_view text,
                                                                            std::string_view name);

// Translates what the Java tools take and librdkafka spells differently:
// sasl.jaas.config's username and password become sasl.username and
// sasl.password. Java-only keys that librdkafka lacks are dropped, with
// their names returned so the caller can warn.
std::vector<std::string> translate_java_properties(KafkaConfig& config);

// Whether a property's value is a secret: passwords, secrets, tokens, key
// material, and settings that embed them (sasl.jaas.config).
bool is_secret_property(std::string_view key);
// `text`, a "key=value" as given (-X, a line of --config), fit to quote in
// a message: a secret's value, also after a mistyped separator
// ("sasl.password:hunter2"), is replaced by "***".
std::string redact_property(std::string_view text);

}  // namespace kpipe
