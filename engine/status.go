package engine

import (
	"cmp"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/checkpoint/savepoint"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/source"
	"github.com/eoflow/pipeline/state"
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
	Job       string `json:"job"`
	Guarantee string `json:"guarantee"`
	// Mode is scale.mode: single or group.
	Mode  string `json:"mode"`
	State State  `json:"state"`
	// StartedAt is when this process created the job: its uptime is
	// from then.
	StartedAt time.Time `json:"started_at"`
	Error     string    `json:"error,omitempty"`
	Restarts  int       `json:"restarts"`
	// RecentRestarts are this process's last restarts, oldest first (at
	// most restartHistory): when, the reason pipeline_restarts_total
	// counts it under, and the error.
	RecentRestarts []RestartInfo   `json:"recent_restarts"`
	Topology       Topology        `json:"topology"`
	Partitions     []PartitionInfo `json:"partitions"`
	Checkpoint     CheckpointState `json:"checkpoint"`
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
	// Admins are the admin API addresses (host:port) the members
	// advertised, by instance id, as last seen; a member that advertised
	// none is missing (admin.advertise, WithAdminAddress).
	Admins map[string]string `json:"admins"`
	// KeyGroups are the key groups this process owns: those of the
	// repartition partitions assigned to it.
	KeyGroups []KeyGroupRange `json:"key_groups"`
	// Rebalances are the last assignments this process was given, oldest
	// first (at most assignmentHistory).
	Rebalances []AssignmentInfo `json:"rebalances"`
}

// KeyGroupRange is the key groups [Start, End) of one repartition (and
// group state) partition.
type KeyGroupRange struct {
	Partition int32 `json:"partition"`
	Start     int   `json:"start"`
	End       int   `json:"end"`
}

// AssignmentInfo is one assignment a group-mode process was given.
type AssignmentInfo struct {
	At         time.Time `json:"at"`
	Generation int32     `json:"generation"`
	Members    []string  `json:"members"`
	// Partitions is how many partitions it was assigned.
	Partitions int `json:"partitions"`
}

// RestartInfo is one restart of the job in this process.
type RestartInfo struct {
	At time.Time `json:"at"`
	// Reason is the label pipeline_restarts_total counts it under
	// ("planned" for a planned restart that has none, e.g. after a
	// savepoint import).
	Reason string `json:"reason"`
	Error  string `json:"error"`
}

// CheckpointFailure is one aborted checkpoint, for GET /api/v1/checkpoints.
type CheckpointFailure struct {
	ID uint64    `json:"id"`
	At time.Time `json:"at"`
	// Reason is pipeline_checkpoints_failed_total's: timeout, declined,
	// commit_failed or job_failed.
	Reason string `json:"reason"`
	Error  string `json:"error,omitempty"`
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
	// HeldRecords are the records joins as of event time held at its
	// checkpoint (omitted: none).
	HeldRecords uint64 `json:"held_records,omitempty"`
}

// NewSavepointInfo summarises what a savepoint holds.
func NewSavepointInfo(s savepoint.Summary) SavepointInfo {
	info := SavepointInfo{Dir: s.Dir, ID: s.ID, CheckpointID: uint64(s.CheckpointID), Created: s.Created}
	for _, op := range s.Operators {
		info.Keys += op.Keys
		info.Bytes += op.Bytes
	}
	if s.Held != nil {
		info.HeldRecords = s.Held.Records
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

// historySize is how many completed and how many failed checkpoints the
// API remembers; restartHistory and assignmentHistory how many restarts
// and group assignments.
const (
	historySize       = 100
	restartHistory    = 20
	assignmentHistory = 20
)

// status is the job's shared, observable state: written by the run loop
// and the coordinator loop, read by the admin API.
type status struct {
	mu       sync.Mutex
	s        Status
	history  []CheckpointInfo    // oldest first, at most historySize
	failures []CheckpointFailure // oldest first, at most historySize
	// now is the clock of the events' times.
	now func() time.Time
	// shuffle is the keyed layout of group mode (nil in single mode).
	shuffle *shuffle
}

// appendBounded appends v to s, dropping the oldest beyond n.
func appendBounded[T any](s []T, v T, n int) []T {
	if len(s) >= n {
		s = slices.Delete(s, 0, len(s)-n+1)
	}
	return append(s, v)
}

func newStatus(cfg *config.Config, workers int) *status {
	t := Topology{Workers: workers, KeyGroups: cfg.Checkpoint.KeyGroups, Sources: []SourceInfo{}, Steps: []StepInfo{}, Sinks: []SinkInfo{}}
	for _, s := range cfg.Sources {
		t.Sources = append(t.Sources, SourceInfo{ID: s.ID, Topics: s.Topics})
	}
	for _, s := range cfg.Steps {
		t.Steps = append(t.Steps, StepInfo{ID: s.ID, Kind: string(s.Kind())})
	}
	for _, s := range cfg.Sinks {
		t.Sinks = append(t.Sinks, SinkInfo{Topic: s.Topic, DeadLetterTopic: s.DeadLetterTopic})
	}
	now := time.Now
	return &status{now: now, shuffle: newShuffle(cfg), s: Status{
		Job: cfg.Name, Guarantee: string(cfg.Guarantee), Mode: string(cfg.Scale.Mode), State: StateStarting,
		StartedAt: now(), Topology: t, Checkpoint: CheckpointState{Interval: cfg.Checkpoint.Interval.String()},
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
		r := RestartInfo{At: st.now(), Reason: restartReason(err), Error: st.s.Error}
		if plan, ok := plannedRestart(err); ok {
			r.Reason = cmp.Or(plan.reason, "planned")
		}
		st.s.RecentRestarts = appendBounded(st.s.RecentRestarts, r, restartHistory)
	}
}

// checkpointFailed records an aborted checkpoint.
func (st *status) checkpointFailed(id checkpoint.ID, reason string, err error) {
	f := CheckpointFailure{ID: uint64(id), Reason: reason}
	if err != nil {
		f.Error = err.Error()
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	f.At = st.now()
	st.failures = appendBounded(st.failures, f, historySize)
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
	g := &GroupInfo{
		Instance: a.member.InstanceID, MemberID: a.member.MemberID, Generation: a.member.Generation,
		Members: append([]string{}, members...), Assigned: []string{}, KeyGroups: []KeyGroupRange{},
		Admins: map[string]string{},
	}
	maps.Copy(g.Admins, a.admins)
	for _, tp := range a.partitions() {
		g.Assigned = append(g.Assigned, tp.String())
		if sh := st.shuffle; sh != nil && tp.Topic == sh.repartition {
			r := state.RangeFor(int(tp.Partition), sh.partitions, sh.groups)
			g.KeyGroups = append(g.KeyGroups, KeyGroupRange{Partition: tp.Partition, Start: int(r.Start), End: int(r.End)})
		}
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if old := st.s.Group; old != nil {
		g.Rebalances = old.Rebalances
	}
	g.Rebalances = appendBounded(g.Rebalances, AssignmentInfo{
		At: st.now(), Generation: g.Generation, Members: g.Members, Partitions: len(g.Assigned),
	}, assignmentHistory)
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
	s.Partitions = append([]PartitionInfo{}, st.s.Partitions...)
	s.RecentRestarts = append([]RestartInfo{}, st.s.RecentRestarts...)
	if g := st.s.Group; g != nil {
		c := *g
		c.Rebalances = slices.Clone(g.Rebalances)
		c.Admins = maps.Clone(g.Admins)
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

// CheckpointFailures returns the recently aborted checkpoints, newest
// first.
func (j *Job) CheckpointFailures() []CheckpointFailure {
	j.status.mu.Lock()
	defer j.status.mu.Unlock()
	out := slices.Clone(j.status.failures)
	slices.Reverse(out)
	return out
}
