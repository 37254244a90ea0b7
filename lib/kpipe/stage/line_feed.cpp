#include "kpipe/stage/line_feed.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

namespace kpipe {

namespace {

// A read's size: large enough that a system call and a hand-off between
// threads cost little per line, small enough that the batches in flight
// stay in a few MiB.
constexpr size_t kChunkBytes = 512u << 10;
// Lines are (offset, size) pairs of 32 bits.
constexpr size_t kMaxChunkBytes = size_t{1} << 31;
// Batches read ahead of the stage.
constexpr size_t kMaxBatches = 4;

struct Chunk {
  std::unique_ptr<char[]> data;
  size_t cap = 0;  // usable bytes; kJsonPadding readable bytes follow

  void allocate(size_t bytes) {
    data.reset(new char[bytes + kJsonPadding]);
    std::memset(data.get() + bytes, 0, kJsonPadding);
    cap = bytes;
  }
};

enum class ParseState : uint8_t { kUnparsed, kParsing, kParsed };

}  // namespace

bool is_blank_line(std::string_view text) {
  return text.empty() || ((text[0] == ' ' || text[0] == '\t') &&
                          text.find_first_not_of(" \t") == std::string_view::npos);
}

namespace {

// Whole lines of one input, read together, and their fields once parsed.
// Aligned so that the batch one thread fills and the one the other reads
// share no cache line.
struct alignas(64) Batch {
  Chunk chunk;
  size_t size = 0;  // bytes of chunk in use
  // The lines, as (offset, size) in chunk: compact, since every byte the
  // reading thread writes here is a cache line moved to the other core.
  std::vector<std::pair<uint32_t, uint32_t>> lines;
  size_t input = 0;               // all of one input
  uint64_t first_number = 0;      // of lines[0]; the others follow
  std::vector<JsonField> values;  // fields->size() per line
  std::vector<JsonType> roots;
  std::vector<std::pair<size_t, Status>> errors;  // (line, why), in line order
  // Strings that the parser unescaped into its own buffer, copied, since
  // that buffer is reused at the next line: (value, offset in arena).
  std::string arena;
  std::vector<std::pair<size_t, size_t>> copied;
  ParseState state = ParseState::kUnparsed;
  bool end = false;  // no lines: the inputs are over, or failed (end_status)
  Status end_status;

  void reset() {
    size = 0;
    lines.clear();
    errors.clear();
    arena.clear();
    copied.clear();
    state = ParseState::kUnparsed;
    end = false;
    end_status = Status();
    // A chunk grown for a long line goes back to the allocator.
    if (chunk.cap != kChunkBytes) chunk = Chunk();
  }
};

std::string_view line_text(const Batch& b, size_t i) {
  auto [offset, size] = b.lines[i];
  return std::string_view(b.chunk.data.get() + offset, size);
}

// Whether a line is a record, to be parsed: not blank, not a control line,
// not too long (the driver's own tests, in the same order).
bool is_record(std::string_view text, size_t max_line_bytes) {
  return text.size() <= max_line_bytes && !is_blank_line(text) && !is_control_line(text);
}

void parse_batch(Batch& b, JsonReader& reader, const FieldSet& fields, size_t max_line_bytes) {
  size_t n = fields.size();
  b.values.resize(b.lines.size() * n);
  b.roots.assign(b.lines.size(), JsonType::kMissing);
  for (size_t i = 0; i < b.lines.size(); ++i) {
    std::string_view text = line_text(b, i);
    if (!is_record(text, max_line_bytes)) continue;
    JsonField* out = b.values.data() + i * n;
    Status s = reader.read(text, fields, out);
    b.roots[i] = reader.root_type();
    if (!s.ok()) {
      b.errors.emplace_back(i, std::move(s));
      continue;
    }
    for (size_t k = 0; k < n; ++k) {
      std::string_view str = out[k].str;
      if (str.empty() || (str.data() >= text.data() && str.data() < text.data() + text.size()))
        continue;
      b.copied.emplace_back(i * n + k, b.arena.size());
      b.arena.append(str);
    }
  }
  for (auto [value, offset] : b.copied) {
    JsonField& f = b.values[value];
    f.str = std::string_view(b.arena.data() + offset, f.str.size());
  }
}

}  // namespace

struct LineFeed::Shared {
  // Fixed at construction.
  std::vector<std::string> paths;
  std::vector<std::string> names;  // what Line::input views
  size_t max_line_bytes;
  const FieldSet* fields;
  // Whether the reading thread parses too: only with a second CPU to run
  // it on; on one, the hand-off would cost more than it overlaps.
  bool parse_ahead = false;
  int wake[2] = {-1, -1};  // written to end the worker's wait for input

  alignas(64) std::mutex mu;
  std::condition_variable to_main;    // a batch published, or parsed
  std::condition_variable to_worker;  // room for a batch, or quit
  std::deque<Batch*> queue;           // published batches, in order
  std::vector<std::unique_ptr<Batch>> owned;
  std::vector<Batch*> spare;
  bool quit = false;
  bool input_done = false;  // the end batch is published

  // The worker's alone, on cache lines of its own: the two threads touch
  // their parts once per line, and sharing a line would cost a transfer
  // between cores each time.
  alignas(64) size_t index = 0;  // input being read
  int fd = -1;
  bool owns_fd = false;
  uint64_t line_number = 0;
  Batch* building = nullptr;  // being filled by reads
  size_t scanned = 0;         // bytes of `building` known to hold no '\n'
  JsonReader worker_reader;

  // The main thread's alone.
  alignas(64) std::thread worker;
  bool started = false;
  Batch* current = nullptr;
  size_t pos = 0;
  size_t error_at = 0;
  ParsedLine parsed;
  JsonReader main_reader;

  ~Shared() {
    if (fd >= 0 && owns_fd) ::close(fd);
    for (int w : wake)
      if (w >= 0) ::close(w);
  }

  // With mu held.
  Batch* take_spare() {
    if (spare.empty()) {
      owned.push_back(std::make_unique<Batch>());
      return owned.back().get();
    }
    Batch* b = spare.back();
    spare.pop_back();
    return b;
  }

  // With mu held: the oldest published batch nobody parses yet, marked
  // as being parsed by the caller.
  Batch* claim() {
    for (Batch* b : queue) {
      if (b->state == ParseState::kUnparsed) {
        b->state = ParseState::kParsing;
        return b;
      }
    }
    return nullptr;
  }

  bool has_unparsed() const {
    for (const Batch* b : queue)
      if (b->state == ParseState::kUnparsed) return true;
    return false;
  }

  void parsed_by(Batch* b, JsonReader& reader) {
    parse_batch(*b, reader, *fields, max_line_bytes);
    std::lock_guard lk(mu);
    b->state = ParseState::kParsed;
    to_main.notify_one();
  }

  void publish(Batch* b) {
    b->state = fields != nullptr ? ParseState::kUnparsed : ParseState::kParsed;
    std::lock_guard lk(mu);
    queue.push_back(b);
    to_main.notify_one();
  }

  void publish_end(Status why) {
    Batch* b;
    {
      std::lock_guard lk(mu);
      b = take_spare();
    }
    b->reset();
    b->end = true;
    b->end_status = std::move(why);
    b->state = ParseState::kParsed;
    std::lock_guard lk(mu);
    queue.push_back(b);
    input_done = true;
    to_main.notify_one();
  }

  // --- the worker thread ---------------------------------------------------

  void run_worker() {
    for (;;) {
      Batch* job = nullptr;
      bool read = false;
      bool may_wait = false;
      {
        std::unique_lock lk(mu);
        auto parse_work = [&] { return parse_ahead && has_unparsed(); };
        to_worker.wait(lk, [&] {
          return quit || (!input_done && queue.size() < kMaxBatches) || parse_work();
        });
        if (quit) return;
        if (!input_done && queue.size() < kMaxBatches) {
          read = true;
          // Wait for input only when there is nothing to parse meanwhile.
          may_wait = !parse_work();
        } else {
          job = claim();
        }
      }
      if (read) {
        if (read_some(may_wait)) continue;
        if (!parse_ahead) continue;
        std::lock_guard lk(mu);
        job = claim();
      }
      if (job != nullptr) parsed_by(job, worker_reader);
    }
  }

  // Reads once from the current input. False when no input was there and
  // `may_wait` was false; true after any progress, the end of the inputs,
  // a failure (published), or a wake-up to quit.
  bool read_some(bool may_wait) {
    if (fd < 0) {
      if (index == paths.size()) {
        publish_end(Status());
        return true;
      }
      if (paths[index] == "-") {
        fd = 0;
        owns_fd = false;
        struct stat st {};
        if (::fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode)) widen_pipe(fd);
      } else {
        // Without O_NONBLOCK, opening a FIFO waits for its writer where
        // nothing can end the wait; reads wait in poll() instead.
        fd = ::open(paths[index].c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0) {
          publish_end(failure("cannot open '{}': {}", paths[index], std::strerror(errno)));
          return true;
        }
        owns_fd = true;
      }
      line_number = 0;
    }
    pollfd p[2] = {{fd, POLLIN, 0}, {wake[0], POLLIN, 0}};
    int ready = ::poll(p, 2, may_wait ? -1 : 0);
    if (ready < 0) {
      if (errno == EINTR) return true;
      publish_end(failure("{}: poll: {}", names[index], std::strerror(errno)));
      return true;
    }
    if (p[1].revents != 0) return true;  // quit
    if (ready == 0) return false;
    if (building == nullptr) {
      std::lock_guard lk(mu);
      building = take_spare();
    }
    Batch& b = *building;
    if (b.chunk.cap == 0) b.chunk.allocate(kChunkBytes);
    if (b.size == b.chunk.cap) {
      // One line fills the chunk: grow it, so that even a line longer than
      // max_line_bytes reaches its dead-letter store whole.
      if (b.chunk.cap > kMaxChunkBytes / 2) {
        publish_end(failure("{}: line {} is longer than {} bytes, more than a line can be",
                            names[index], line_number + 1, kMaxChunkBytes));
        return true;
      }
      Chunk bigger;
      bigger.allocate(b.chunk.cap * 2);
      std::memcpy(bigger.data.get(), b.chunk.data.get(), b.size);
      b.chunk = std::move(bigger);
    }
    ssize_t n = ::read(fd, b.chunk.data.get() + b.size, b.chunk.cap - b.size);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) return true;
      if (errno == EBADF && fd == 0) {
        publish_end(failure("cannot read <stdin>: standard input is closed"));
        return true;
      }
      publish_end(failure("cannot read '{}': {}", names[index], std::strerror(errno)));
      return true;
    }
    if (n == 0) {
      split(true);
      if (owns_fd) ::close(fd);
      fd = -1;
      ++index;
      return true;
    }
    b.size += static_cast<size_t>(n);
    split(false);
    return true;
  }

  // Cuts the lines out of `building` and publishes them; the bytes after
  // the last newline move to the next batch (at the end of an input they
  // are its last line).
  void split(bool at_end) {
    Batch& b = *building;
    char* base = b.chunk.data.get();
    size_t start = 0;
    size_t from = scanned;
    for (;;) {
      auto* nl = static_cast<char*>(std::memchr(base + from, '\n', b.size - from));
      if (nl == nullptr) break;
      size_t end = static_cast<size_t>(nl - base);
      add_line(b, start, end);
      start = from = end + 1;
    }
    if (at_end && start < b.size) {
      add_line(b, start, b.size);
      start = b.size;
    }
    scanned = b.size - start;
    if (b.lines.empty()) return;
    Batch* next;
    {
      std::lock_guard lk(mu);
      next = take_spare();
    }
    next->reset();
    size_t tail = b.size - start;
    if (next->chunk.cap < tail || next->chunk.cap == 0)
      next->chunk.allocate(std::max(kChunkBytes, tail * 2));
    std::memcpy(next->chunk.data.get(), base + start, tail);
    next->size = tail;
    building = next;
    publish(&b);
  }

  void add_line(Batch& b, size_t start, size_t end) {
    if (b.lines.empty()) {
      b.input = index;
      b.first_number = line_number + 1;
    }
    ++line_number;
    if (end > start && b.chunk.data[end - 1] == '\r') --end;
    b.lines.emplace_back(static_cast<uint32_t>(start), static_cast<uint32_t>(end - start));
  }
};

LineFeed::LineFeed(std::vector<std::string> paths, size_t max_line_bytes, const FieldSet* fields)
    : shared_(std::make_unique<Shared>()) {
  Shared& s = *shared_;
  s.paths = std::move(paths);
  if (s.paths.empty()) s.paths.push_back("-");
  for (const std::string& p : s.paths) s.names.push_back(p == "-" ? "<stdin>" : p);
  s.max_line_bytes = max_line_bytes;
  s.fields = fields;
  cpu_set_t cpus;
  s.parse_ahead =
      fields != nullptr && sched_getaffinity(0, sizeof cpus, &cpus) == 0 && CPU_COUNT(&cpus) > 1;
}

LineFeed::~LineFeed() {
  Shared& s = *shared_;
  if (!s.started) return;
  {
    std::lock_guard lk(s.mu);
    s.quit = true;
    s.to_worker.notify_one();
  }
  char byte = 1;
  while (::write(s.wake[1], &byte, 1) < 0 && errno == EINTR) {
  }
  s.worker.join();
}

Expected<bool> LineFeed::next(Line& line, const ParsedLine*& parsed) {
  Shared& s = *shared_;
  if (!s.started) {
    if (::pipe2(s.wake, O_CLOEXEC) != 0)
      return failure("cannot create a pipe: {}", std::strerror(errno));
    // Signals (SIGINT, SIGTERM) go to the main thread, whose loop acts on them.
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    s.worker = std::thread([&s] { s.run_worker(); });
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    s.started = true;
  }
  for (;;) {
    Batch* b = s.current;
    if (b != nullptr && s.pos < b->lines.size()) {
      size_t i = s.pos++;
      line.text = line_text(*b, i);
      line.number = b->first_number + i;
      line.input = s.names[b->input];
      line.too_long = line.text.size() > s.max_line_bytes;
      parsed = nullptr;
      if (s.fields != nullptr && is_record(line.text, s.max_line_bytes)) {
        ParsedLine& p = s.parsed;
        p.values = b->values.data() + i * s.fields->size();
        p.root_type = b->roots[i];
        if (s.error_at < b->errors.size() && b->errors[s.error_at].first == i) {
          p.status = b->errors[s.error_at++].second;
        } else if (!p.status.ok()) {
          p.status = Status();
        }
        parsed = &p;
      }
      return true;
    }
    if (b != nullptr && b->end) {
      if (!b->end_status.ok()) return b->end_status.error();
      return false;
    }
    if (b != nullptr) {
      b->reset();
      std::lock_guard lk(s.mu);
      s.spare.push_back(b);
      s.current = nullptr;
      s.to_worker.notify_one();
    }

    // The next batch; while none is there, the program is waiting for input.
    bool waiting = false;
    for (;;) {
      if (stop_ && stop_()) return false;
      {
        std::unique_lock lk(s.mu);
        if (!s.queue.empty()) {
          s.current = s.queue.front();
          s.queue.pop_front();
          s.to_worker.notify_one();
          break;
        }
      }
      if (!waiting) {
        waiting = true;
        if (before_wait_) before_wait_();
        continue;
      }
      bool arrived;
      {
        std::unique_lock lk(s.mu);
        arrived = s.to_main.wait_for(lk, std::chrono::milliseconds(idle_ms_),
                                     [&] { return !s.queue.empty(); });
      }
      if (!arrived && idle_hook_) KPIPE_TRY(idle_hook_());
    }
    s.pos = 0;
    s.error_at = 0;

    // Its fields: parsed by the worker, or here. While the worker finishes
    // it, this thread parses a later batch instead of waiting idle.
    std::unique_lock lk(s.mu);
    while (s.current->state != ParseState::kParsed) {
      Batch* job = nullptr;
      if (s.current->state == ParseState::kUnparsed) {
        job = s.current;
        job->state = ParseState::kParsing;
      } else if (s.parse_ahead) {
        job = s.claim();
      }
      if (job == nullptr) {
        s.to_main.wait(lk);
        continue;
      }
      lk.unlock();
      s.parsed_by(job, s.main_reader);
      lk.lock();
    }
  }
}

}  // namespace kpipe
