// Kafka's ACLs as kpipe names them (kpipe(7), SECURITY). When the
// cluster's authorizer refuses a request, the program stops with one line
// naming the operation and the resource refused and the ACL that would
// allow it, instead of librdkafka's "Broker: Topic authorization failed"
// (or a retry until --timeout). Kafka's refusal says only which kind of
// resource it refused (TOPIC_AUTHORIZATION_FAILED, GROUP_..., ...): the
// caller, who knows what it was doing, says which one, and for what.
#pragma once

#include <optional>
#include <string>

#include "kpipe/status.h"

namespace kpipe {

// The operations kpipe's programs need, as kafka-acls spells them.
enum class AclOperation { kRead, kWrite, kDescribe, kDelete, kIdempotentWrite };
enum class AclResourceType { kTopic, kGroup, kTransactionalId, kCluster };

// The one cluster resource's name in Kafka's ACLs.
inline constexpr const char* kClusterResourceName = "kafka-cluster";

// One ACL: an operation on a resource.
struct AclNeed {
  AclOperation operation = AclOperation::kDescribe;
  AclResourceType type = AclResourceType::kTopic;
  std::string name;
};

// What a request needs of each kind of resource the cluster may refuse
// it. A need may be of another kind than the refusal's: an idempotent
// producer refused by the cluster (Kafka before 2.8 asked for
// IdempotentWrite on it) is allowed from 2.8 on by Write on any topic, so
// kproduce names its topic's Write.
struct Access {
  std::optional<AclNeed> topic;
  std::optional<AclNeed> group;
  std::optional<AclNeed> transactional_id;
  std::optional<AclNeed> cluster;

  const std::optional<AclNeed>& of(AclResourceType refused) const;
};

// "Read on Group:clicks": as kafka-acls takes it (--operation Read
// --group clicks).
std::string format_acl(const AclNeed& need);

// The one line for a refusal, a failure (exit 1):
// "not authorized to read group 'clicks' (ACL needed: Read on Group:clicks)".
Error not_authorized(const AclNeed& need);
// The same for a refusal of `refused`, from what `access` needs of it; a
// line naming only the kind of resource when `access` does not say.
Error not_authorized(AclResourceType refused, const Access& access);

// Whether an error is such a refusal: a caller that adds a guess of its
// own to a failure (kcheckpoint sync: "stop its consumers first") leaves
// a refusal as it is.
bool is_not_authorized(const Error& e);

}  // namespace kpipe
