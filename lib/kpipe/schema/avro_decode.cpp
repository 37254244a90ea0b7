// The Avro codec's decoding: a payload read by libavro into the schema's
// reused value, then written as JSON, the node table deciding how.
#include "kpipe/schema/avro_internal.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

#include "kpipe/json.h"
#include "kpipe/time.h"

namespace kpipe::avro {

Expected<int32_t> AvroCodec::decode(std::string_view bytes, std::string& out) {
  auto framed = unframe(bytes);
  if (!framed) return framed.take_error();
  const int32_t id = framed->schema_id;
  auto found = schema(id);
  if (!found) return found.take_error();
  Compiled& c = **found;
  const std::string_view payload = framed->payload;
  reader_.set_source(payload);
  int rc;
  {
    // A decoded value takes more memory than its encoding, but not this
    // much more; a payload that asks for it lies about a length or a count.
    ReadLimit limit(std::max<size_t>(payload.size() * 64, size_t{1} << 20));
    rc = avro_value_read(reader_.get(), &c.value);
  }
  if (rc != 0) {
    if (rc == ENOSPC) return data_error("avro: payload of schema {} is truncated", id);
    if (rc == ENOMEM)
      return data_error(
          "avro: payload of schema {} declares a string, bytes or array longer than it can "
          "hold",
          id);
    return data_error("avro: payload of schema {} cannot be read: {}", id, avro_strerror());
  }
  const size_t left = payload.size() - reader_.bytes_read();
  if (left > 0) return data_error("avro: {} bytes left after the value of schema {}", left, id);
  const size_t at = out.size();
  decode_path_.clear();
  JsonOut json(out);
  const bool written = c.fixed.empty()
                           ? write(c, c.root, &c.value, json)
                           : write_record(c, c.nodes[c.root], &c.value, &c.fixed[0], json);
  if (!written) {
    out.resize(at);
    std::reverse(decode_path_.begin(), decode_path_.end());
    if (decode_path_.empty()) return data_error("avro: schema {}: {}", id, decode_error_);
    return data_error("avro: field '{}' of schema {}: {}",
                      format_path(decode_path_.data(), decode_path_.size()), id, decode_error_);
  }
  json.finish();
  return id;
}

bool AvroCodec::write(const Compiled& c, uint32_t at, avro_value_t* v, JsonOut& out) {
  const Node& n = c.nodes[at];
  switch (n.kind) {
    case Kind::kNull:
      out.put("null", 4);
      return true;
    case Kind::kBoolean: {
      int b = 0;
      if (avro_value_get_boolean(v, &b)) return decode_fault("not a boolean");
      if (b)
        out.put("true", 4);
      else
        out.put("false", 5);
      return true;
    }
    case Kind::kInt: {
      int32_t x = 0;
      if (avro_value_get_int(v, &x)) return decode_fault("not an int");
      if (n.logical == Logical::kNone || options_.avro_standard_json) {
        put_int(out, x);
        return true;
      }
      write_int(n, x, out);
      return true;
    }
    case Kind::kLong: {
      int64_t x = 0;
      if (avro_value_get_long(v, &x)) return decode_fault("not a long");
      if (n.logical == Logical::kNone || options_.avro_standard_json) {
        put_int(out, x);
        return true;
      }
      write_long(n, x, out);
      return true;
    }
    case Kind::kFloat: {
      float x = 0;
      if (avro_value_get_float(v, &x)) return decode_fault("not a float");
      put_float(out, x);
      return true;
    }
    case Kind::kDouble: {
      double x = 0;
      if (avro_value_get_double(v, &x)) return decode_fault("not a double");
      if (put_non_finite(out, x) || put_short_decimal(out, x)) return true;
      scratch_.clear();
      append_double(scratch_, x);
      out.put(scratch_);
      return true;
    }
    case Kind::kString: {
      const char* p = nullptr;
      size_t size = 0;
      if (avro_value_get_string(v, &p, &size)) return decode_fault("not a string");
      // The size counts a NUL.
      if (!put_json_string(out, p, size == 0 ? 0 : size - 1))
        return decode_fault("a string that is not valid UTF-8");
      return true;
    }
    case Kind::kBytes:
    case Kind::kFixed: {
      const void* p = nullptr;
      size_t size = 0;
      if ((n.kind == Kind::kBytes ? avro_value_get_bytes(v, &p, &size)
                                  : avro_value_get_fixed(v, &p, &size)))
        return decode_fault("not bytes");
      const auto* b = static_cast<const unsigned char*>(p);
      if (options_.avro_standard_json) {
        put_code_points(out, b, size);
        return true;
      }
      if (n.logical == Logical::kDecimal) {
        write_decimal(out, b, size, n.scale);
        return true;
      }
      out.put('"');
      append_base64(out.string(), std::string_view(static_cast<const char*>(p), size));
      out.resume();
      out.put('"');
      return true;
    }
    case Kind::kEnum: {
      int x = 0;
      if (avro_value_get_enum(v, &x)) return decode_fault("not an enum");
      if (x < 0 || static_cast<size_t>(x) >= n.symbol_json.size())
        return decode_fault("an enum index beyond the symbols");
      n.symbol_json[static_cast<size_t>(x)].put(out);
      return true;
    }
    case Kind::kRecord:
      return write_record(c, n, v, nullptr, out);
    case Kind::kArray: {
      size_t count = 0;
      if (avro_value_get_size(v, &count)) return decode_fault("not an array");
      out.put('[');
      for (size_t i = 0; i < count; ++i) {
        if (i > 0) out.put(',');
        avro_value_t child;
        if (avro_value_get_by_index(v, i, &child, nullptr)) return decode_fault("a missing item");
        if (!write(c, n.children[0], &child, out)) {
          decode_path_.push_back({{}, i, true});
          return false;
        }
      }
      out.put(']');
      return true;
    }
    case Kind::kMap: {
      size_t count = 0;
      if (avro_value_get_size(v, &count)) return decode_fault("not a map");
      out.put('{');
      for (size_t i = 0; i < count; ++i) {
        if (i > 0) out.put(',');
        avro_value_t child;
        const char* key = nullptr;
        if (avro_value_get_by_index(v, i, &child, &key)) return decode_fault("a missing entry");
        std::string_view k(key);
        if (!put_json_string(out, k.data(), k.size()))
          return decode_fault("a map key that is not valid UTF-8");
        out.put(':');
        if (!write(c, n.children[0], &child, out)) {
          decode_path_.push_back({k, 0, false});
          return false;
        }
      }
      out.put('}');
      return true;
    }
    case Kind::kUnion: {
      int d = 0;
      avro_value_t branch;
      if (avro_value_get_discriminant(v, &d) || avro_value_get_current_branch(v, &branch))
        return decode_fault("a union without a branch");
      const uint32_t b = n.children[static_cast<size_t>(d)];
      if (c.nodes[b].kind == Kind::kNull) {
        out.put("null", 4);
        return true;
      }
      if (!options_.avro_standard_json) return write(c, b, &branch, out);
      c.nodes[b].wrap.put(out);
      if (!write(c, b, &branch, out)) return false;
      out.put('}');
      return true;
    }
  }
  return decode_fault("an unknown type");
}

bool AvroCodec::write_record(const Compiled& c, const Node& n, avro_value_t* v,
                             const FixedRecord* fixed, JsonOut& out) {
  out.put('{');
  for (size_t i = 0; i < n.fields.size(); ++i) {
    const Field& f = n.fields[i];
    f.key.put(out);
    avro_value_t child;
    bool ok;
    if (fixed != nullptr) {
      child = fixed->fields[i];
      const int32_t nested = fixed->nested[i];
      ok = nested >= 0 ? write_record(c, c.nodes[f.type], &child,
                                      &c.fixed[static_cast<size_t>(nested)], out)
                       : write(c, f.type, &child, out);
    } else {
      if (avro_value_get_by_index(v, i, &child, nullptr)) return decode_fault("a missing field");
      ok = write(c, f.type, &child, out);
    }
    if (!ok) {
      decode_path_.push_back({f.name, 0, false});
      return false;
    }
  }
  out.put('}');
  return true;
}

void AvroCodec::write_int(const Node& n, int32_t v, JsonOut& out) {
  if (n.logical == Logical::kDate) {
    // Days outside the years 0000-9999 stay numbers, which encode() reads
    // back.
    const Millis t = static_cast<Millis>(v) * kDay;
    if (t < kMinTime || t > kMaxTime) return put_int(out, v);
    scratch_.clear();
    append_rfc3339(scratch_, t);
    out.put('"');
    out.put(scratch_.data(), 10);  // yyyy-mm-dd
    out.put('"');
    return;
  }
  // time-millis: within a day, else the number.
  if (v < 0 || v >= kDay) return put_int(out, v);
  put_time_of_day(out, v, static_cast<uint64_t>(v % 1000), 3);
}

void AvroCodec::write_long(const Node& n, int64_t v, JsonOut& out) {
  switch (n.logical) {
    case Logical::kTimestampMillis:
      return write_timestamp(out, v, false, false);
    case Logical::kTimestampMicros:
      return write_timestamp(out, v, true, false);
    case Logical::kLocalTimestampMillis:
      return write_timestamp(out, v, false, true);
    case Logical::kLocalTimestampMicros:
      return write_timestamp(out, v, true, true);
    case Logical::kTimeMicros:
      if (v < 0 || v >= kDay * 1000) return put_int(out, v);
      return put_time_of_day(out, v / 1000, static_cast<uint64_t>(v % 1'000'000), 6);
    default:
      return put_int(out, v);
  }
}

void AvroCodec::write_timestamp(JsonOut& out, int64_t v, bool micros, bool local) {
  const int64_t per_milli = micros ? 1000 : 1;
  const Millis ms = floor_div(v, per_milli);
  // Times RFC 3339 cannot write are numbers, as --time-format ms has them.
  if (options_.epoch_millis || ms < kMinTime || ms > kMaxTime)
    return put_scaled_millis(out, v, per_milli, 3);
  scratch_.clear();
  append_rfc3339(scratch_, ms);
  char* p = out.room(scratch_.size() + 8);
  *p++ = '"';
  std::memcpy(p, scratch_.data(), scratch_.size() - 1);  // without the Z
  p += scratch_.size() - 1;
  if (micros) p = write_digits(p, static_cast<uint64_t>(floor_mod(v, per_milli)), 3);
  if (!local) *p++ = 'Z';
  *p++ = '"';
  out.advance_to(p);
}

void AvroCodec::write_decimal(JsonOut& out, const unsigned char* b, size_t n, int32_t scale) {
  const bool negative = n > 0 && (b[0] & 0x80);
  digits_.clear();
  if (n <= 8) {
    uint64_t u = negative ? ~uint64_t{0} : 0;
    for (size_t i = 0; i < n; ++i) u = u << 8 | b[i];
    if (negative) u = 0 - u;
    char buf[24];
    auto r = std::to_chars(buf, buf + sizeof buf, u);
    digits_.assign(buf, r.ptr);
  } else {
    // The magnitude, big-endian, divided by 10^9 until nothing is left.
    big_.assign(b, b + n);
    if (negative) negate_twos_complement(big_.rbegin(), big_.rend());
    size_t start = 0;
    while (start < big_.size()) {
      if (big_[start] == 0) {
        ++start;
        continue;
      }
      uint64_t rem = 0;
      for (size_t i = start; i < big_.size(); ++i) {
        uint64_t cur = rem << 8 | big_[i];
        big_[i] = static_cast<uint8_t>(cur / 1'000'000'000);
        rem = cur % 1'000'000'000;
      }
      for (int k = 0; k < 9; ++k) {
        digits_.push_back(static_cast<char>('0' + rem % 10));
        rem /= 10;
      }
    }
    while (digits_.size() > 1 && digits_.back() == '0') digits_.pop_back();
    if (digits_.empty()) digits_.push_back('0');
    std::reverse(digits_.begin(), digits_.end());
  }
  const auto s = static_cast<size_t>(scale);
  const size_t len = digits_.size();
  char* p = out.room(len + s + 8);
  *p++ = '"';
  if (negative) *p++ = '-';
  if (s == 0) {
    p = std::copy(digits_.begin(), digits_.end(), p);
  } else if (len > s) {
    p = std::copy(digits_.begin(), digits_.end() - static_cast<std::ptrdiff_t>(s), p);
    *p++ = '.';
    p = std::copy(digits_.end() - static_cast<std::ptrdiff_t>(s), digits_.end(), p);
  } else {
    *p++ = '0';
    *p++ = '.';
    p = std::fill_n(p, s - len, '0');
    p = std::copy(digits_.begin(), digits_.end(), p);
  }
  *p++ = '"';
  out.advance_to(p);
}

}  // namespace kpipe::avro
