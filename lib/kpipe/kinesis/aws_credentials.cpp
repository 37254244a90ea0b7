#include "kpipe/kinesis/aws_credentials.h"

#include <simdjson.h>

#include "kpipe/percent.h"

namespace kpipe {

namespace {

// The text of the first <tag>...</tag> in `xml`; nullopt if none. STS's
// answers are small and flat where it matters: no XML parser is needed.
std::optional<std::string> xml_text(std::string_view xml, std::string_view tag) {
  std::string open = fmt::format("<{}>", tag);
  std::string close = fmt::format("</{}>", tag);
  auto a = xml.find(open);
  if (a == std::string_view::npos) return std::nullopt;
  a += open.size();
  auto b = xml.find(close, a);
  if (b == std::string_view::npos) return std::nullopt;
  std::string out;
  std::string_view text = xml.substr(a, b - a);
  // The five entities XML escapes text with.
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '&') {
      out.push_back(text[i]);
      continue;
    }
    static constexpr std::pair<std::string_view, char> kEntities[] = {
        {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
    bool replaced = false;
    for (const auto& [entity, c] : kEntities) {
      if (text.substr(i).starts_with(entity)) {
        out.push_back(c);
        i += entity.size() - 1;
        replaced = true;
        break;
      }
    }
    if (!replaced) out.push_back('&');
  }
  return out;
}

Millis expiry(std::string_view text) {
  auto t = parse_time_point(text, 0);
  return t ? *t : 0;
}

std::string setting(const AwsProfile& profile, std::string_view key) {
  auto it = profile.find(key);
  return it == profile.end() ? std::string() : it->second;
}

// Web identity: a token file and a role, exchanged at STS.
Expected<AwsCredentials> assume_role_with_web_identity(const AwsEnvironment& env,
                                                       const AwsSettings& settings,
                                                       const std::string& token_file,
                                                       const std::string& role_arn,
                                                       std::string session, HttpTransport& http,
                                                       FileReader read_file, Clock& clock) {
  std::string source = fmt::format("web identity (role '{}')", role_arn);
  auto token = read_file(token_file);
  if (!token)
    return failure("{}: cannot read the web identity token file '{}'", source, token_file);
  while (!token->empty() && (token->back() == '\n' || token->back() == '\r')) token->pop_back();
  if (session.empty()) session = fmt::format("kpipe-{}", clock.now());
  std::string endpoint = env.get("AWS_ENDPOINT_URL_STS");
  if (endpoint.empty()) endpoint = env.get("AWS_ENDPOINT_URL");
  if (endpoint.empty()) endpoint = "https://sts." + settings.region + ".amazonaws.com";
  while (endpoint.size() > 1 && endpoint.back() == '/') endpoint.pop_back();
  HttpRequest request;
  request.method = "POST";
  request.url = endpoint + "/";
  request.headers = {{"Content-Type", "application/x-www-form-urlencoded"},
                     {"Accept", "application/xml"}};
  request.body =
      "Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn=" + percent_encode(role_arn) +
      "&RoleSessionName=" + percent_encode(session) + "&WebIdentityToken=" + percent_encode(*token);
  auto answer = http.send(request);
  if (!answer)
    return failure("{}: STS at {} could not be reached: {}", source, endpoint,
                   answer.error().message);
  if (answer->status != 200) {
    std::string code = xml_text(answer->body, "Code").value_or("");
    std::string message = xml_text(answer->body, "Message").value_or("");
    return failure("{}: STS at {} refused AssumeRoleWithWebIdentity: HTTP {}{}{}", source, endpoint,
                   answer->status, code.empty() ? "" : ": " + code,
                   message.empty() ? "" : ": " + message);
  }
  return parse_sts_credentials(answer->body, source);
}

constexpr std::string_view kImdsDefault = "http://169.254.169.254";
// The metadata service answers at once or not at all: off EC2 its address
// leads nowhere, and a program must not wait long to find that out.
constexpr Millis kImdsTimeout = kSecond;

// IMDSv2: a session token (PUT), then the role's name, then its keys.
Expected<std::optional<AwsCredentials>> instance_role(const AwsEnvironment& env,
                                                      HttpTransport& http) {
  std::string disabled = env.get("AWS_EC2_METADATA_DISABLED");
  if (disabled == "true" || disabled == "TRUE" || disabled == "True")
    return std::optional<AwsCredentials>();
  std::string base = env.get("AWS_EC2_METADATA_SERVICE_ENDPOINT");
  bool configured = !base.empty();
  if (base.empty()) base = std::string(kImdsDefault);
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  HttpRequest put;
  put.method = "PUT";
  put.url = base + "/latest/api/token";
  put.headers = {{"X-aws-ec2-metadata-token-ttl-seconds", "21600"}};
  put.timeout = kImdsTimeout;
  auto token = http.send(put);
  // No service there: not on EC2, and no credentials from it. One that was
  // named, though, should answer.
  if (!token) {
    if (!configured) return std::optional<AwsCredentials>();
    return failure("instance metadata at {} could not be reached: {}", base, token.error().message);
  }
  if (token->status != 200)
    return failure("instance metadata at {}: HTTP {} for a session token (IMDSv2)", base,
                   token->status);
  auto get = [&](const std::string& path) -> Expected<HttpResponse> {
    HttpRequest r;
    r.url = base + path;
    r.headers = {{"X-aws-ec2-metadata-token", token->body}};
    r.timeout = kImdsTimeout;
    return http.send(r);
  };
  const std::string prefix = "/latest/meta-data/iam/security-credentials/";
  auto roles = get(prefix);
  if (!roles) return failure("instance metadata at {}: {}", base, roles.error().message);
  if (roles->status == 404) return std::optional<AwsCredentials>();  // no role attached
  if (roles->status != 200)
    return failure("instance metadata at {}: HTTP {} for the instance's role", base, roles->status);
  std::string role = roles->body.substr(0, roles->body.find('\n'));
  if (role.empty()) return std::optional<AwsCredentials>();
  auto keys = get(prefix + role);
  if (!keys) return failure("instance metadata at {}: {}", base, keys.error().message);
  if (keys->status != 200)
    return failure("instance metadata at {}: HTTP {} for role '{}''s credentials", base,
                   keys->status, role);
  auto c = parse_imds_credentials(keys->body, fmt::format("instance role '{}'", role));
  if (!c) return c.take_error();
  return std::optional<AwsCredentials>(std::move(*c));
}

}  // namespace

Expected<AwsCredentials> parse_sts_credentials(std::string_view xml, std::string_view source) {
  AwsCredentials c;
  c.source = std::string(source);
  auto id = xml_text(xml, "AccessKeyId");
  auto secret = xml_text(xml, "SecretAccessKey");
  auto token = xml_text(xml, "SessionToken");
  if (!id || !secret || !token || id->empty() || secret->empty())
    return failure("{}: STS's answer holds no credentials", source);
  c.access_key_id = std::move(*id);
  c.secret_access_key = std::move(*secret);
  c.session_token = std::move(*token);
  c.expires = expiry(xml_text(xml, "Expiration").value_or(""));
  return c;
}

Expected<AwsCredentials> parse_imds_credentials(std::string_view json, std::string_view source) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(json.data(), json.size()).get(doc) != simdjson::SUCCESS)
    return failure("{}: the metadata service's answer is not JSON", source);
  auto text = [&](const char* key) -> std::string {
    std::string_view v;
    if (doc[key].get(v) != simdjson::SUCCESS) return {};
    return std::string(v);
  };
  std::string code = text("Code");
  if (!code.empty() && code != "Success")
    return failure("{}: the metadata service says '{}'", source, code);
  AwsCredentials c;
  c.source = std::string(source);
  c.access_key_id = text("AccessKeyId");
  c.secret_access_key = text("SecretAccessKey");
  c.session_token = text("Token");
  c.expires = expiry(text("Expiration"));
  if (c.access_key_id.empty() || c.secret_access_key.empty())
    return failure("{}: the metadata service's answer holds no credentials", source);
  return c;
}

Expected<AwsCredentials> find_aws_credentials(const AwsEnvironment& env,
                                              const AwsSettings& settings, HttpTransport& http,
                                              FileReader read_file, Clock& clock) {
  // 1. The environment: both keys, or neither.
  std::string id = env.get("AWS_ACCESS_KEY_ID");
  std::string secret = env.get("AWS_SECRET_ACCESS_KEY");
  if (!id.empty() || !secret.empty()) {
    if (id.empty()) return usage_error("AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not");
    if (secret.empty())
      return usage_error("AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not");
    return AwsCredentials{id, secret, env.get("AWS_SESSION_TOKEN"), "environment", 0};
  }
  // 2. The profile's keys.
  const AwsProfile& p = settings.profile_values;
  std::string pid = setting(p, "aws_access_key_id");
  std::string psecret = setting(p, "aws_secret_access_key");
  std::string where = fmt::format("profile '{}'", settings.profile);
  if (!pid.empty() || !psecret.empty()) {
    if (pid.empty() || psecret.empty())
      return usage_error("{} in '{}' has only one of aws_access_key_id and aws_secret_access_key",
                         where, settings.credentials_file);
    return AwsCredentials{pid, psecret, setting(p, "aws_session_token"), where, 0};
  }
  // 3. Web identity: the profile's, else the environment's.
  std::string role = setting(p, "role_arn");
  std::string token_file = setting(p, "web_identity_token_file");
  std::string session = setting(p, "role_session_name");
  if (role.empty() || token_file.empty()) {
    role = env.get("AWS_ROLE_ARN");
    token_file = env.get("AWS_WEB_IDENTITY_TOKEN_FILE");
    session = env.get("AWS_ROLE_SESSION_NAME");
  }
  if (!token_file.empty() && role.empty())
    return usage_error("AWS_WEB_IDENTITY_TOKEN_FILE is set but AWS_ROLE_ARN is not");
  if (!token_file.empty())
    return assume_role_with_web_identity(env, settings, token_file, role, session, http, read_file,
                                         clock);
  // 4. The instance's role.
  auto instance = instance_role(env, http);
  if (!instance) return instance.take_error();
  if (*instance) return std::move(**instance);
  return usage_error(
      "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, name a profile with "
      "AWS_PROFILE (now '{}', in '{}'), set AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN, or run "
      "where the instance metadata service gives a role",
      settings.profile, settings.credentials_file);
}

}  // namespace kpipe
