// Ways around libavro 1.11's gaps: a memory reader that cannot tell how
// much it has read, an allocator too slow for a string per field, and
// lengths in a payload that it believes.
#include "kpipe/schema/avro_internal.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include <malloc.h>

namespace kpipe::avro {

namespace {

// libavro's memory reader counts what it has read but has no call that
// tells (avro_reader_is_eof answers only for files), and the payload must
// be read to its end. This mirrors the reader's struct (io.c, 1.11), which
// is trusted only once a reader of known state has been seen through it.
struct MemoryReaderMirror {
  int type;  // struct avro_reader_t_
  int refcount;
  const char* buf;
  int64_t len;
  int64_t read;
};

MemoryReaderMirror peek(avro_reader_t reader) {
  MemoryReaderMirror m;
  std::memcpy(&m, reader, sizeof m);
  return m;
}

bool mirror_fits() {
  static const char kBytes[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  avro_reader_t r = avro_reader_memory(kBytes, 11);
  if (r == nullptr) return false;
  char got[4];
  bool fits = avro_read(r, got, 3) == 0;
  MemoryReaderMirror m = peek(r);
  fits = fits && m.buf == kBytes && m.len == 11 && m.read == 3;
  avro_reader_memory_set_source(r, kBytes + 2, 9);
  fits = fits && avro_read(r, got, 2) == 0;
  m = peek(r);
  fits = fits && m.buf == kBytes + 2 && m.len == 9 && m.read == 2;
  avro_reader_free(r);
  return fits;
}

// libavro allocates, for every string it reads, the string and a wrapper
// of it, and frees the previous record's two: four calls of the C
// allocator per string field, a tenth of the time decoding takes. Its
// allocator hook keeps small blocks here for reuse instead, per thread
// (the hook is the process's; any thread may call libavro). Each block is
// still malloc's own, sized by malloc_usable_size, so blocks allocated
// before the hook was set, or freed with free(), mix in safely.
struct BlockLists {
  static constexpr size_t kGrain = 16;
  static constexpr size_t kClasses = 16;  // blocks of up to 256 bytes
  static constexpr uint32_t kKept = 1024;
  struct Block {
    Block* next;
  };
  Block* lists[kClasses + 1];
  uint32_t counts[kClasses + 1];
  bool closed;      // the thread is ending: malloc and free only
  bool registered;  // BlockListsCloser will free the lists
};
// Trivially destructible, so that it outlives every other thread_local
// and static whose destructor may still free through libavro.
thread_local BlockLists tls_blocks{};

struct BlockListsCloser {
  ~BlockListsCloser() {
    tls_blocks.closed = true;
    for (auto* list : tls_blocks.lists)
      while (list != nullptr) {
        auto* next = list->next;
        std::free(list);
        list = next;
      }
  }
};
thread_local BlockListsCloser tls_blocks_closer;

void* take_block(size_t size) {
  const size_t c = (size + BlockLists::kGrain - 1) / BlockLists::kGrain;
  BlockLists& b = tls_blocks;
  if (c > BlockLists::kClasses || b.closed) return std::malloc(size);
  if (BlockLists::Block* block = b.lists[c]) {
    b.lists[c] = block->next;
    --b.counts[c];
    return block;
  }
  return std::malloc(c * BlockLists::kGrain);
}

void give_block(void* p) {
  const size_t usable = malloc_usable_size(p);
  const size_t c = usable / BlockLists::kGrain;
  BlockLists& b = tls_blocks;
  if (c == 0 || c > BlockLists::kClasses || b.closed || b.counts[c] >= BlockLists::kKept) {
    std::free(p);
    return;
  }
  if (!b.registered) {
    b.registered = true;
    (void)&tls_blocks_closer;  // the first use in a thread registers its destructor
  }
  auto* block = static_cast<BlockLists::Block*>(p);
  block->next = b.lists[c];
  b.lists[c] = block;
  ++b.counts[c];
}

// The largest block libavro may have while ReadLimit says so.
thread_local size_t tls_read_limit = SIZE_MAX;

void* avro_allocate(void*, void* ptr, size_t, size_t size) {
  if (size == 0) {
    if (ptr != nullptr) give_block(ptr);
    return nullptr;
  }
  if (size > tls_read_limit) return nullptr;
  if (ptr == nullptr) return take_block(size);
  const size_t usable = malloc_usable_size(ptr);
  if (size <= usable) return ptr;
  constexpr size_t kLargest = BlockLists::kClasses * BlockLists::kGrain;
  if (usable > kLargest) return std::realloc(ptr, size);
  void* moved = take_block(size);
  if (moved == nullptr) return nullptr;
  std::memcpy(moved, ptr, usable);
  give_block(ptr);
  return moved;
}

}  // namespace

void use_block_allocator() {
  static const bool kHooked = [] {
    avro_set_allocator(avro_allocate, nullptr);
    return true;
  }();
  (void)kHooked;
}

ReadLimit::ReadLimit(size_t most) {
  tls_read_limit = most;
}

ReadLimit::~ReadLimit() {
  tls_read_limit = SIZE_MAX;
}

MemoryReader::MemoryReader() {
  reader_ = avro_reader_memory("", 0);
  static const bool kMirrorFits = mirror_fits();
  mirror_fits_ = kMirrorFits;
}

MemoryReader::~MemoryReader() {
  if (reader_ != nullptr) avro_reader_free(reader_);
}

void MemoryReader::set_source(std::string_view payload) {
  payload_size_ = static_cast<int64_t>(payload.size());
  avro_reader_memory_set_source(reader_, payload.data(), payload_size_);
}

size_t MemoryReader::bytes_read() {
  if (mirror_fits_) return static_cast<size_t>(peek(reader_).read);
  // Without the mirror: a byte at a time until none is left (the slow way,
  // and only what a payload holds beyond its value).
  int64_t left = 0;
  char byte;
  while (avro_read(reader_, &byte, 1) == 0) ++left;
  return static_cast<size_t>(payload_size_ - left);
}

}  // namespace kpipe::avro
