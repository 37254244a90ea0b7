// How librdkafka's errors become kpipe's messages: its log lines and error
// callbacks, the causes it gives for a broker out of reach, and which of
// its errors are the record's own, a coordinator's or a leader's away for
// now, or a fenced producer.
#include "kpipe/kafka/internal.h"

#include <cctype>

namespace kpipe {

namespace {

// "Connection refused" -> "connection refused", to follow a colon; an
// acronym ("SASL authentication error", "SSL ...") keeps its capitals.
void lower_initial(std::string& text) {
  if (!text.empty() && std::isupper(static_cast<unsigned char>(text[0])) &&
      (text.size() < 2 || std::islower(static_cast<unsigned char>(text[1]))))
    text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
}

}  // namespace

void log_cb(const rd_kafka_t* rk, int level, const char* fac, const char* buf) {
  auto* handle = static_cast<KafkaClient::Handle*>(rd_kafka_opaque(rk));
  if (handle == nullptr) return;
  // "FAIL" is a broker connection that failed or closed: refused,
  // unresolvable, TLS or SASL. At info level it is an idle connection the
  // broker closed, no failure, but for one: a PLAINTEXT client at a TLS or
  // SASL listener, which is closed as it asks for the API versions, and
  // which would otherwise be "no answer" at the timeout.
  std::string_view facility(fac);
  if (facility == "FAIL" &&
      (level <= 4 ||
       (level <= 6 && std::string_view(buf).find("security.protocol") != std::string_view::npos)))
    handle->note_error(buf);
  if (handle->reporter != nullptr)
    handle->reporter->debug(fmt::format("librdkafka: {} {}: {}", level, fac, handle->redact(buf)));
}

void error_cb(rd_kafka_t* rk, int err, const char* reason, void* opaque) {
  auto* handle = static_cast<KafkaClient::Handle*>(opaque);
  auto code = static_cast<rd_kafka_resp_err_t>(err);
  std::string text = handle->redact(reason);
  switch (code) {
    case RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN:
      if (handle->clock != nullptr) handle->watch.all_down(handle->clock->steady());
      if (handle->reporter != nullptr) handle->reporter->debug(fmt::format("librdkafka: {}", text));
      return;
    case RD_KAFKA_RESP_ERR__TRANSPORT:
    case RD_KAFKA_RESP_ERR__RESOLVE:
      // Retried by librdkafka; said once the cluster stays out of reach
      // (KafkaClient::watch_brokers) or when a request gives up.
      handle->note_error(reason);
      if (handle->reporter != nullptr) handle->reporter->debug(fmt::format("librdkafka: {}", text));
      return;
    case RD_KAFKA_RESP_ERR__AUTHENTICATION:
    case RD_KAFKA_RESP_ERR__SSL:
      handle->note_error(reason);
      // Retried like a transport error: a warning would be a second line
      // beside the error that ends a program (cluster: acls, under load).
      if (is_broken_handshake(text)) {
        if (handle->reporter != nullptr)
          handle->reporter->debug(fmt::format("librdkafka: {}", text));
        return;
      }
      break;
    case RD_KAFKA_RESP_ERR__FATAL: {
      // A refusal by the cluster's ACLs (an idempotent producer's id, a
      // transactional id) is said once, by the call it fails, naming the
      // ACL needed (acl.h): a warning too would be a second line.
      char fatal[256];
      if (refused_resource(rd_kafka_fatal_error(rk, fatal, sizeof fatal))) {
        if (handle->reporter != nullptr)
          handle->reporter->debug(fmt::format("librdkafka: {}", text));
        return;
      }
      break;
    }
    default:
      break;
  }
  if (handle->reporter != nullptr) handle->reporter->warning(fmt::format("kafka: {}", text));
}

std::string connection_reason(std::string_view text, int librdkafka_version) {
  std::string_view s = text;
  // "[thrd:b:9/bootstrap]: " of log lines.
  if (s.starts_with("[thrd:")) {
    size_t end = s.find("]: ");
    if (end != std::string_view::npos) s.remove_prefix(end + 3);
  }
  // The broker's name, "sasl_ssl://b:9093/bootstrap: ".
  size_t colon = s.find(": ");
  if (colon != std::string_view::npos) {
    std::string_view name = s.substr(0, colon);
    if (name.find(' ') == std::string_view::npos && name.find('/') != std::string_view::npos)
      s.remove_prefix(colon + 2);
  }
  size_t after = s.find(" (after ");
  if (after != std::string_view::npos) s = s.substr(0, after);
  // "Connect to ipv4#127.0.0.1:9 failed: Connection refused": the address
  // is the broker's, already named by the message.
  if (s.starts_with("Connect to ")) {
    size_t failed = s.find(" failed: ");
    if (failed != std::string_view::npos) s.remove_prefix(failed + 9);
  }
  // "... broker's supported mechanisms: " when the broker named none.
  while (!s.empty() && (s.back() == ' ' || s.back() == ':')) s.remove_suffix(1);
  std::string reason(s);
  // OpenSSL's words alone, as a refused connection reports them ("Connect
  // to ... failed: error:0A000086:SSL routines::certificate verify
  // failed"): the same failure as the handshake's, said the same way.
  if (reason.starts_with("error:") && reason.find(":SSL routines:") != std::string::npos)
    reason.insert(0, "SSL handshake failed: ");
  lower_initial(reason);
  // The password may well be right: an operator at the broker's side sees
  // only "Failed authentication", and would reset it for nothing.
  constexpr int kScramNonceFixed = 0x020601ff;  // librdkafka 2.6.1
  if (librdkafka_version < kScramNonceFixed &&
      reason.find("invalid credentials") != std::string::npos &&
      reason.find("SCRAM") != std::string::npos)
    reason += fmt::format(
        " (if the password is right: librdkafka {}.{}.{} cannot log in with SCRAM to Kafka 4 "
        "brokers, fixed in librdkafka 2.6.1; use Kafka 3.9 or earlier, or SASL PLAIN or "
        "OAUTHBEARER)",
        (librdkafka_version >> 24) & 0xff, (librdkafka_version >> 16) & 0xff,
        (librdkafka_version >> 8) & 0xff);
  return reason;
}

bool is_coordinator_away(rd_kafka_resp_err_t err) {
  return err == RD_KAFKA_RESP_ERR__WAIT_COORD ||
         err == RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE ||
         err == RD_KAFKA_RESP_ERR_NOT_COORDINATOR ||
         err == RD_KAFKA_RESP_ERR_COORDINATOR_LOAD_IN_PROGRESS ||
         err == RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT || err == RD_KAFKA_RESP_ERR__TIMED_OUT ||
         err == RD_KAFKA_RESP_ERR__TRANSPORT || err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN;
}

bool is_leader_away(rd_kafka_resp_err_t err) {
  switch (err) {
    case RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION:
    case RD_KAFKA_RESP_ERR_FENCED_LEADER_EPOCH:
    case RD_KAFKA_RESP_ERR_UNKNOWN_LEADER_EPOCH:
    case RD_KAFKA_RESP_ERR_OFFSET_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION:
      return true;
    default:
      return false;
  }
}

bool is_broken_handshake(std::string_view reason) {
  return reason.find("handshake failed: Local: Broker transport failure") != std::string_view::npos;
}

bool is_record_fault(rd_kafka_resp_err_t err) {
  switch (err) {
    case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
    // A batch larger than the topic's segment.bytes: sent again alone, a
    // record still too large is refused so for its own size.
    case RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE:
    case RD_KAFKA_RESP_ERR_INVALID_MSG_SIZE:
    case RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION:
    case RD_KAFKA_RESP_ERR_INVALID_RECORD:
    case RD_KAFKA_RESP_ERR_INVALID_TIMESTAMP:
      return true;
    default:
      return false;
  }
}

bool is_fenced(rd_kafka_resp_err_t code) {
  return code == RD_KAFKA_RESP_ERR__FENCED || code == RD_KAFKA_RESP_ERR_PRODUCER_FENCED ||
         code == RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH;
}

Error fenced_error(const KafkaConfig& config) {
  const std::string* id = config.get("transactional.id");
  return failure(
      "fenced: another producer with transactional id '{}' has started; what this one wrote "
      "since its last commit is aborted",
      id != nullptr ? *id : "");
}

std::string broker_reason(rd_kafka_resp_err_t err) {
  std::string_view text = rd_kafka_err2str(err);
  if (text.starts_with("Broker: ")) text.remove_prefix(8);
  std::string out(text);
  lower_initial(out);
  return out;
}

}  // namespace kpipe
