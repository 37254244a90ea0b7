#include "kpipe/kinesis/aws_config.h"

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

extern char** environ;

namespace kpipe {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

AwsEnvironment AwsEnvironment::from_process() {
  AwsEnvironment env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    if (!entry.starts_with("AWS_")) continue;
    auto eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    env.vars.emplace(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
  }
  if (const char* home = std::getenv("HOME")) env.home = home;
  return env;
}

std::string AwsEnvironment::get(std::string_view name) const {
  auto it = vars.find(name);
  return it == vars.end() ? std::string() : it->second;
}

Expected<std::map<std::string, AwsProfile>> parse_aws_shared_file(std::string_view text,
                                                                  bool config,
                                                                  std::string_view name) {
  std::map<std::string, AwsProfile> out;
  AwsProfile* current = nullptr;
  size_t number = 0;
  for (size_t at = 0; at <= text.size();) {
    size_t nl = text.find('\n', at);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view raw = text.substr(at, nl - at);
    at = nl + 1;
    ++number;
    std::string_view line = trim(raw);
    if (line.empty() || line.front() == '#' || line.front() == ';') continue;
    if (line.front() == '[') {
      if (line.back() != ']')
        return failure("{}: line {}: a section header lacks its ']'", name, number);
      std::string_view section = trim(line.substr(1, line.size() - 2));
      // The config file names profiles "profile NAME" (and "default");
      // its other sections (sso-session, services) are no profiles.
      if (config && section != "default") {
        if (!section.starts_with("profile ") && !section.starts_with("profile\t")) {
          current = nullptr;
          continue;
        }
        section = trim(section.substr(8));
      }
      if (section.empty()) return failure("{}: line {}: a section has no name", name, number);
      current = &out[std::string(section)];
      continue;
    }
    // A nested setting's lines (as "s3 =" followed by indented keys) are
    // no settings of the profile itself.
    if (std::isspace(static_cast<unsigned char>(raw.front()))) continue;
    auto eq = line.find('=');
    if (eq == std::string_view::npos)
      return failure("{}: line {}: expected 'key = value' or '[section]'", name, number);
    if (current == nullptr) continue;  // before any profile, or in another section
    std::string key = lower(trim(line.substr(0, eq)));
    if (key.empty()) return failure("{}: line {}: a setting has no name", name, number);
    (*current)[key] = std::string(trim(line.substr(eq + 1)));
  }
  return out;
}

std::optional<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

Expected<AwsSettings> resolve_aws_settings(std::string_view region_option,
                                           std::string_view endpoint_option,
                                           const AwsEnvironment& env, FileReader read_file) {
  AwsSettings s;
  s.profile = env.get("AWS_PROFILE");
  if (s.profile.empty()) s.profile = env.get("AWS_DEFAULT_PROFILE");
  bool named = !s.profile.empty();
  if (!named) s.profile = "default";
  std::string aws_dir = env.home.empty() ? std::string() : env.home + "/.aws/";
  s.credentials_file = env.get("AWS_SHARED_CREDENTIALS_FILE");
  if (s.credentials_file.empty() && !aws_dir.empty()) s.credentials_file = aws_dir + "credentials";
  s.config_file = env.get("AWS_CONFIG_FILE");
  if (s.config_file.empty() && !aws_dir.empty()) s.config_file = aws_dir + "config";

  bool found = false;
  // The config file first, then the credentials file over it: the SDKs
  // take keys from the credentials file where both have them.
  for (bool config : {true, false}) {
    const std::string& path = config ? s.config_file : s.credentials_file;
    if (path.empty()) continue;
    auto text = read_file(path);
    if (!text) continue;
    auto profiles = parse_aws_shared_file(*text, config, path);
    if (!profiles) return profiles.take_error();
    auto it = profiles->find(s.profile);
    if (it == profiles->end()) continue;
    found = true;
    for (const auto& [k, v] : it->second) s.profile_values[k] = v;
  }
  // A profile asked for by name must exist; "default" need not.
  if (named && !found)
    return usage_error("AWS_PROFILE '{}': no such profile in '{}' or '{}'", s.profile,
                       s.config_file, s.credentials_file);

  s.region = std::string(region_option);
  if (s.region.empty()) s.region = env.get("AWS_REGION");
  if (s.region.empty()) s.region = env.get("AWS_DEFAULT_REGION");
  if (s.region.empty()) {
    auto it = s.profile_values.find("region");
    if (it != s.profile_values.end()) s.region = it->second;
  }
  if (s.region.empty())
    return usage_error(
        "no AWS region: give --region, set AWS_REGION, or set region in profile '{}' of '{}'",
        s.profile, s.config_file);

  s.endpoint = std::string(endpoint_option);
  if (s.endpoint.empty()) s.endpoint = env.get("AWS_ENDPOINT_URL_KINESIS");
  if (s.endpoint.empty()) s.endpoint = env.get("AWS_ENDPOINT_URL");
  if (s.endpoint.empty()) {
    auto it = s.profile_values.find("endpoint_url");
    if (it != s.profile_values.end()) s.endpoint = it->second;
  }
  if (s.endpoint.empty()) s.endpoint = "https://kinesis." + s.region + ".amazonaws.com";
  while (s.endpoint.size() > 1 && s.endpoint.back() == '/') s.endpoint.pop_back();
  if (!s.endpoint.starts_with("http://") && !s.endpoint.starts_with("https://"))
    return usage_error("endpoint '{}': expected an http:// or https:// URL", s.endpoint);
  return s;
}

}  // namespace kpipe
