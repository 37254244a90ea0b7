#include "kpipe/cli/secrets.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "kpipe/schema/registry_http.h"
#include "kpipe/store/postgres.h"

using namespace kpipe;
using kpipe::cli::command_line_secrets;
using kpipe::cli::GivenOption;
using kpipe::cli::postgres_target_has_password;
using kpipe::cli::url_has_password;

using Found = std::vector<std::string>;

TEST_CASE("command_line_secrets: -X with a secret key, unless its value is read from a file",
          "[secrets]") {
  CHECK(command_line_secrets({{"--property", "sasl.password=hunter2"}}) ==
        Found{"-X sasl.password"});
  // The one list of secret keys: kafka/config's.
  CHECK(command_line_secrets({{"--property", "ssl.key.password=x"},
                              {"--property", "sasl.jaas.config=org... password=\"x\";"},
                              {"--property", "sasl.oauthbearer.client.secret=x"}}) ==
        Found{"-X ssl.key.password", "-X sasl.jaas.config", "-X sasl.oauthbearer.client.secret"});
  CHECK(command_line_secrets({{"--property", "sasl.password=@/run/credentials/x/pw"}}).empty());
  // "@@" is a literal '@': the password is on the command line.
  CHECK(command_line_secrets({{"--property", "sasl.password=@@hunter2"}}) ==
        Found{"-X sasl.password"});
  CHECK(command_line_secrets({{"--property", "sasl.password="}}).empty());
  CHECK(command_line_secrets({{"--property", "sasl.username=app"},
                              {"--property", "acks=all"},
                              {"--property", "sasl.password"}})
            .empty());
}

TEST_CASE("command_line_secrets: each source named once, in order", "[secrets]") {
  Found found = command_line_secrets({{"--property", "sasl.password=a"},
                                      {"--state", "postgresql://app:pw@db/x"},
                                      {"--property", "sasl.password=b"},
                                      {"--dlq", "postgresql:host=db password=pw"},
                                      {"--registry", "https://u:p@registry:8081"},
                                      {"--registry-auth", "u:p"},
                                      {"--state", "postgres://app:pw2@db/y"}});
  CHECK(found == Found{"-X sasl.password", "--state's PostgreSQL URI",
                       "--dlq's PostgreSQL conninfo", "--registry's user:password",
                       "--registry-auth"});
  CHECK(cli::command_line_secrets_warning(found) ==
        "-X sasl.password, --state's PostgreSQL URI, --dlq's PostgreSQL conninfo, --registry's "
        "user:password and --registry-auth put a password on the command line, where every local "
        "user can read it (ps): keep it in the client file (--config), PGPASSWORD or ~/.pgpass, or "
        "a systemd credential (LoadCredential=), or read it from a file with -X KEY=@FILE");
  CHECK(cli::command_line_secrets_warning({"--registry-auth"})
            .starts_with("--registry-auth puts a password on the command line"));
}

TEST_CASE("command_line_secrets: any option's PostgreSQL target, none without a password",
          "[secrets]") {
  CHECK(command_line_secrets({{"--db", "postgresql://app:pw@db/x"}}) ==
        Found{"--db's PostgreSQL URI"});
  CHECK(command_line_secrets({{"--table", "postgresql://app:pw@db/x#rates"}}) ==
        Found{"--table's PostgreSQL URI"});
  CHECK(command_line_secrets({{"--history", "postgresql:password=pw"}}) ==
        Found{"--history's PostgreSQL conninfo"});
  CHECK(command_line_secrets({{"inputs", "postgresql://app:pw@db/x"}}) ==
        Found{"the inputs argument's PostgreSQL URI"});
  CHECK(command_line_secrets({{"--state", "postgresql://app@db/x"},
                              {"--dlq", "postgresql:host=db user=app"},
                              {"--state", "state.db"},
                              {"--dlq", "kafka:dead"},
                              {"--registry", "https://u@registry"},
                              {"--registry-auth", ""},
                              {"--table", "sqlite:password=x:t"},
                              {"--reason", "password=x"}})
            .empty());
}

TEST_CASE("postgres_target_has_password finds what the redaction leaves out", "[secrets]") {
  // store/postgres.cpp hides the passwords it finds: the two agree.
  for (std::string t :
       {"postgresql://app:s3cret@db:5433/x?sslmode=require", "postgres://app:p%40ss@db/x",
        "postgresql://app:pa/ss@db/x", "postgresql://app:p@ss@db/x",
        "postgresql:///x?user=app&password=s3cret&sslmode=disable",
        "postgresql:///x?sslmode=disable&password=s3cret", "postgresql:///x?pass%77ord=s3cret",
        "postgresql:host=db password=s3cret", "postgresql:host=db password = 's3 cret'",
        "postgres:password=x"}) {
    INFO(t);
    CHECK(postgres_target_has_password(t));
    CHECK(redact_postgres_target(t).find("s3") == std::string::npos);
  }
  for (std::string t : {"postgresql://app@db/x", "postgresql://db:5432/name@x", "postgres://db",
                        "postgresql:///x?user=app", "postgresql:host=db user=app",
                        "postgresql:", "postgresql://app:@db/x", "postgresql:host=db password=''",
                        "state.db", "password=x.db", "kafka:password"}) {
    INFO(t);
    CHECK_FALSE(postgres_target_has_password(t));
  }
}

TEST_CASE("url_has_password reads the user info as the registry does", "[secrets]") {
  for (std::string u :
       {"https://u:p@registry:8081", "http://u:pa/ss@registry", "https://u:p%40@registry/x"}) {
    INFO(u);
    CHECK(url_has_password(u));
    auto parsed = parse_registry_url(u);
    REQUIRE(parsed.ok());
    CHECK_FALSE(parsed->password.empty());
  }
  for (std::string u : {"https://registry:8081", "https://u@registry", "http://u:@registry",
                        "http://registry:8081/a@b"}) {
    INFO(u);
    CHECK_FALSE(url_has_password(u));
    auto parsed = parse_registry_url(u);
    REQUIRE(parsed.ok());
    CHECK(parsed->password.empty());
  }
}
