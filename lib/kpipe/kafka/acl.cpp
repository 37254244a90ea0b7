#include "kpipe/kafka/acl.h"

#include "kpipe/kafka/internal.h"

namespace kpipe {

namespace {

const char* operation_name(AclOperation op) {
  switch (op) {
    case AclOperation::kRead:
      return "Read";
    case AclOperation::kWrite:
      return "Write";
    case AclOperation::kDescribe:
      return "Describe";
    case AclOperation::kDelete:
      return "Delete";
    case AclOperation::kIdempotentWrite:
      return "IdempotentWrite";
  }
  return "?";
}

const char* type_name(AclResourceType type) {
  switch (type) {
    case AclResourceType::kTopic:
      return "Topic";
    case AclResourceType::kGroup:
      return "Group";
    case AclResourceType::kTransactionalId:
      return "TransactionalId";
    case AclResourceType::kCluster:
      return "Cluster";
  }
  return "?";
}

// "group 'clicks'", "the cluster".
std::string resource_phrase(AclResourceType type, const std::string& name) {
  switch (type) {
    case AclResourceType::kTopic:
      return fmt::format("topic '{}'", name);
    case AclResourceType::kGroup:
      return fmt::format("group '{}'", name);
    case AclResourceType::kTransactionalId:
      return fmt::format("transactional id '{}'", name);
    case AclResourceType::kCluster:
      return "the cluster";
  }
  return "?";
}

// What was refused, as a verb: "read", "delete records of". A
// transactional id is written to by every transactional call (Write on
// it), which says less to a reader than "use".
std::string verb(const AclNeed& need) {
  if (need.type == AclResourceType::kTransactionalId && need.operation == AclOperation::kWrite)
    return "use";
  switch (need.operation) {
    case AclOperation::kRead:
      return "read";
    case AclOperation::kWrite:
      return "write";
    case AclOperation::kDescribe:
      return "describe";
    case AclOperation::kDelete:
      return "delete records of";
    case AclOperation::kIdempotentWrite:
      return "write idempotently to";
  }
  return "?";
}

}  // namespace

const std::optional<AclNeed>& Access::of(AclResourceType refused) const {
  switch (refused) {
    case AclResourceType::kTopic:
      return topic;
    case AclResourceType::kGroup:
      return group;
    case AclResourceType::kTransactionalId:
      return transactional_id;
    case AclResourceType::kCluster:
      return cluster;
  }
  return cluster;
}

std::string format_acl(const AclNeed& need) {
  std::string name =
      need.type == AclResourceType::kCluster ? std::string(kClusterResourceName) : need.name;
  return fmt::format("{} on {}:{}", operation_name(need.operation), type_name(need.type), name);
}

Error not_authorized(const AclNeed& need) {
  return failure("not authorized to {} {} (ACL needed: {})", verb(need),
                 resource_phrase(need.type, need.name), format_acl(need));
}

Error not_authorized(AclResourceType refused, const Access& access) {
  const std::optional<AclNeed>& need = access.of(refused);
  if (need) return not_authorized(*need);
  // A refusal no caller foresaw: still one line, and still no retry.
  const char* kind = refused == AclResourceType::kTopic             ? "a topic"
                     : refused == AclResourceType::kGroup           ? "a consumer group"
                     : refused == AclResourceType::kTransactionalId ? "a transactional id"
                                                                    : "the cluster";
  return failure("not authorized: the cluster's ACLs refuse access to {} (kpipe(7), SECURITY)",
                 kind);
}

bool is_not_authorized(const Error& e) {
  // not_authorized() makes every such message, and no other starts so.
  return e.message.starts_with("not authorized");
}

std::optional<AclResourceType> refused_resource(rd_kafka_resp_err_t err) {
  switch (err) {
    case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
      return AclResourceType::kTopic;
    case RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED:
      return AclResourceType::kGroup;
    case RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
      return AclResourceType::kTransactionalId;
    case RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED:
      return AclResourceType::kCluster;
    default:
      return std::nullopt;
  }
}

std::optional<Error> authorization_error(rd_kafka_resp_err_t err, const Access& access) {
  auto refused = refused_resource(err);
  if (!refused) return std::nullopt;
  return not_authorized(*refused, access);
}

std::optional<Error> authorization_error(rd_kafka_resp_err_t err,
                                         const rd_kafka_topic_partition_list_t* list,
                                         const std::string& topic,
                                         const std::function<Access(const std::string&)>& access) {
  for (int i = 0; i < list->cnt; ++i)
    if (auto refused = authorization_error(list->elems[i].err, access(list->elems[i].topic)))
      return refused;
  return authorization_error(err, access(topic));
}

}  // namespace kpipe
