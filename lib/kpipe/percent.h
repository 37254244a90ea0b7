// Percent-encoding (RFC 3986), as URLs carry user names and passwords: the
// Schema Registry's URL and a PostgreSQL target's URI decode it alike; a
// form sent to AWS's STS encodes its values.
#pragma once

#include <string>
#include <string_view>

namespace kpipe {

// `text` with every %XX decoded into `out`; a '%' that starts no escape is
// kept as written. False when there was such a '%': a strict reader refuses
// the text, a lenient one (finding where a password is) uses `out`.
bool percent_decode(std::string_view text, std::string& out);

// `text` with every byte but RFC 3986's unreserved ones (letters, digits,
// '-', '.', '_', '~') as %XX, upper-case: safe in a query or a form.
std::string percent_encode(std::string_view text);

}  // namespace kpipe
