#include "kpipe/cli/cli.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "kpipe/choices.h"
#include "kpipe/cli/secrets.h"
#include "kpipe/cli/signals.h"
#include "kpipe/kafka/kafka_log.h"

namespace kpipe::cli {

StderrReporter::StderrReporter(std::string program)
    : StderrReporter(std::move(program), std::getenv("JOURNAL_STREAM"), 2) {}

StderrReporter::StderrReporter(std::string program, const char* journal_stream, int fd)
    : program_(std::move(program)),
      fd_(fd),
      journal_(is_journal_stream(journal_stream, fd)),
      tty_(::isatty(fd) == 1) {}

bool is_journal_stream(const char* journal_stream, int fd) {
  if (journal_stream == nullptr) return false;
  std::string_view v(journal_stream);
  auto colon = v.find(':');
  if (colon == std::string_view::npos) return false;
  uint64_t dev = 0, ino = 0;
  auto d = std::from_chars(v.data(), v.data() + colon, dev);
  auto i = std::from_chars(v.data() + colon + 1, v.data() + v.size(), ino);
  if (d.ec != std::errc() || d.ptr != v.data() + colon || i.ec != std::errc() ||
      i.ptr != v.data() + v.size())
    return false;
  // The variable is inherited: it names the journal only if this stream is
  // still the one it was set for, not a file or pipe it was redirected to.
  struct stat st {};
  return ::fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_dev) == dev &&
         static_cast<uint64_t>(st.st_ino) == ino;
}

void StderrReporter::write(std::string& text) {
  if (progress_shown_) text.insert(0, "\r\033[K");
  progress_shown_ = false;
  (void)write_all(fd_, text, "<stderr>");
}

void StderrReporter::emit(std::string_view priority, std::string_view kind, std::string_view m) {
  std::string line;
  if (journal_) line = priority;
  line += program_;
  line += ": ";
  line += kind;
  line += m;
  // One line per message, whatever the library's text held.
  for (char& c : line)
    if (c == '\n') c = ' ';
  line.push_back('\n');
  write(line);
}

// Syslog priorities, as the journal reads them at the start of a line.
constexpr std::string_view kError = "<3>", kWarning = "<4>", kInfo = "<6>", kDebug = "<7>";

void StderrReporter::warning(std::string_view m) {
  if (verbosity_ < 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  emit(kWarning, "warning: ", m);
}

void StderrReporter::info(std::string_view m) {
  if (verbosity_ < 1) return;
  std::lock_guard<std::mutex> lock(mu_);
  emit(kInfo, "", m);
}

void StderrReporter::debug(std::string_view m) {
  if (verbosity_ < 2) return;
  std::lock_guard<std::mutex> lock(mu_);
  emit(kDebug, "debug: ", m);
}

void StderrReporter::error(std::string_view m) {
  std::lock_guard<std::mutex> lock(mu_);
  emit(kError, "error: ", m);
}

void StderrReporter::stats(std::string_view line) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string text;
  if (journal_) text = kInfo;
  text.append(line);
  text.push_back('\n');
  write(text);
}

void StderrReporter::progress(std::string_view line) {
  if (!wants_progress()) return;
  std::lock_guard<std::mutex> lock(mu_);
  std::string text = "\r\033[K";
  text.append(line);
  progress_shown_ = !line.empty();
  (void)write_all(fd_, text, "<stderr>");
}

namespace {

class SdNotifier final : public ServiceNotifier {
 public:
  void notify(std::string_view state) override {
    // sd_notify takes a C string; a failure to tell systemd is not the
    // pipeline's: its watchdog says so by restarting it.
    std::string text(state);
    (void)sd_notify(0, text.c_str());
  }
};

}  // namespace

std::unique_ptr<ServiceNotifier> make_service_notifier() {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  if (socket == nullptr || *socket == '\0') return nullptr;
  return std::make_unique<SdNotifier>();
}

int report_error(StderrReporter& reporter, const Error& e) {
  reporter.error(e.message);
  return to_int(e.status);
}

Program::Program(std::string name, std::string description)
    : name_(std::move(name)), app_(std::move(description), name_), reporter_(name_) {
  app_.set_help_flag("-h,--help", "Print this help and exit");
  app_.add_flag_callback(
      "--version",
      [this] {
        std::string v = fmt::format("{} (kpipe) {}\nlibrdkafka {}\n", name_, KPIPE_VERSION,
                                    kafka_library_version());
        (void)write_all(1, v, "<stdout>");
        throw CLI::Success();
      },
      "Print the version and exit");
  add_common(app_);
}

void Program::add_common(CLI::App& app) {
  app.add_flag("-v,--verbose", verbose_,
               "Say more on standard error (twice: librdkafka's log too)");
  app.add_flag("-q,--quiet", quiet_, "Only errors on standard error");
}

CLI::App* Program::add_subcommand(const std::string& name, const std::string& description) {
  CLI::App* sub = app_.add_subcommand(name, description);
  sub->set_help_flag("-h,--help", "Print this help and exit");
  add_common(*sub);
  return sub;
}

void Program::add_inputs(CLI::App& app, InputOptions& o) {
  app.add_option("inputs", o.inputs, "Input files (default, or '-': standard input)")
      ->type_name("FILE");
  // CLI11's PositiveNumber would print its whole range, 309 digits long.
  CLI::Validator at_least_one(
      [](std::string& text) -> std::string {
        uint64_t n = 0;
        auto r = std::from_chars(text.data(), text.data() + text.size(), n);
        if (text.empty() || r.ptr != text.data() + text.size())
          return "must be a whole number of bytes";
        if (r.ec == std::errc::result_out_of_range) return "is too large";
        if (n < 1) return "must be at least 1";
        return {};
      },
      "POSITIVE");
  app.add_option("--max-line-bytes", o.max_line_bytes, "Longest line accepted; longer is bad input")
      ->default_val(kDefaultMaxLineBytes)
      ->check(at_least_one);
}

void Program::add_errors(CLI::App& app, ErrorOptions& o) {
  app.add_option(
         "--on-error", o.on_error,
         "What to do with bad input: fail, dlq or skip (default: dlq with --dlq, else fail)")
      ->type_name("MODE");
  app.add_option("--dlq", o.dlq,
                 "Dead-letter store: FILE.db (SQLite), postgresql://..., kafka:TOPIC or "
                 "kinesis:STREAM")
      ->type_name("TARGET");
}

void Program::add_stats(CLI::App& app, StatsOptions& o) {
  app.add_option("--stats", o.stats,
                 "Write a line of counters to standard error every D and at exit")
      ->type_name("D");
  app.add_option("--metrics", o.metrics,
                 "Keep Prometheus metrics in FILE (node_exporter's textfile format), "
                 "rewritten every 5s and at exit")
      ->type_name("FILE");
}

void Program::add_plot(CLI::App& app, PlotOptions& o, const std::string& what) {
  CLI::Option* plot = app.add_option("--plot", o.file,
                                     "Draw " + what +
                                         ": SVG into FILE ('-': standard output), or without FILE "
                                         "in block characters on standard output")
                          ->expected(0, 1)
                          ->type_name("[FILE]");
  // Either of several --plot options on one PlotOptions gives it (klag's
  // main command and its status subcommand share one).
  after_parse_.push_back([&o, plot] {
    if (plot->count() > 0) o.given = true;
  });
}

void Program::add_schema(SchemaOptions& o, bool writing) {
  const char* formats = writing ? "json (the default), avro, protobuf or json-schema"
                                : "json (the default), string, bytes, avro, protobuf or "
                                  "json-schema";
  app_.add_option("--key-format", o.key_format, std::string("Keys as ") + formats)
      ->type_name("FORMAT");
  app_.add_option("--value-format", o.value_format, std::string("Values as ") + formats)
      ->type_name("FORMAT");
  const char* v = std::getenv("KPIPE_REGISTRY");
  o.registry_env = v != nullptr ? v : "";
  app_.add_option("--registry", o.registry,
                  "Schema Registry base URL (default: $KPIPE_REGISTRY, else schema.registry.url "
                  "of --config)")
      ->type_name("URL");
  app_.add_option("--registry-auth", o.registry_auth,
                  "Registry basic auth user:password (default: basic.auth.user.info of --config)")
      ->type_name("USER:PASSWORD");
  app_.add_option("--registry-ca", o.registry_ca, "CA certificates to verify an https registry")
      ->type_name("FILE");
  if (writing) {
    app_.add_option("--subject", o.subject, "Encode values with this subject's schema")
        ->default_str("TOPIC-value")
        ->type_name("SUBJECT");
    app_.add_option("--key-subject", o.key_subject, "Encode keys with this subject's schema")
        ->default_str("TOPIC-key")
        ->type_name("SUBJECT");
    app_.add_option("--schema", o.schema_file,
                    "Encode values with the schema in FILE (default: the subject's latest)")
        ->type_name("FILE");
    app_.add_flag("--auto-register", o.auto_register,
                  "Register --schema under the subject when it is not there yet");
  } else {
    app_.add_option("--avro-json", o.avro_json,
                    "Avro values as plain JSON, or in Avro's standard JSON encoding")
        ->default_val("plain")
        ->type_name("plain|standard");
    app_.add_option("--time-format", o.time_format,
                    "Avro timestamps as RFC 3339 strings, or epoch milliseconds")
        ->default_val("rfc3339")
        ->type_name("rfc3339|ms");
  }
}

void Program::add_kafka(CLI::App& app, KafkaOptions& o) {
  app.add_option("-b,--brokers", o.brokers,
                 "Bootstrap brokers host:port,... (default: $KPIPE_BROKERS)")
      ->type_name("LIST");
  // One value per -X: `kproduce -X linger.ms=5 in.ndjson` reads in.ndjson.
  app.add_option("-X,--property", o.properties,
                 "Set a librdkafka property key=value, or key=@FILE to read the value from FILE "
                 "(repeatable)")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  // Where the default client file is comes from the environment, which
  // only this layer reads (KPIPE_BROKERS in run()): the library's tests
  // give their own.
  auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v != nullptr ? v : "");
  };
  o.env = {env("KPIPE_CONFIG"), env("XDG_CONFIG_HOME"), env("HOME")};
  app.add_option("--config", o.config_file,
                 "Read Kafka client properties from a Java .properties file (default: "
                 "$KPIPE_CONFIG, else ~/.config/kpipe/client.properties if present; 'none': no "
                 "file)")
      ->type_name("FILE");
  app.add_option("--timeout", o.timeout,
                 "How long to wait for a broker (or Kinesis) before failing")
      ->default_val("10s")
      ->type_name("D");
}

void Program::add_kinesis(CLI::App& app, KinesisOptions& o) {
  app.add_option("--region", o.region,
                 "With kinesis:NAME, the AWS region (default: $AWS_REGION, $AWS_DEFAULT_REGION, "
                 "the profile's)")
      ->type_name("REGION");
  app.add_option("--endpoint", o.endpoint,
                 "With kinesis:NAME, the Kinesis endpoint URL (default: "
                 "$AWS_ENDPOINT_URL_KINESIS, $AWS_ENDPOINT_URL, AWS's)")
      ->type_name("URL");
  // AWS's variables and the home, read here as KPIPE_CONFIG is (add_kafka).
  o.env = AwsEnvironment::from_process();
}

namespace {

// Long options of an app (and, for the completion script, its
// subcommands), one per line: git's --git-completion-helper.
void print_completion(const CLI::App& app) {
  std::string out;
  for (const CLI::Option* opt : app.get_options()) {
    for (const std::string& l : opt->get_lnames()) out += "--" + l + "\n";
  }
  for (const CLI::App* sub : app.get_subcommands({})) out += sub->get_name() + "\n";
  (void)write_all(1, out, "<stdout>");
}

std::string lower_first(std::string s) {
  if (!s.empty() && s[0] >= 'A' && s[0] <= 'Z' && (s.size() < 2 || !(s[1] >= 'A' && s[1] <= 'Z')))
    s[0] = static_cast<char>(s[0] - 'A' + 'a');
  while (!s.empty() && (s.back() == '.' || s.back() == '\n')) s.pop_back();
  return s;
}

std::vector<std::string> long_options(const CLI::App& app) {
  std::vector<std::string> out;
  for (const CLI::Option* opt : app.get_options())
    for (const std::string& l : opt->get_lnames()) out.push_back("--" + l);
  return out;
}

// A closed standard stream is a free descriptor: the next file or pipe the
// program opens would take its place (an internal pipe on fd 0 had kdedup
// read itself forever; SQLite warns of databases on fd 2). Each closed one
// is held on /dev/null opened the wrong way round, so that using it fails
// as using a closed stream does (EBADF), with the stream's own name.
void hold_closed_standard_streams() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    int held = ::open("/dev/null", fd == 0 ? O_WRONLY : O_RDONLY);
    if (held < 0 || held == fd) continue;
    ::dup2(held, fd);
    ::close(held);
  }
}

// Standard output's terminal width; elsewhere $COLUMNS (a user's, or a
// shell's exported one), else 80, the width a mail or a log shows whole.
size_t terminal_columns() {
  struct winsize ws {};
  if (::ioctl(1, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  if (const char* c = std::getenv("COLUMNS")) {
    size_t n = 0;
    auto r = std::from_chars(c, c + std::strlen(c), n);
    if (r.ec == std::errc() && *r.ptr == '\0' && n > 0 && n <= 10000) return n;
  }
  return 80;
}

// Every value the command line gave, option by option as the program
// declares them, by the option's long name (a positional's own name), in
// `app` and the subcommands it ran.
void given_options(const CLI::App& app, std::vector<GivenOption>& out) {
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->count() == 0) continue;
    std::string name = opt->get_lnames().empty() ? opt->get_name() : "--" + opt->get_lnames()[0];
    for (const std::string& v : opt->results()) out.push_back({name, v});
  }
  for (const CLI::App* sub : app.get_subcommands()) given_options(*sub, out);
}

}  // namespace

int Program::run(int argc, char** argv, const std::function<Status(Io&)>& body) {
  hold_closed_standard_streams();
  // The completion helper answers before any parsing or validation.
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) != "--completion-helper") continue;
    const CLI::App* target = &app_;
    for (int j = 1; j < i; ++j) {
      for (const CLI::App* sub : app_.get_subcommands({}))
        if (sub->get_name() == argv[j]) target = sub;
    }
    print_completion(*target);
    return 0;
  }
  // A mistyped subcommand gets a suggestion, not "a subcommand is required".
  std::vector<std::string> subcommands;
  for (const CLI::App* sub : app_.get_subcommands({})) subcommands.push_back(sub->get_name());
  if (!subcommands.empty() && argc > 1 && argv[1][0] != '-' &&
      std::find(subcommands.begin(), subcommands.end(), argv[1]) == subcommands.end()) {
    reporter_.error(fmt::format("{}; see '{} --help'",
                                unknown_choice("subcommand", argv[1], subcommands).message, name_));
    return to_int(ExitStatus::kUsage);
  }
  try {
    app_.parse(argc, argv);
    for (const auto& f : after_parse_) f();
  } catch (const CLI::CallForHelp& e) {
    return app_.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app_.exit(e);
  } catch (const CLI::Success&) {
    return 0;
  } catch (const CLI::ParseError& e) {
    std::string message = lower_first(e.what());
    if (const auto* extras = dynamic_cast<const CLI::ExtrasError*>(&e)) {
      (void)extras;
      // Suggest the closest option for a mistyped one.
      for (int i = 1; i < argc; ++i) {
        std::string_view a = argv[i];
        if (!a.starts_with("--")) continue;
        std::string word(a.substr(0, a.find('=')));
        const CLI::App* scope = &app_;
        for (const CLI::App* sub : app_.get_subcommands()) scope = sub;
        auto known = long_options(*scope);
        if (std::find(known.begin(), known.end(), word) != known.end()) continue;
        std::string best = closest_choice(word, known);
        message = best.empty() ? fmt::format("unknown option '{}'", word)
                               : fmt::format("unknown option '{}', did you mean '{}'?", word, best);
        break;
      }
    }
    std::string scope = name_;
    for (const CLI::App* sub : app_.get_subcommands()) scope += " " + sub->get_name();
    reporter_.error(fmt::format("{}; see '{} --help'", message, scope));
    return to_int(ExitStatus::kUsage);
  }
  reporter_.set_verbosity(quiet_ ? -1 : verbose_);
  // Once per run, whatever the program and however many there are.
  std::vector<GivenOption> given;
  given_options(app_, given);
  if (auto found = command_line_secrets(given); !found.empty())
    reporter_.warning(command_line_secrets_warning(found));
  install_signal_handlers();
  Output out(1);
  out.set_stop_check([] { return stop_requested(); });
  SystemClock clock;
  Io io{out, reporter_, clock, stop_flag(), name_, std::getenv("KPIPE_BROKERS"), ::isatty(1) == 1};
  io.columns = terminal_columns();
  std::unique_ptr<ServiceNotifier> notifier = make_service_notifier();
  io.notifier = notifier.get();
  Status s = body(io);
  Status flushed = out.flush();
  if (!s.ok()) {
    return report_error(reporter_, s.error());
  }
  if (!flushed.ok()) return report_error(reporter_, flushed.error());
  return 0;
}

}  // namespace kpipe::cli
