// Percent-encoding (RFC 3986), as URLs carry user names and passwords: the
// Schema Registry's URL and a PostgreSQL target's URI decode it alike.
#pragma once

#include <string>
#include <string_view>

namespace kpipe {

// `text` with every %XX decoded into `out`; a '%' that starts no escape is
// kept as written. False when there was such a '%': a strict reader refuses
// the text, a lenient one (finding where a password is) uses `out`.
bool percent_decode(std::string_view text, std::string& out);

}  // namespace kpipe
