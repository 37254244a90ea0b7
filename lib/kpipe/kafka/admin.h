// Consumer groups as the cluster's group coordinators see them (admin.cpp),
// beyond the committed offsets GroupReader fetches: the partitions a
// group's members were assigned, and the groups there are. klag needs them
// for a group that consumes partitions it has committed nothing on yet.
// Nothing here joins a group, so asking causes no rebalance.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kpipe/kafka/client.h"
#include "kpipe/partition.h"
#include "kpipe/status.h"

namespace kpipe {

// The partitions of a ConsumerProtocolAssignment (versions 0 to 3: the
// bytes a "consumer" group's leader gives each member), in their order;
// none when `bytes` is not one.
std::optional<std::vector<TopicPartition>> parse_consumer_assignment(std::string_view bytes);

// The groups and their members (log.h's GroupDirectory).
class GroupAdmin final : public KafkaClient, public GroupDirectory {
 public:
  static Expected<std::unique_ptr<GroupAdmin>> create(const KafkaConfig& config, Reporter& reporter,
                                                      Clock& clock);
  ~GroupAdmin() override;

  // The group's members and their assignments (one DescribeGroups to its
  // coordinator). A group that does not exist has no members.
  Expected<GroupMembers> members(const std::string& group) override;
  // Every group's id (ListGroups to every broker), sorted; none where the
  // broker cannot list groups (kbroker).
  Expected<std::optional<std::vector<std::string>>> group_ids() override;

 private:
  GroupAdmin(const KafkaConfig& config, Reporter& reporter, Clock& clock);
};

}  // namespace kpipe
