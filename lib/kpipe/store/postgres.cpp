#include "kpipe/store/postgres.h"

#include <algorithm>
#include <cerrno>  // program_invocation_short_name
#include <cstdlib>
#include <cstring>

#include <libpq-fe.h>
#include <unistd.h>

namespace kpipe {

namespace {

constexpr std::string_view kSchemes[] = {"postgresql://", "postgres://"};
constexpr std::string_view kPrefixes[] = {"postgresql:", "postgres:"};

bool is_uri(std::string_view target) {
  return std::any_of(std::begin(kSchemes), std::end(kSchemes),
                     [&](std::string_view s) { return target.starts_with(s); });
}

// What libpq reads as its dbname: a URI whole, a conninfo without the
// "postgresql:" that marks it as one.
std::string conninfo_of(std::string_view target) {
  if (is_uri(target)) return std::string(target);
  for (std::string_view p : kPrefixes)
    if (target.starts_with(p)) return std::string(target.substr(p.size()));
  return std::string(target);
}

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

std::string redact_uri(std::string_view target) {
  size_t start = target.find("://") + 3;
  size_t end = target.find_first_of("/?#", start);
  if (end == std::string_view::npos) end = target.size();
  std::string_view authority = target.substr(start, end - start);
  std::string out(target.substr(0, start));
  size_t at = authority.rfind('@');
  if (at != std::string_view::npos) {
    std::string_view user = authority.substr(0, at);
    out.append(user.substr(0, user.find(':')));
    out.append(authority.substr(at));
  } else {
    out.append(authority);
  }
  std::string_view rest = target.substr(end);
  size_t q = rest.find('?');
  out.append(rest.substr(0, q));
  if (q == std::string_view::npos) return out;
  // Query parameters, password=... left out.
  std::string_view params = rest.substr(q + 1);
  char sep = '?';
  while (!params.empty()) {
    size_t amp = params.find('&');
    std::string_view p = params.substr(0, amp);
    if (!p.starts_with("password=") && !p.empty()) {
      out.push_back(sep);
      out.append(p);
      sep = '&';
    }
    if (amp == std::string_view::npos) break;
    params = params.substr(amp + 1);
  }
  return out;
}

std::string redact_conninfo(std::string_view target) {
  std::string conninfo = conninfo_of(target);
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

bool is_postgres_target(std::string_view target) {
  return std::any_of(std::begin(kPrefixes), std::end(kPrefixes),
                     [&](std::string_view p) { return target.starts_with(p); });
}

std::string redact_postgres_target(std::string_view target) {
  return is_uri(target) ? redact_uri(target) : redact_conninfo(target);
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

PgConnection::PgConnection(pg_conn* conn, std::string display)
    : conn_(conn), display_(std::move(display)) {}

PgConnection::~PgConnection() {
  PQfinish(conn_);
}

Expected<std::unique_ptr<PgConnection>> PgConnection::connect(const std::string& target,
                                                              const std::string& application) {
  std::string dbname = conninfo_of(target);
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
    std::string why = one_line(PQerrorMessage(conn));
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
    std::string why = one_line(PQerrorMessage(conn));
    PQfinish(conn);
    return failure("{}: cannot set idle_in_transaction_session_timeout: {}", display, why);
  }
  return std::unique_ptr<PgConnection>(new PgConnection(conn, std::move(display)));
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
    reason_ = one_line(primary);
  } else {
    // libpq's own message: its first line says what happened; the rest
    // ("This probably means the server terminated abnormally...") guesses.
    std::string_view message = PQerrorMessage(conn_);
    message.remove_prefix(std::min(message.size(), message.find_first_not_of(" \n")));
    reason_ = one_line(message.substr(0, message.find('\n')));
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
                   one_line(PQerrorMessage(conn_)));
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

 private:
  std::unique_ptr<PgConnection> conn_;
  int64_t changes_ = 0;
};

}  // namespace

Expected<std::unique_ptr<Database>> open_postgres(const std::string& target, OpenOptions options) {
  auto conn = PgConnection::connect(target, options.application);
  if (!conn) return conn.take_error();
  return std::unique_ptr<Database>(std::make_unique<PgDatabase>(std::move(*conn)));
}

}  // namespace kpipe
