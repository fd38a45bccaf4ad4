package engine

import (
	"slices"
	"sync"
	"time"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/checkpoint/savepoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/source"
)

// State is where a job is in its life, as the admin API reports it.
type State string

const (
	StateStarting   State = "starting"   // connecting, fencing, restoring
	StateRunning    State = "running"    // restored; the task graph runs
	StateRestarting State = "restarting" // an attempt failed; the next one is due
	StateFenced     State = "fenced"     // another instance took over: stopped
	StateFailed     State = "failed"     // stopped for good (see Error)
	StateStopped    State = "stopped"    // stopped on request
)

// Status is a snapshot of the job for GET /api/v1/job.
type Status struct {
	Job        string          `json:"job"`
	Guarantee  string          `json:"guarantee"`
	State      State           `json:"state"`
	Error      string          `json:"error,omitempty"`
	Restarts   int             `json:"restarts"`
	Topology   Topology        `json:"topology"`
	Partitions []PartitionInfo `json:"partitions"`
	Checkpoint CheckpointState `json:"checkpoint"`
	// RestoredFrom is the savepoint the job's state was last imported
	// from (its id), if any.
	RestoredFrom string `json:"restored_from_savepoint,omitempty"`
	// LastSavepoint is the newest savepoint this process wrote.
	LastSavepoint *SavepointInfo `json:"last_savepoint,omitempty"`
	// Group is this process's place in a group-mode job (scale.mode:
	// group); absent in single mode.
	Group *GroupInfo `json:"group,omitempty"`
}

// GroupInfo is a group-mode process: who it is in the job's consumer
// group, and what the group's current generation gave it.
type GroupInfo struct {
	Instance   string `json:"instance"`
	MemberID   string `json:"member_id"`
	Generation int32  `json:"generation"`
	// Assigned are the partitions it owns, "topic/partition".
	Assigned []string `json:"assigned"`
	// Members are the instance ids of the group's members, as last
	// seen.
	Members []string `json:"members"`
}

// SavepointInfo is a savepoint written, as POST /api/v1/savepoints
// returns it.
type SavepointInfo struct {
	Dir          string    `json:"dir"`
	ID           string    `json:"id"`
	CheckpointID uint64    `json:"checkpoint_id"`
	Created      time.Time `json:"created"`
	Keys         uint64    `json:"keys"`
	Bytes        uint64    `json:"bytes"`
}

// NewSavepointInfo summarises what a savepoint holds.
func NewSavepointInfo(s savepoint.Summary) SavepointInfo {
	info := SavepointInfo{Dir: s.Dir, ID: s.ID, CheckpointID: uint64(s.CheckpointID), Created: s.Created}
	for _, op := range s.Operators {
		info.Keys += op.Keys
		info.Bytes += op.Bytes
	}
	return info
}

// Topology is the task graph the configuration builds.
type Topology struct {
	Sources   []SourceInfo `json:"sources"`
	Steps     []StepInfo   `json:"steps"`
	Sinks     []SinkInfo   `json:"sinks"`
	Workers   int          `json:"workers"`
	KeyGroups int          `json:"key_groups"`
}

// SourceInfo, StepInfo and SinkInfo describe the configured operators.
type (
	SourceInfo struct {
		ID     string   `json:"id"`
		Topics []string `json:"topics"`
	}
	StepInfo struct {
		ID   string `json:"id"`
		Kind string `json:"kind"`
	}
	SinkInfo struct {
		Topic           string `json:"topic"`
		DeadLetterTopic string `json:"dead_letter_topic"`
	}
)

// PartitionInfo is one assigned source partition and the offset the
// current attempt started it from.
type PartitionInfo struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	StartOffset int64  `json:"start_offset"`
}

// CheckpointState is the job's checkpoint progress.
type CheckpointState struct {
	LastCompleted   uint64    `json:"last_completed"`
	LastCompletedAt time.Time `json:"last_completed_at,omitzero"`
	Interval        string    `json:"interval"`
}

// CheckpointInfo is one completed checkpoint, for GET /api/v1/checkpoints.
type CheckpointInfo struct {
	ID          uint64    `json:"id"`
	CompletedAt time.Time `json:"completed_at"`
	DurationMs  float64   `json:"duration_ms"`
	AlignmentMs float64   `json:"alignment_ms"`
	CommitMs    float64   `json:"commit_ms"`
	StateBytes  int64     `json:"state_bytes"`
	Outputs     int64     `json:"outputs"`
}

// historySize is how many completed checkpoints the API remembers.
const historySize = 100

// status is the job's shared, observable state: written by the run loop
// and the coordinator loop, read by the admin API.
type status struct {
	mu      sync.Mutex
	s       Status
	history []CheckpointInfo // oldest first, at most historySize
}

func newStatus(cfg *config.Config, workers int) *status {
	t := Topology{Workers: workers, KeyGroups: cfg.Checkpoint.KeyGroups}
	for _, s := range cfg.Sources {
		t.Sources = append(t.Sources, SourceInfo{ID: s.ID, Topics: s.Topics})
	}
	for _, s := range cfg.Steps {
		t.Steps = append(t.Steps, StepInfo{ID: s.ID, Kind: string(s.Kind())})
	}
	for _, s := range cfg.Sinks {
		t.Sinks = append(t.Sinks, SinkInfo{Topic: s.Topic, DeadLetterTopic: s.DeadLetterTopic})
	}
	return &status{s: Status{
		Job: cfg.Name, Guarantee: string(cfg.Guarantee), State: StateStarting, Topology: t,
		Checkpoint: CheckpointState{Interval: cfg.Checkpoint.Interval.String()},
	}}
}

func (st *status) set(s State, err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.s.State = s
	st.s.Error = ""
	if err != nil {
		st.s.Error = err.Error()
	}
	if s == StateRestarting {
		st.s.Restarts++
	}
}

func (st *status) restored(id checkpoint.ID, at time.Time, offsets map[source.TopicPartition]int64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.s.State, st.s.Error = StateRunning, ""
	st.s.Checkpoint.LastCompleted = uint64(id)
	if id != 0 {
		st.s.Checkpoint.LastCompletedAt = at
	}
	st.s.Partitions = st.s.Partitions[:0]
	for tp, off := range offsets {
		st.s.Partitions = append(st.s.Partitions, PartitionInfo{Topic: tp.Topic, Partition: tp.Partition, StartOffset: off})
	}
	slices.SortFunc(st.s.Partitions, func(a, b PartitionInfo) int {
		if a.Topic != b.Topic {
			if a.Topic < b.Topic {
				return -1
			}
			return 1
		}
		return int(a.Partition - b.Partition)
	})
}

// assigned records a group-mode process's new assignment.
func (st *status) assigned(a *assignment, members []string) {
	g := &GroupInfo{Instance: a.member.InstanceID, MemberID: a.member.MemberID, Generation: a.member.Generation, Members: slices.Clone(members)}
	for _, tp := range a.partitions() {
		g.Assigned = append(g.Assigned, tp.String())
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.s.Group = g
}

func (st *status) savepoint(s savepoint.Summary) {
	info := NewSavepointInfo(s)
	st.mu.Lock()
	defer st.mu.Unlock()
	st.s.LastSavepoint = &info
}

func (st *status) restoredFrom(savepointID string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.s.RestoredFrom = savepointID
}

func (st *status) completed(c CheckpointInfo) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.s.Checkpoint.LastCompleted = c.ID
	st.s.Checkpoint.LastCompletedAt = c.CompletedAt
	if len(st.history) == historySize {
		st.history = slices.Delete(st.history, 0, 1)
	}
	st.history = append(st.history, c)
}

func (st *status) snapshot() Status {
	st.mu.Lock()
	defer st.mu.Unlock()
	s := st.s
	s.Partitions = slices.Clone(st.s.Partitions)
	if g := st.s.Group; g != nil {
		c := *g
		s.Group = &c
	}
	return s
}

// Status reports the job's state for the admin API.
func (j *Job) Status() Status { return j.status.snapshot() }

// Ready reports whether the job has restored and runs its task graph.
func (j *Job) Ready() bool { return j.status.snapshot().State == StateRunning }

// Checkpoints returns the recently completed checkpoints, newest first.
func (j *Job) Checkpoints() []CheckpointInfo {
	j.status.mu.Lock()
	defer j.status.mu.Unlock()
	out := slices.Clone(j.status.history)
	slices.Reverse(out)
	return out
}
