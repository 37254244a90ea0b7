#include "kpipe/kafka/acl.h"

#include <catch2/catch.hpp>

#include "fakes.h"
#include "kpipe/kafka/client.h"
#include "kpipe/kafka/config.h"
#include "kpipe/kafka/internal.h"
#include "kpipe/kafka/mock_cluster.h"

using namespace kpipe;

namespace {

AclNeed need(AclOperation op, AclResourceType type, std::string name) {
  return AclNeed{op, type, std::move(name)};
}

}  // namespace

TEST_CASE("not_authorized: one line naming the operation, the resource and the ACL",
          "[kafka][acl]") {
  using Op = AclOperation;
  using Type = AclResourceType;
  Error e = not_authorized(need(Op::kRead, Type::kGroup, "clicks"));
  CHECK(e.status == ExitStatus::kFailure);
  CHECK(e.message == "not authorized to read group 'clicks' (ACL needed: Read on Group:clicks)");
  CHECK(not_authorized(need(Op::kWrite, Type::kTopic, "out")).message ==
        "not authorized to write topic 'out' (ACL needed: Write on Topic:out)");
  CHECK(not_authorized(need(Op::kDescribe, Type::kTopic, "src")).message ==
        "not authorized to describe topic 'src' (ACL needed: Describe on Topic:src)");
  CHECK(not_authorized(need(Op::kDelete, Type::kTopic, "dead")).message ==
        "not authorized to delete records of topic 'dead' (ACL needed: Delete on Topic:dead)");
  CHECK(not_authorized(need(Op::kDescribe, Type::kGroup, "g")).message ==
        "not authorized to describe group 'g' (ACL needed: Describe on Group:g)");
  // Every transactional call writes to the id: "use" says more than "write".
  CHECK(not_authorized(need(Op::kWrite, Type::kTransactionalId, "kpipe-out-1")).message ==
        "not authorized to use transactional id 'kpipe-out-1' (ACL needed: Write on "
        "TransactionalId:kpipe-out-1)");
  // The cluster has one name in Kafka's ACLs, whatever the need says.
  CHECK(not_authorized(need(Op::kIdempotentWrite, Type::kCluster, "")).message ==
        "not authorized to write idempotently to the cluster (ACL needed: IdempotentWrite on "
        "Cluster:kafka-cluster)");
  CHECK(format_acl(need(Op::kRead, Type::kTopic, "a.b-c_d")) == "Read on Topic:a.b-c_d");
}

TEST_CASE("authorization_error: each refusal names what the caller needed of its kind",
          "[kafka][acl]") {
  Access a;
  a.topic = need(AclOperation::kRead, AclResourceType::kTopic, "src");
  a.group = need(AclOperation::kRead, AclResourceType::kGroup, "clicks");
  a.transactional_id = need(AclOperation::kWrite, AclResourceType::kTransactionalId, "tx");
  // A producer refused its id by the cluster: Write on its topic allows it
  // from Kafka 2.8 on, so that is what is named.
  a.cluster = need(AclOperation::kWrite, AclResourceType::kTopic, "out");

  auto topic = authorization_error(RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED, a);
  REQUIRE(topic);
  CHECK(topic->message == "not authorized to read topic 'src' (ACL needed: Read on Topic:src)");
  auto group = authorization_error(RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED, a);
  REQUIRE(group);
  CHECK(group->message ==
        "not authorized to read group 'clicks' (ACL needed: Read on Group:clicks)");
  auto id = authorization_error(RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED, a);
  REQUIRE(id);
  CHECK(id->message ==
        "not authorized to use transactional id 'tx' (ACL needed: Write on TransactionalId:tx)");
  auto cluster = authorization_error(RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED, a);
  REQUIRE(cluster);
  CHECK(cluster->message == "not authorized to write topic 'out' (ACL needed: Write on Topic:out)");

  // Other errors are not refusals: their callers go on as before.
  CHECK_FALSE(authorization_error(RD_KAFKA_RESP_ERR_NO_ERROR, a));
  CHECK_FALSE(authorization_error(RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART, a));
  CHECK_FALSE(authorization_error(RD_KAFKA_RESP_ERR__TIMED_OUT, a));
  CHECK_FALSE(authorization_error(RD_KAFKA_RESP_ERR_SASL_AUTHENTICATION_FAILED, a));
  CHECK_FALSE(authorization_error(RD_KAFKA_RESP_ERR_DELEGATION_TOKEN_AUTHORIZATION_FAILED, a));
}

TEST_CASE("authorization_error: a refusal no caller foresaw is still one final line",
          "[kafka][acl]") {
  Access none;
  auto e = authorization_error(RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED, none);
  REQUIRE(e);
  CHECK(e->status == ExitStatus::kFailure);
  CHECK(e->message ==
        "not authorized: the cluster's ACLs refuse access to a consumer group (kpipe(7), "
        "SECURITY)");
  CHECK(authorization_error(RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED, none)->message ==
        "not authorized: the cluster's ACLs refuse access to the cluster (kpipe(7), SECURITY)");
}

TEST_CASE("authorization_error of a list: a partition's refusal names its topic, else the call's",
          "[kafka][acl]") {
  auto read = [](const std::string& topic) {
    Access a;
    a.topic = need(AclOperation::kRead, AclResourceType::kTopic, topic);
    return a;
  };
  ListGuard g{to_list(std::vector<TopicPartition>{{"first", 0}, {"second", 1}})};
  // Nothing refused: no error, whatever else the call answered.
  CHECK_FALSE(authorization_error(RD_KAFKA_RESP_ERR__TIMED_OUT, g.list, "first", read));
  // The call's refusal names the topic it is given.
  auto call =
      authorization_error(RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED, g.list, "first", read);
  REQUIRE(call);
  CHECK(call->message == "not authorized to read topic 'first' (ACL needed: Read on Topic:first)");
  // A partition's refusal comes first and names its own topic.
  g.list->elems[1].err = RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED;
  auto part =
      authorization_error(RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED, g.list, "first", read);
  REQUIRE(part);
  CHECK(part->message ==
        "not authorized to read topic 'second' (ACL needed: Read on Topic:second)");
}

TEST_CASE("refused_resource: the four authorization errors and nothing else", "[kafka][acl]") {
  CHECK(refused_resource(RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED) == AclResourceType::kTopic);
  CHECK(refused_resource(RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED) == AclResourceType::kGroup);
  CHECK(refused_resource(RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED) ==
        AclResourceType::kTransactionalId);
  CHECK(refused_resource(RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED) ==
        AclResourceType::kCluster);
  CHECK_FALSE(refused_resource(RD_KAFKA_RESP_ERR__AUTHENTICATION));
  CHECK_FALSE(refused_resource(RD_KAFKA_RESP_ERR__FATAL));
}

// What each client says when the cluster refuses it its topic, through
// librdkafka's mock answering Metadata with TOPIC_AUTHORIZATION_FAILED:
// the ACL named is what the client is for, not only what the refused
// request asked (Read implies Describe, and granting Describe alone would
// only move the refusal to the fetch).
TEST_CASE("a refused topic is named by each client for what it does with it", "[kafka][acl]") {
  RecordingReporter reporter;
  auto mock = MockCluster::create(1, reporter);
  REQUIRE(mock.ok());
  REQUIRE((*mock)->create_topic("secret", 1).ok());
  REQUIRE((*mock)->set_topic_error("secret", "TOPIC_AUTHORIZATION_FAILED").ok());
  KafkaConfig config;
  config.set("bootstrap.servers", (*mock)->bootstraps());
  config.timeout = 5 * kSecond;
  SystemClock clock;

  auto consumer = Consumer::create(config, "", reporter, clock);
  REQUIRE(consumer.ok());
  auto read = (*consumer)->partitions("secret");
  REQUIRE_FALSE(read.ok());
  CHECK(read.error().message ==
        "not authorized to read topic 'secret' (ACL needed: Read on Topic:secret)");
  (*consumer)->set_access(AclOperation::kDescribe, AclOperation::kDescribe);
  auto described = (*consumer)->partitions("secret");
  REQUIRE_FALSE(described.ok());
  CHECK(described.error().message ==
        "not authorized to describe topic 'secret' (ACL needed: Describe on Topic:secret)");

  auto producer = Producer::create(config, reporter, clock);
  REQUIRE(producer.ok());
  auto written = (*producer)->await_partitions("secret");
  REQUIRE_FALSE(written.ok());
  CHECK(written.error().message ==
        "not authorized to write topic 'secret' (ACL needed: Write on Topic:secret)");

  auto reader = GroupReader::create(config, "g", reporter, clock);
  REQUIRE(reader.ok());
  auto looked = (*reader)->partitions("secret");
  REQUIRE_FALSE(looked.ok());
  CHECK(looked.error().message ==
        "not authorized to describe topic 'secret' (ACL needed: Describe on Topic:secret)");
  CHECK(reporter.warnings.empty());
}

TEST_CASE("is_not_authorized: a refusal, and no other failure", "[kafka][acl]") {
  CHECK(is_not_authorized(not_authorized(need(AclOperation::kRead, AclResourceType::kGroup, "g"))));
  CHECK(is_not_authorized(not_authorized(AclResourceType::kTopic, Access{})));
  CHECK_FALSE(is_not_authorized(failure("cannot commit offsets: Broker: Unknown member")));
}
