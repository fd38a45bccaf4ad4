package metrics

import "github.com/prometheus/client_golang/prometheus"

// group is a group-mode process's place in the job's consumer group
// (scale.mode: group). In single mode the series stay absent.
type group struct {
	member     *prometheus.GaugeVec
	generation *prometheus.GaugeVec
	assigned   *prometheus.GaugeVec
	members    *prometheus.GaugeVec
	local      *prometheus.GaugeVec
	instance   string
}

func newGroup(f factory) group {
	return group{
		member:     f.gaugeVec("group_member_info", "1 for a group-mode process, labelled with its instance id (scale.mode: group).", "instance_id"),
		generation: f.gaugeVec("group_generation", "The consumer group generation this process's current assignment belongs to (group mode).", "instance_id"),
		assigned:   f.gaugeVec("group_assigned_partitions", "Partitions the consumer group assigned to this process, per topic (group mode): source topics and the repartition topic.", "instance_id", "topic"),
		members:    f.gaugeVec("group_members", "Members of the job's consumer group, as this process last saw them (group mode).", "instance_id"),
		local:      f.gaugeVec("group_local_shuffle_partitions", "Repartition partitions of this process's current attempt whose records from its own source partitions skip the repartition topic (group mode, the local shuffle).", "instance_id"),
	}
}

// SetGroupMember says that this process is group member instance (call
// it first: the other group series carry the instance id).
func (m *Metrics) SetGroupMember(instance string) {
	m.grp.instance = instance
	m.grp.member.WithLabelValues(instance).Set(1)
}

// SetAssignment records a new generation's assignment: the partitions per
// topic, and how many members the group has.
func (m *Metrics) SetAssignment(generation int32, perTopic map[string]int, members int) {
	id := m.grp.instance
	m.grp.generation.WithLabelValues(id).Set(float64(generation))
	m.grp.assigned.Reset()
	for topic, n := range perTopic {
		m.grp.assigned.WithLabelValues(id, topic).Set(float64(n))
	}
	m.grp.members.WithLabelValues(id).Set(float64(members))
}

// SetLocalShuffle records how many repartition partitions the attempt
// shuffles locally (their records from the process's own source
// partitions skip the topic).
func (m *Metrics) SetLocalShuffle(partitions int) {
	m.grp.local.WithLabelValues(m.grp.instance).Set(float64(partitions))
}
