#include "kpipe/store/state_lock.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace kpipe {

namespace {

// A process's POSIX locks on a file all go when it closes any descriptor
// of that file: each lock file is opened once per process, and closed only
// when the last lock on it is released.
struct LockFile {
  int fd = -1;
  std::set<off_t> held;
};

std::mutex& table_mutex() {
  static std::mutex m;
  return m;
}

// The lock files of this process. A child made by fork() inherits the
// table but none of the locks: it starts afresh (its copies of the
// descriptors may be closed, since the parent's locks are not its own).
std::map<std::string, LockFile>& table() {
  static std::map<std::string, LockFile> t;
  static pid_t owner = ::getpid();
  if (owner != ::getpid()) {
    for (auto& [id, file] : t) ::close(file.fd);
    t.clear();
    owner = ::getpid();
  }
  return t;
}

std::string identity(const struct stat& st) {
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
}

// 62 bits of the name's hash: an offset far below off_t's limit, and two
// names share a byte with a chance of 2^-62.
off_t offset_of(const std::string& name) {
  return static_cast<off_t>(XXH3_64bits(name.data(), name.size()) >> 2);
}

struct flock byte_at(off_t offset, short type) {
  struct flock fl {};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = offset;
  fl.l_len = 1;
  return fl;
}

// The pid holding the byte at `offset` against this process, 0 if none.
// `type` F_RDLCK asks for a writer only (what refuses a shared lock).
Expected<pid_t> query(int fd, off_t offset, const std::string& path, short type = F_WRLCK) {
  struct flock fl = byte_at(offset, type);
  if (::fcntl(fd, F_GETLK, &fl) != 0)
    return failure("cannot test the lock in '{}': {}", path, std::strerror(errno));
  return fl.l_type == F_UNLCK ? pid_t{0} : fl.l_pid;
}

}  // namespace

std::string StateLock::lock_path(const std::string& state_path) {
  // Through a symbolic link, the lock is the real file's: two names of one
  // database must not get two locks. A database not made yet has its
  // directory resolved alone.
  auto resolved = [](const std::string& path) -> std::optional<std::string> {
    char* real = ::realpath(path.c_str(), nullptr);
    if (real == nullptr) return std::nullopt;
    std::string out(real);
    std::free(real);
    return out;
  };
  if (auto real = resolved(state_path)) return *real + ".lock";
  size_t slash = state_path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : state_path.substr(0, slash + 1);
  std::string base = slash == std::string::npos ? state_path : state_path.substr(slash + 1);
  if (auto real = resolved(dir)) return *real + "/" + base + ".lock";
  return state_path + ".lock";
}

Expected<std::unique_ptr<StateLock>> StateLock::take(const std::string& state_path,
                                                     const std::string& name,
                                                     const BusyMessage& busy, bool shared) {
  short type = shared ? F_RDLCK : F_WRLCK;
  std::string path = lock_path(state_path);
  off_t offset = offset_of(name);
  std::lock_guard<std::mutex> guard(table_mutex());
  auto& files = table();
  LockFile* file = nullptr;
  std::string id;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && files.count(identity(st)) > 0) {
    id = identity(st);
    file = &files[id];
  } else {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return failure("cannot open lock file '{}': {}", path, std::strerror(errno));
    if (::fstat(fd, &st) != 0) {
      Error e = failure("cannot open lock file '{}': {}", path, std::strerror(errno));
      ::close(fd);
      return e;
    }
    id = identity(st);
    // Created between the stat and the open by another thread of ours: the
    // new descriptor stays open, since closing it would drop our locks.
    if (files.count(id) == 0) files[id].fd = fd;
    file = &files[id];
  }
  auto release_if_unused = [&] {
    if (!file->held.empty()) return;
    ::close(file->fd);
    files.erase(id);
  };
  if (file->held.count(offset) > 0) return failure(busy(fmt::format("process {}", ::getpid())));
  // The holder may let go between a refused F_SETLK and F_GETLK: try again.
  for (int attempt = 0;; ++attempt) {
    struct flock fl = byte_at(offset, type);
    if (::fcntl(file->fd, F_SETLK, &fl) == 0) break;
    if (errno != EACCES && errno != EAGAIN) {
      Error e = failure("cannot lock '{}': {}", path, std::strerror(errno));
      release_if_unused();
      return e;
    }
    auto pid = query(file->fd, offset, path, type);
    if (!pid) {
      release_if_unused();
      return pid.take_error();
    }
    if (*pid != 0 || attempt >= 100) {
      release_if_unused();
      return failure(busy(fmt::format("process {}", *pid)));
    }
  }
  file->held.insert(offset);
  return std::unique_ptr<StateLock>(new StateLock(id, offset));
}

Expected<pid_t> StateLock::holder(const std::string& state_path, const std::string& name) {
  std::string path = lock_path(state_path);
  off_t offset = offset_of(name);
  std::lock_guard<std::mutex> guard(table_mutex());
  auto& files = table();
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return pid_t{0};
    return failure("cannot open lock file '{}': {}", path, std::strerror(errno));
  }
  auto known = files.find(identity(st));
  if (known != files.end()) {
    if (known->second.held.count(offset) > 0) return ::getpid();
    return query(known->second.fd, offset, path);
  }
  // Not a file this process locks: a descriptor of its own may be closed.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return failure("cannot open lock file '{}': {}", path, std::strerror(errno));
  auto pid = query(fd, offset, path);
  ::close(fd);
  return pid;
}

StateLock::~StateLock() {
  std::lock_guard<std::mutex> guard(table_mutex());
  auto& files = table();
  auto it = files.find(file_);
  if (it == files.end()) return;
  struct flock fl = byte_at(offset_, F_UNLCK);
  (void)::fcntl(it->second.fd, F_SETLK, &fl);
  it->second.held.erase(offset_);
  if (!it->second.held.empty()) return;
  ::close(it->second.fd);
  files.erase(it);
}

}  // namespace kpipe
