#include "kpipe/store/postgres.h"

#include <algorithm>
#include <cerrno>  // program_invocation_short_name
#include <cstdlib>
#include <cstring>

#include <libpq-fe.h>
#include <unistd.h>

#include "kpipe/percent.h"
#include "kpipe/target.h"

namespace kpipe {

namespace {

// libpq's messages span lines ("...failed: Connection refused\n\tIs the
// server running..."): one line, as every kpipe diagnostic.
std::string one_line(std::string_view message) {
  // The server's severity is not kpipe's ("FATAL:  terminating ...").
  for (std::string_view severity : {"FATAL:  ", "ERROR:  "})
    if (message.starts_with(severity)) message.remove_prefix(severity.size());
  std::string out;
  bool space = false;
  for (char c : message) {
    if (c == '\n' || c == '\r' || c == '\t') {
      space = !out.empty();
      continue;
    }
    if (space) out.append(out.back() == ':' || out.back() == '.' ? " " : "; ");
    space = false;
    out.push_back(c);
  }
  return out;
}

// libpq's connection keywords ("host", "sslmode", ...): where a password
// written without quotes may end.
bool is_keyword(std::string_view word) {
  static const std::vector<std::string> keywords = [] {
    std::vector<std::string> out;
    char* error = nullptr;
    // An empty conninfo parses to every option libpq knows, none set.
    PQconninfoOption* options = PQconninfoParse("", &error);
    PQfreemem(error);
    if (options == nullptr) return out;
    for (PQconninfoOption* o = options; o->keyword != nullptr; ++o) out.emplace_back(o->keyword);
    PQconninfoFree(options);
    return out;
  }();
  return std::find(keywords.begin(), keywords.end(), word) != keywords.end();
}

// %XX decoded; a '%' that starts no escape is kept, as the text it is:
// the password as libpq would read it, or as its writer meant it.
std::string percent_decoded(std::string_view text) {
  std::string out;
  percent_decode(text, out);
  return out;
}

// A password in a target: where its text is, what the display leaves out
// with it (the ':' before it, the whole "password=" parameter) and its
// value as libpq would read it.
struct Secret {
  size_t at = 0;
  size_t size = 0;
  size_t cut_at = 0;
  size_t cut_size = 0;
  std::string value;
};

// Where a password written without quotes ends: before the next '&'
// (URI) or blank (conninfo) that starts a libpq keyword with its '='. What
// is between is the password as its writer meant it ("password=abc def"),
// even where libpq reads "def" as a keyword of its own and says so.
size_t password_end(std::string_view text, size_t from, bool uri) {
  size_t at = from;
  for (;;) {
    size_t sep = uri ? text.find('&', at) : text.find_first_of(" \t\n\r\f\v", at);
    if (sep == std::string_view::npos) return text.size();
    size_t word = uri ? sep + 1 : text.find_first_not_of(" \t\n\r\f\v", sep);
    if (word == std::string_view::npos) return sep;
    size_t eq = text.find('=', word);
    if (eq != std::string_view::npos) {
      std::string_view key = text.substr(word, eq - word);
      if (!uri) key = key.substr(0, key.find_last_not_of(" \t\n\r\f\v") + 1);
      if (is_keyword(uri ? std::string_view(percent_decoded(key)) : key)) return sep;
    }
    at = word;
  }
}

// The passwords of a URI: in its userinfo ("postgresql://app:pw@db") and
// in "password=" parameters, where libpq reads them and where a password
// that is not percent-encoded as it should be would put them.
std::vector<Secret> uri_secrets(std::string_view target) {
  std::vector<Secret> out;
  size_t after = target.find("://") + 3;
  size_t slash = target.find('/', after);
  // The userinfo ends at the last '@' before the path (a password may hold
  // an '@'); without one there, at the last '@' before the query, for a
  // password holding a '/' ("app:se/cret@db"), unless what follows the ':'
  // is a port ("db:5432/name@x" names a database).
  size_t at_sign = target.substr(0, slash).rfind('@');
  if (at_sign < after) at_sign = std::string_view::npos;
  if (at_sign == std::string_view::npos && slash != std::string_view::npos) {
    size_t query = target.find('?', slash);
    size_t last = target.substr(0, query).rfind('@');
    size_t colon = target.find(':', after);
    if (last != std::string_view::npos && colon < slash &&
        target.substr(colon + 1, slash - colon - 1).find_first_not_of("0123456789") !=
            std::string_view::npos)
      at_sign = last;
  }
  if (at_sign != std::string_view::npos) {
    size_t colon = target.find(':', after);
    if (colon < at_sign) {
      std::string_view raw = target.substr(colon + 1, at_sign - colon - 1);
      out.push_back({colon + 1, raw.size(), colon, at_sign - colon, percent_decoded(raw)});
    }
  }
  size_t query = target.find('?', at_sign == std::string_view::npos ? after : at_sign + 1);
  if (query == std::string_view::npos) return out;
  for (size_t p = query + 1; p < target.size();) {
    size_t amp = target.find('&', p);
    size_t eq = target.find('=', p);
    if (eq < amp && percent_decoded(target.substr(p, eq - p)) == "password") {
      size_t end = password_end(target, eq + 1, true);
      std::string_view raw = target.substr(eq + 1, end - eq - 1);
      // The parameter goes with the '&' before it, or the one after it
      // when it is the first.
      size_t cut_at = p == query + 1 ? p : p - 1;
      size_t cut_end = p == query + 1 && end < target.size() ? end + 1 : end;
      out.push_back({eq + 1, raw.size(), cut_at, cut_end - cut_at, percent_decoded(raw)});
      amp = end;
    }
    if (amp == std::string_view::npos) break;
    p = amp + 1;
  }
  return out;
}

// The passwords of a conninfo: every "password =" in it, even inside
// another quoted value (where a missing quote would end it), with its
// value quoted or up to the next keyword.
std::vector<Secret> conninfo_secrets(std::string_view target) {
  std::vector<Secret> out;
  for (size_t at = target.find("password"); at != std::string_view::npos;
       at = target.find("password", at + 1)) {
    size_t eq = target.find_first_not_of(" \t\n\r\f\v", at + 8);
    if (eq == std::string_view::npos || target[eq] != '=') continue;
    size_t start = target.find_first_not_of(" \t\n\r\f\v", eq + 1);
    if (start == std::string_view::npos) continue;
    size_t end = target.size();
    std::string value;
    if (target[start] == '\'') {
      // Quoted: up to the closing quote, or to the end when there is none.
      for (size_t i = start + 1; i < target.size(); ++i) {
        if (target[i] == '\\' && i + 1 < target.size()) {
          value.push_back(target[++i]);
          continue;
        }
        if (target[i] == '\'') {
          end = i + 1;
          break;
        }
        value.push_back(target[i]);
      }
    } else {
      end = password_end(target, start, false);
      for (size_t i = start; i < end; ++i) {
        if (target[i] == '\\' && i + 1 < end) ++i;
        value.push_back(target[i]);
      }
    }
    out.push_back({start, end - start, at, end - at, std::move(value)});
  }
  return out;
}

std::vector<Secret> secrets_of(std::string_view target) {
  return is_postgres_uri(target) ? uri_secrets(target) : conninfo_secrets(target);
}

std::string redact_uri(std::string_view target) {
  std::string out;
  size_t from = 0;
  for (const Secret& s : uri_secrets(target)) {
    if (s.cut_at < from) continue;
    out.append(target.substr(from, s.cut_at - from));
    from = s.cut_at + s.cut_size;
  }
  out.append(target.substr(from));
  // A query left with nothing in it.
  if (out.ends_with('?')) out.pop_back();
  return out;
}

// Whether `piece`, a text libpq quoted, gives away a password: it is, or
// holds, some of a password's text in the target, or holds (or is part
// of) a password as libpq decoded it.
bool gives_away(std::string_view piece, std::string_view target,
                const std::vector<Secret>& secrets) {
  if (piece.empty()) return false;
  for (size_t at = target.find(piece); at != std::string_view::npos;
       at = target.find(piece, at + 1))
    for (const Secret& s : secrets)
      if (at < s.at + s.size && s.at < at + piece.size()) return true;
  for (const Secret& s : secrets) {
    if (s.value.empty()) continue;
    if (piece.find(s.value) != std::string_view::npos || s.value.find(piece) != std::string::npos)
      return true;
  }
  return false;
}

std::string redact_conninfo(std::string_view target) {
  std::string conninfo(postgres_conninfo(target));
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), &error);
  if (options == nullptr) {
    PQfreemem(error);
    return "postgresql:(a conninfo libpq cannot read)";
  }
  std::string out = "postgresql:";
  bool first = true;
  for (PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    if (o->val == nullptr || std::strcmp(o->keyword, "password") == 0) continue;
    if (!first) out.push_back(' ');
    first = false;
    out.append(o->keyword).push_back('=');
    std::string_view v = o->val;
    bool quote = v.empty() || v.find_first_of(" '\\") != std::string_view::npos;
    if (quote) out.push_back('\'');
    for (char c : v) {
      if (c == '\'' || c == '\\') out.push_back('\\');
      out.push_back(c);
    }
    if (quote) out.push_back('\'');
  }
  PQconninfoFree(options);
  return out;
}

}  // namespace

std::string redact_postgres_target(std::string_view target) {
  return is_postgres_uri(target) ? redact_uri(target) : redact_conninfo(target);
}

std::string redact_postgres_message(std::string_view message, std::string_view target) {
  std::string line = one_line(message);
  std::vector<Secret> secrets = secrets_of(target);
  if (secrets.empty()) return line;
  // What libpq quotes of a target it cannot read: the URI whole, a token
  // of it (invalid percent-encoded token: "PW_A%zz"; missing "=" after
  // "def"). A quoted text ends at the last '"' that leaves it a
  // piece of the target, which may itself hold a '"'.
  std::string out;
  size_t from = 0;
  for (size_t open = line.find('"'); open != std::string::npos;) {
    size_t close = std::string::npos;
    for (size_t q = line.find('"', open + 1); q != std::string::npos; q = line.find('"', q + 1))
      if (target.find(std::string_view(line).substr(open + 1, q - open - 1)) !=
          std::string_view::npos)
        close = q;
    if (close == std::string::npos) {
      open = line.find('"', open + 1);
      continue;
    }
    std::string_view piece = std::string_view(line).substr(open + 1, close - open - 1);
    if (gives_away(piece, target, secrets)) {
      out.append(line, from, open - from);
      // The target whole is shown as everywhere else; a piece as "***".
      bool whole = piece == target || piece == postgres_conninfo(target);
      out.append(fmt::format("\"{}\"", whole ? redact_postgres_target(target) : "***"));
      from = close + 1;
    }
    open = line.find('"', close + 1);
  }
  out.append(line, from);
  // Nor anywhere else, quoted or not. A password shorter than 4 bytes is
  // left to the quoted texts: replacing it everywhere would blot out the
  // message's own words, and with them what the password is made of.
  for (const Secret& s : secrets) {
    for (std::string_view value : {target.substr(s.at, s.size), std::string_view(s.value)}) {
      if (value.size() < 4) continue;
      for (size_t at = out.find(value); at != std::string::npos; at = out.find(value, at + 3))
        out.replace(at, value.size(), "***");
    }
  }
  return out;
}

void append_copy_text(std::string& out, std::string_view value) {
  // Most values hold none of the four: copied in runs, not byte by byte.
  constexpr std::string_view kSpecial("\\\t\n\r", 4);
  size_t start = 0;
  for (;;) {
    size_t at = value.find_first_of(kSpecial, start);
    if (at == std::string_view::npos) {
      out.append(value.substr(start));
      return;
    }
    out.append(value.substr(start, at - start));
    switch (value[at]) {
      case '\\':
        out.append("\\\\");
        break;
      case '\t':
        out.append("\\t");
        break;
      case '\n':
        out.append("\\n");
        break;
      default:
        out.append("\\r");
    }
    start = at + 1;
  }
}

// --- results -------------------------------------------------------------------

PgResult::~PgResult() {
  if (r_ != nullptr) PQclear(r_);
}

PgResult& PgResult::operator=(PgResult&& other) noexcept {
  if (this != &other) {
    if (r_ != nullptr) PQclear(r_);
    r_ = other.r_;
    other.r_ = nullptr;
  }
  return *this;
}

int PgResult::rows() const {
  return r_ == nullptr ? 0 : PQntuples(r_);
}
int PgResult::columns() const {
  return r_ == nullptr ? 0 : PQnfields(r_);
}
bool PgResult::is_null(int row, int column) const {
  return PQgetisnull(r_, row, column) != 0;
}
std::string_view PgResult::text(int row, int column) const {
  return {PQgetvalue(r_, row, column), static_cast<size_t>(PQgetlength(r_, row, column))};
}
int64_t PgResult::integer(int row, int column) const {
  return std::strtoll(PQgetvalue(r_, row, column), nullptr, 10);
}
unsigned PgResult::type(int column) const {
  return PQftype(r_, column);
}
std::string_view PgResult::name(int column) const {
  return PQfname(r_, column);
}
std::string_view PgResult::command() const {
  return r_ == nullptr ? "" : PQcmdStatus(r_);
}
int64_t PgResult::affected() const {
  const char* n = r_ == nullptr ? "" : PQcmdTuples(r_);
  return *n == '\0' ? 0 : std::strtoll(n, nullptr, 10);
}

// --- the connection ------------------------------------------------------------

PgConnection::PgConnection(pg_conn* conn, std::string target, std::string display)
    : conn_(conn), target_(std::move(target)), display_(std::move(display)) {}

PgConnection::~PgConnection() {
  PQfinish(conn_);
}

Expected<std::unique_ptr<PgConnection>> PgConnection::connect(const std::string& target,
                                                              const std::string& application) {
  std::string dbname(postgres_conninfo(target));
  std::string display = redact_postgres_target(target);
  // With expand_dbname, what the target says overrides the keywords before
  // it, and the keywords after it override the target.
  std::vector<const char*> keys, values;
  if (std::getenv("PGCONNECT_TIMEOUT") == nullptr) {
    keys.push_back("connect_timeout");
    values.push_back("10");
  }
  // PROGRAM[PID]: who holds a lock (StateStore), and which process a
  // session of pg_stat_activity is.
  std::string name = fmt::format(
      "{}[{}]", application.empty() ? program_invocation_short_name : application, ::getpid());
  keys.insert(keys.end(), {"fallback_application_name", "dbname", "client_encoding", nullptr});
  values.insert(values.end(), {name.c_str(), dbname.c_str(), "UTF8", nullptr});
  PGconn* conn = PQconnectdbParams(keys.data(), values.data(), 1);
  if (conn == nullptr) return failure("{}: cannot connect: out of memory", display);
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string why = redact_postgres_message(PQerrorMessage(conn), target);
    PQfinish(conn);
    return failure("{}: cannot connect: {}", display, why);
  }
  // Notices (a name truncated, a table that already exists) are the
  // server's chatter, not the program's diagnostics.
  PQsetNoticeProcessor(
      conn, [](void*, const char*) {}, nullptr);
  // A transaction of kpipe's never waits long on its client: one that does
  // belongs to a process that has stopped (SIGSTOP, a paused VM, a network
  // cut), and its locks (a stage's FOR SHARE on partition_owners) would hold
  // the instance taking its partitions over for as long (kpipe(7), MANY
  // INSTANCES). The server ends such a session and frees its locks.
  PGresult* set = PQexec(conn, fmt::format("SET idle_in_transaction_session_timeout = '{}ms'",
                                           kIdleInTransactionTimeout)
                                   .c_str());
  bool ok = set != nullptr && PQresultStatus(set) == PGRES_COMMAND_OK;
  PQclear(set);
  if (!ok) {
    std::string why = redact_postgres_message(PQerrorMessage(conn), target);
    PQfinish(conn);
    return failure("{}: cannot set idle_in_transaction_session_timeout: {}", display, why);
  }
  return std::unique_ptr<PgConnection>(new PgConnection(conn, target, std::move(display)));
}

bool PgConnection::broken() const {
  return PQstatus(conn_) != CONNECTION_OK;
}

bool PgConnection::refused_values() const {
  return sqlstate_.starts_with("22") || sqlstate_.starts_with("23");
}

Expected<PgResult> PgConnection::outcome(pg_result* r, std::string_view what) {
  PgResult result(r);
  // The longest wait between two replies inside the open transaction: a
  // process stopped between statements, or before it read a reply.
  auto now = std::chrono::steady_clock::now();
  int64_t gap = std::chrono::duration_cast<std::chrono::milliseconds>(now - last_reply_).count();
  if (in_transaction_) transaction_pause_ = std::max(transaction_pause_, gap);
  int64_t pause = transaction_pause_;
  PGTransactionStatusType tx = PQtransactionStatus(conn_);
  // A COPY under way (PQTRANS_ACTIVE) keeps the server busy, not idle:
  // its time is no pause, but the transaction, and its pause, go on.
  in_transaction_ = tx == PQTRANS_INTRANS || tx == PQTRANS_INERROR;
  if (tx == PQTRANS_IDLE) transaction_pause_ = 0;
  last_reply_ = now;
  ExecStatusType status = r == nullptr ? PGRES_FATAL_ERROR : PQresultStatus(r);
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK || status == PGRES_COPY_IN)
    return result;
  const char* state = r == nullptr ? nullptr : PQresultErrorField(r, PG_DIAG_SQLSTATE);
  const char* primary = r == nullptr ? nullptr : PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
  sqlstate_ = state != nullptr ? state : "";
  if (primary != nullptr) {
    reason_ = redact_postgres_message(primary, target_);
  } else {
    // libpq's own message: its first line says what happened; the rest
    // ("This probably means the server terminated abnormally...") guesses.
    std::string_view message = PQerrorMessage(conn_);
    message.remove_prefix(std::min(message.size(), message.find_first_not_of(" \n")));
    reason_ = redact_postgres_message(message.substr(0, message.find('\n')), target_);
  }
  if (broken() && pause >= kIdleInTransactionTimeout) {
    // libpq says only that the server closed the connection: the server
    // ended it for the wait (a stopped process, a paused VM).
    return failure(
        "{}: lost the connection: {} (after a pause of {} s inside a transaction: the server ends "
        "a session idle in a transaction at {} s, kpipe(7) MANY INSTANCES)",
        display_, reason_, pause / 1000, kIdleInTransactionTimeout / 1000);
  }
  if (broken()) return failure("{}: lost the connection: {}", display_, reason_);
  return failure("{}: {}: {}", display_, what, reason_);
}

Status PgConnection::exec(std::string_view sql) {
  std::string text(sql);
  auto r = outcome(PQexec(conn_, text.c_str()), "statement failed");
  if (!r) return r.take_error();
  return {};
}

Expected<PgResult> PgConnection::query(std::string_view sql, const std::vector<PgParam>& params) {
  std::string text(sql);
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
  return outcome(PQexecParams(conn_, text.c_str(), static_cast<int>(values.size()), nullptr,
                              values.data(), nullptr, nullptr, 0),
                 "query failed");
}

Expected<PgResult> PgConnection::run_params(const std::string& sql, int n, const unsigned* types,
                                            const char* const* values, const int* lengths,
                                            const int* formats) {
  return outcome(PQexecParams(conn_, sql.c_str(), n, types, values, lengths, formats, 0),
                 "statement failed");
}

Status PgConnection::commit() {
  auto r = query("COMMIT");
  if (!r) return r.take_error();
  // COMMIT of a transaction a failed statement aborted answers ROLLBACK.
  if (r->command() == "ROLLBACK")
    return failure("{}: the transaction was rolled back, not committed", display_);
  return {};
}

Status PgConnection::copy_in(std::string_view copy_sql, std::string_view data) {
  std::string text(copy_sql);
  auto started = outcome(PQexec(conn_, text.c_str()), "COPY failed");
  if (!started) return started.take_error();
  constexpr size_t kChunk = 1 << 20;
  for (size_t at = 0; at < data.size(); at += kChunk) {
    size_t n = std::min(kChunk, data.size() - at);
    if (PQputCopyData(conn_, data.data() + at, static_cast<int>(n)) != 1) break;
  }
  PQputCopyEnd(conn_, nullptr);
  // The COPY's outcome, then nothing: every result is read, so that the
  // connection is ready for the next query.
  Status status;
  while (PGresult* r = PQgetResult(conn_)) {
    auto done = outcome(r, "COPY failed");
    if (!done && status.ok()) status = done.take_error();
  }
  if (status.ok() && broken())
    return failure("{}: lost the connection during COPY: {}", display_,
                   redact_postgres_message(PQerrorMessage(conn_), target_));
  return status;
}

}  // namespace kpipe

// --- the Database of sql.h -------------------------------------------------------

namespace kpipe {

std::string postgres_placeholders(std::string_view sql) {
  std::string out;
  out.reserve(sql.size() + 8);
  int next = 0;
  for (size_t i = 0; i < sql.size(); ++i) {
    char c = sql[i];
    if (c == '\'' || c == '"') {
      size_t end = sql.find(c, i + 1);
      if (end == std::string_view::npos) end = sql.size() - 1;
      out.append(sql.substr(i, end - i + 1));
      i = end;
      continue;
    }
    if (c != '?') {
      out.push_back(c);
      continue;
    }
    size_t digits = i + 1;
    while (digits < sql.size() && sql[digits] >= '0' && sql[digits] <= '9') ++digits;
    out.push_back('$');
    if (digits > i + 1) {
      out.append(sql.substr(i + 1, digits - i - 1));
      i = digits - 1;
    } else {
      out.append(std::to_string(++next));
    }
  }
  return out;
}

namespace {

// PostgreSQL's type oids (catalog/pg_type.h, stable across versions).
constexpr Oid kBoolOid = 16, kByteaOid = 17, kInt8Oid = 20, kInt2Oid = 21, kInt4Oid = 23,
              kTextOid = 25, kFloat4Oid = 700, kFloat8Oid = 701, kNumericOid = 1700;

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return 0;
}

class PgStatement final : public Statement::Impl {
 public:
  PgStatement(PgConnection& conn, std::string sql, int64_t& changes)
      : conn_(conn), sql_(std::move(sql)), changes_(changes) {}

  void bind_int(int i, int64_t v) override { set(i, std::to_string(v), kInt8Oid, 0); }
  void bind_double(int i, double v) override { set(i, fmt::format("{}", v), kFloat8Oid, 0); }
  void bind_text(int i, std::string_view v, bool) override { set(i, std::string(v), kTextOid, 0); }
  void bind_blob(int i, std::string_view v) override {
    set(i, std::string(v), kByteaOid, 1);  // binary: the bytes as they are
  }
  void bind_null(int i) override {
    slot(i);
    null_[static_cast<size_t>(i - 1)] = true;
  }

  Expected<bool> step() override {
    if (executed_) return ++row_ < result_.rows();
    size_t n = values_.size();
    std::vector<const char*> values(n);
    std::vector<int> lengths(n);
    for (size_t i = 0; i < n; ++i) {
      values[i] = null_[i] ? nullptr : values_[i].data();
      lengths[i] = static_cast<int>(values_[i].size());
    }
    auto r = conn_.run_params(sql_, static_cast<int>(n), types_.data(), values.data(),
                              lengths.data(), formats_.data());
    if (!r) {
      refusal_ = conn_.refused_values() ? conn_.reason() : "";
      return r.take_error();
    }
    result_ = std::move(*r);
    changes_ = result_.affected();
    executed_ = true;
    row_ = 0;
    decoded_.assign(static_cast<size_t>(result_.columns()), std::string());
    return row_ < result_.rows();
  }

  void reset() override {
    executed_ = false;
    result_ = PgResult();
    values_.clear();
    null_.clear();
    types_.clear();
    formats_.clear();
  }
  const std::string& refusal() const override { return refusal_; }

  Statement::Type column_type(int i) const override {
    if (result_.is_null(row_, i)) return Statement::Type::kNull;
    switch (result_.type(i)) {
      case kInt2Oid:
      case kInt4Oid:
      case kInt8Oid:
      case kBoolOid:
        return Statement::Type::kInteger;
      case kFloat4Oid:
      case kFloat8Oid:
      case kNumericOid:
        return Statement::Type::kFloat;
      case kByteaOid:
        return Statement::Type::kBlob;
      default:
        return Statement::Type::kText;
    }
  }
  int64_t column_int(int i) const override {
    if (result_.is_null(row_, i)) return 0;
    if (result_.type(i) == kBoolOid) return result_.text(row_, i) == "t" ? 1 : 0;
    return result_.integer(row_, i);
  }
  double column_double(int i) const override {
    if (result_.is_null(row_, i)) return 0;
    return std::strtod(std::string(result_.text(row_, i)).c_str(), nullptr);
  }
  std::string_view column_text(int i) const override {
    if (result_.is_null(row_, i)) return {};
    std::string_view text = result_.text(row_, i);
    if (result_.type(i) != kByteaOid) return text;
    // bytea comes as text in hex: \x0a1b...
    std::string& out = decoded_[static_cast<size_t>(i)];
    out.clear();
    for (size_t k = 2; k + 1 < text.size(); k += 2)
      out.push_back(static_cast<char>(hex_digit(text[k]) << 4 | hex_digit(text[k + 1])));
    return out;
  }
  std::string_view column_json(int i) const override {
    if (result_.is_null(row_, i)) return {};
    std::string_view text = result_.text(row_, i);
    switch (result_.type(i)) {
      case kBoolOid:
        return text == "t" ? "true" : "false";
      case kInt2Oid:
      case kInt4Oid:
      case kInt8Oid:
        return text;
      case kNumericOid: {
        // Finite numerics are written as JSON writes numbers (no exponent,
        // an optional '-', digits, an optional fraction); NaN and the
        // infinities are not numbers JSON has.
        size_t digit = text.starts_with('-') ? 1 : 0;
        if (digit < text.size() && text[digit] >= '0' && text[digit] <= '9') return text;
        return {};
      }
      default:
        return {};
    }
  }
  int column_count() const override { return result_.columns(); }
  std::string_view column_name(int i) const override { return result_.name(i); }

 private:
  void slot(int i) {
    auto n = static_cast<size_t>(i);
    if (values_.size() < n) {
      values_.resize(n);
      null_.resize(n, true);
      types_.resize(n, 0);
      formats_.resize(n, 0);
    }
  }
  void set(int i, std::string v, Oid type, int format) {
    slot(i);
    auto k = static_cast<size_t>(i - 1);
    values_[k] = std::move(v);
    null_[k] = false;
    types_[k] = type;
    formats_[k] = format;
  }

  PgConnection& conn_;
  std::string sql_;
  int64_t& changes_;
  std::vector<std::string> values_;
  std::vector<bool> null_;
  std::vector<Oid> types_;
  std::vector<int> formats_;
  bool executed_ = false;
  PgResult result_;
  int row_ = 0;
  mutable std::vector<std::string> decoded_;
  std::string refusal_;
};

class PgDatabase final : public Database {
 public:
  explicit PgDatabase(std::unique_ptr<PgConnection> conn)
      : Database(conn->display()), conn_(std::move(conn)) {}

  Dialect dialect() const override { return Dialect::kPostgres; }
  Status exec(std::string_view sql) override { return conn_->exec(sql); }
  Expected<Statement> prepare(std::string_view sql) override {
    return Statement(std::make_unique<PgStatement>(*conn_, postgres_placeholders(sql), changes_));
  }
  int64_t changes() const override { return changes_; }
  int max_columns() const override { return 1600; }
  Status begin_write() override { return conn_->exec("BEGIN"); }
  Status commit_write() override { return conn_->commit(); }
  Expected<std::vector<std::string>> integrity_check() override {
    return std::vector<std::string>();
  }
  PgConnection* connection() override { return conn_.get(); }

  // The server is its cluster's system identifier (from initdb: a copy of
  // the cluster, a replica, shares it) and the start of its postmaster
  // (which tells such copies apart); in it, the database's name.
  Expected<std::string> identity() override {
    if (!identity_.empty()) return identity_;
    auto r = conn_->query(
        "SELECT (SELECT system_identifier FROM pg_control_system())::text || ' ' || "
        "extract(epoch FROM pg_postmaster_start_time())::text || ' ' || current_database()");
    // pg_control_system() is PUBLIC's to call unless an administrator
    // revoked it: the start time alone still tells servers apart.
    if (!r && conn_->sqlstate() == "42501")
      r = conn_->query(
          "SELECT extract(epoch FROM pg_postmaster_start_time())::text || ' ' || "
          "current_database()");
    if (!r) return r.take_error();
    identity_ = fmt::format("postgresql {}", r->text(0, 0));
    return identity_;
  }

 private:
  std::unique_ptr<PgConnection> conn_;
  int64_t changes_ = 0;
  std::string identity_;  // asked once
};

}  // namespace

Expected<std::unique_ptr<Database>> open_postgres(const std::string& target, OpenOptions options) {
  auto conn = PgConnection::connect(target, options.application);
  if (!conn) return conn.take_error();
  return std::unique_ptr<Database>(std::make_unique<PgDatabase>(std::move(*conn)));
}

}  // namespace kpipe
