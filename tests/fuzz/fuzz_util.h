// Shared by the libFuzzer harnesses: inputs copied into exactly-sized heap
// buffers (so that ASan sees a read past what a parser may read), and the
// check that stops a run when a property fails.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>

#include "kpipe/line.h"

namespace kpipe::fuzz {

// A property that must hold: a failure aborts, so libFuzzer keeps the input.
#define FUZZ_CHECK(cond)                                                                      \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      std::fprintf(stderr, "fuzz: property failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                           \
    }                                                                                         \
  } while (0)

// `size` bytes followed by exactly kJsonPadding zero bytes, the contract of
// a padded line (kpipe/line.h): a read beyond the padding is a heap overflow.
class PaddedInput {
 public:
  PaddedInput(const uint8_t* data, size_t size) : size_(size), buf_(new char[size + kJsonPadding]) {
    if (size > 0) std::memcpy(buf_.get(), data, size);
    std::memset(buf_.get() + size, 0, kJsonPadding);
  }
  explicit PaddedInput(std::string_view s)
      : PaddedInput(reinterpret_cast<const uint8_t*>(s.data()), s.size()) {}
  std::string_view view() const { return {buf_.get(), size_}; }

 private:
  size_t size_;
  std::unique_ptr<char[]> buf_;
};

// An input with no padding at all, for functions that promise to need none.
class ExactInput {
 public:
  ExactInput(const uint8_t* data, size_t size) : size_(size), buf_(new char[size == 0 ? 1 : size]) {
    if (size > 0) std::memcpy(buf_.get(), data, size);
  }
  std::string_view view() const { return {buf_.get(), size_}; }

 private:
  size_t size_;
  std::unique_ptr<char[]> buf_;
};

}  // namespace kpipe::fuzz
