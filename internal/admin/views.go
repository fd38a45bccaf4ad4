package admin

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/engine"
)

// The JSON views of the job's numbers: the job graph, the flow of
// records, event time. They are read from the job's metrics registry at
// each request (what /metrics serves, so the two always agree) and laid
// over the configuration's job graph. Every number is a total since the
// process started (or a gauge): a client computes rates from two answers
// and their "at".

// views builds the views of one job.
type views struct {
	cfg      *config.Config
	g        prometheus.Gatherer
	jobGraph *config.Graph
	now      func() time.Time
	// late are the late topics, deadLetter the dead-letter topics,
	// internal the job's own (group mode's repartition topic).
	late, deadLetter, internal map[string]bool
}

func newViews(cfg *config.Config, g prometheus.Gatherer) *views {
	v := &views{cfg: cfg, g: g, jobGraph: cfg.Graph(), now: time.Now, late: map[string]bool{}, deadLetter: map[string]bool{}, internal: map[string]bool{}}
	if cfg.Scale.Mode == config.ScaleGroup {
		v.internal[engine.RepartitionTopic(cfg.Name)] = true
	}
	for _, s := range cfg.Steps {
		if w := s.Window; w != nil && w.LateTopic != "" {
			v.late[w.LateTopic] = true
		}
	}
	for _, s := range cfg.Sinks {
		v.deadLetter[s.DeadLetterTopic] = true
	}
	return v
}

// sample is one series' labels and value.
type sample struct {
	labels map[string]string
	value  float64
}

// samples are the pipeline_ series by family name.
type samples map[string][]sample

func (v *views) gather() samples {
	out := samples{}
	if v.g == nil {
		return out
	}
	// A collector that fails is left out, as /metrics leaves it out.
	families, _ := v.g.Gather()
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "pipeline_") {
			continue
		}
		for _, m := range f.GetMetric() {
			s := sample{labels: map[string]string{}}
			for _, l := range m.GetLabel() {
				s.labels[l.GetName()] = l.GetValue()
			}
			switch {
			case m.GetCounter() != nil:
				s.value = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				s.value = m.GetGauge().GetValue()
			default:
				continue
			}
			out[f.GetName()] = append(out[f.GetName()], s)
		}
	}
	return out
}

// sum is the sum of family's series whose label matches value (any series
// with label ""), and whether there was one.
func (s samples) sum(family, label, value string) (float64, bool) {
	total, found := 0.0, false
	for _, x := range s[family] {
		if label == "" || x.labels[label] == value {
			total += x.value
			found = true
		}
	}
	return total, found
}

func (s samples) value(family, label, value string) float64 {
	v, _ := s.sum(family, label, value)
	return v
}

// value2 is the value of a stateless step's series of family with the
// given result.
func (s samples) value2(family, operator, result string) float64 {
	total := 0.0
	for _, x := range s[family] {
		if x.labels["operator"] == operator && x.labels["result"] == result {
			total += x.value
		}
	}
	return total
}

// byLabel is family's values by label's value.
func (s samples) byLabel(family, label string) map[string]float64 {
	out := map[string]float64{}
	for _, x := range s[family] {
		out[x.labels[label]] += x.value
	}
	return out
}

func ptr(f float64) *float64 { return &f }

// GraphResponse is the answer to GET /api/v1/graph: the job graph of the
// configuration, with each node's numbers.
type GraphResponse struct {
	At    time.Time   `json:"at"`
	Nodes []GraphNode `json:"nodes"`
	// Tasks are the source tasks and workers of this process, with the
	// time each waited for room downstream.
	Tasks []TaskInfo `json:"tasks"`
}

// GraphNode is one source, step or sink. Counts are totals since the
// process started; null where the node's kind has none.
type GraphNode struct {
	// Index is the node's place in Nodes; Inputs and Outputs are indexes.
	Index int `json:"index"`
	// ID is the operator id (a sink's is "sink-<index>:<topic>").
	ID string `json:"id"`
	// Kind is source, step or sink; StepKind a step's filter, map,
	// key_by, aggregate or window.
	Kind     string `json:"kind"`
	StepKind string `json:"step_kind,omitempty"`
	// Path is where it is in the file: sources[0], steps[2], sinks[1].
	Path    string `json:"path"`
	Inputs  []int  `json:"inputs"`
	Outputs []int  `json:"outputs"`
	// Topics are a source's topics, or a sink's topic.
	Topics []string `json:"topics"`
	// Detail says what it does: an expression, values, a window's shape.
	Detail string `json:"detail"`
	// RunsIn is where it runs: "sources" (the source tasks: reading,
	// decoding, the stateless steps), "workers" (keyed operators), or
	// "sink" (the producers and the transaction).
	RunsIn string `json:"runs_in"`
	// Records: a source's records read, a stateless step's records
	// passed on (pipeline_step_records_total{result="passed"}), a keyed
	// operator's records handed to it (pipeline_operator_records_total),
	// a sink's records written (visible).
	Records *float64 `json:"records"`
	// RecordsIn and Dropped are a stateless step's records that reached
	// it, and that it dropped (a filter's false, an inner join without a
	// value); null for other nodes. RecordsIn = Records + Dropped + the
	// step's failures (dead letters).
	RecordsIn *float64 `json:"records_in"`
	Dropped   *float64 `json:"dropped"`
	// DeadLetters are the records that failed at this node.
	DeadLetters float64 `json:"dead_letters"`
	// Late (windows), Keys and StateBytes (aggregates and windows),
	// WindowsOpen (windows).
	Late        *float64 `json:"late"`
	Keys        *float64 `json:"keys"`
	StateBytes  *float64 `json:"state_bytes"`
	WindowsOpen *float64 `json:"windows_open"`
	// BlockedSeconds is the time the tasks it runs in waited for room
	// downstream, summed over Tasks of them (backpressure; the sink's is
	// not measured: 0).
	BlockedSeconds float64 `json:"blocked_seconds"`
	Tasks          int     `json:"tasks"`
}

// TaskInfo is one task's backpressure.
type TaskInfo struct {
	Task           string  `json:"task"`
	BlockedSeconds float64 `json:"blocked_seconds"`
}

func (v *views) graph() GraphResponse {
	s := v.gather()
	resp := GraphResponse{At: v.now(), Nodes: []GraphNode{}, Tasks: []TaskInfo{}}
	blocked := map[string]float64{}
	tasks := map[string]int{}
	for task, secs := range s.byLabel("pipeline_task_blocked_seconds_total", "task") {
		resp.Tasks = append(resp.Tasks, TaskInfo{Task: task, BlockedSeconds: secs})
		kind, _, _ := strings.Cut(task, "-")
		blocked[kind] += secs
		tasks[kind]++
	}
	slices.SortFunc(resp.Tasks, func(a, b TaskInfo) int { return cmp.Compare(a.Task, b.Task) })
	for i, n := range v.jobGraph.Nodes {
		node := GraphNode{Index: i, ID: n.ID, Path: n.Path, Inputs: append([]int{}, n.Inputs...), Outputs: append([]int{}, n.Outputs...), Topics: []string{}}
		node.DeadLetters = s.value("pipeline_operator_dead_letters_total", "operator", n.ID)
		switch n.Kind {
		case config.NodeSource:
			src := v.cfg.Sources[n.Index]
			node.Kind, node.RunsIn, node.Topics = "source", "sources", append(node.Topics, src.Topics...)
			node.Detail = "format " + string(src.Format)
			if src.EventTime != nil {
				node.Detail += ", event time"
			}
			total := 0.0
			for _, t := range src.Topics {
				total += s.value("pipeline_records_in_total", "topic", t)
			}
			node.Records = ptr(total)
		case config.NodeStep:
			step := v.cfg.Steps[n.Index]
			node.Kind, node.StepKind, node.RunsIn = "step", string(step.Kind()), "sources"
			node.Detail = stepDetail(step)
			if step.Aggregate == nil && step.Window == nil {
				passed := s.value2("pipeline_step_records_total", n.ID, "passed")
				dropped := s.value2("pipeline_step_records_total", n.ID, "dropped")
				failed := s.value2("pipeline_step_records_total", n.ID, "failed")
				node.Records, node.Dropped, node.RecordsIn = ptr(passed), ptr(dropped), ptr(passed+dropped+failed)
			}
			if step.Aggregate != nil || step.Window != nil {
				node.Records = ptr(s.value("pipeline_operator_records_total", "operator", n.ID))
				node.RunsIn = "workers"
				node.Keys = ptr(s.value("pipeline_state_keys", "operator", n.ID))
				node.StateBytes = ptr(s.value("pipeline_state_bytes", "operator", n.ID))
			}
			if step.Window != nil {
				node.Late = ptr(s.value("pipeline_operator_late_records_total", "operator", n.ID))
				node.WindowsOpen = ptr(s.value("pipeline_windows_open", "operator", n.ID))
			}
		case config.NodeSink:
			sk := v.cfg.Sinks[n.Index]
			node.Kind, node.RunsIn, node.Topics = "sink", "sink", append(node.Topics, sk.Topic)
			node.Detail = fmt.Sprintf("format %s, dead letters to %s", sk.Format, sk.DeadLetterTopic)
			node.Records = ptr(s.value("pipeline_records_out_total", "topic", sk.Topic))
		}
		switch node.RunsIn {
		case "sources":
			node.BlockedSeconds, node.Tasks = blocked["source"], tasks["source"]
		case "workers":
			node.BlockedSeconds, node.Tasks = blocked["worker"], tasks["worker"]
		}
		resp.Nodes = append(resp.Nodes, node)
	}
	return resp
}

// stepDetail is what a step does, in a line.
func stepDetail(s config.Step) string {
	values := func(vs []config.AggregateValue) string {
		var parts []string
		for _, v := range vs {
			parts = append(parts, fmt.Sprintf("%s: %s(%s)", v.Name, v.Func, v.Arg))
		}
		return strings.Join(parts, ", ")
	}
	switch s.Kind() {
	case config.StepFilter:
		return s.Filter
	case config.StepKeyBy:
		return s.KeyBy
	case config.StepMap:
		var names []string
		for _, f := range s.Map {
			names = append(names, f.Name)
		}
		return "{" + strings.Join(names, ", ") + "}"
	case config.StepAggregate:
		return values(s.Aggregate.Values)
	case config.StepWindow:
		w := s.Window
		shape := w.Kind()
		switch shape {
		case "tumbling":
			shape += " " + w.Tumbling.String()
		case "hopping":
			shape += fmt.Sprintf(" %s every %s", w.Hopping.Size, w.Hopping.Advance)
		case "session":
			shape += " gap " + w.Session.Gap.String()
		}
		return shape + ": " + values(w.Values)
	}
	return ""
}

// FlowResponse is the answer to GET /api/v1/flow: the records in and out,
// the lag, dead letters, restarts and failed checkpoints. Totals since the
// process started.
type FlowResponse struct {
	At time.Time `json:"at"`
	// RecordsIn were read from the sources' topics; RecordsOut written
	// to the sinks' topics (visible); DeadLetters sent to the dead-letter
	// topics; Late written to the late topics or dropped. The job's own
	// topic (group mode's repartition topic) is in Inputs and Outputs as
	// kind internal, and in neither total.
	RecordsIn   float64 `json:"records_in"`
	BytesIn     float64 `json:"bytes_in"`
	RecordsOut  float64 `json:"records_out"`
	BytesOut    float64 `json:"bytes_out"`
	DeadLetters float64 `json:"dead_letters"`
	Late        float64 `json:"late"`
	// Lag is the records of the input partitions not yet processed: null
	// until a source task has reported it.
	Lag                       *float64           `json:"lag"`
	Inputs                    []TopicFlow        `json:"inputs"`
	Outputs                   []TopicFlow        `json:"outputs"`
	LagPartitions             []PartitionLag     `json:"lag_partitions"`
	DeadLettersByCode         map[string]float64 `json:"dead_letters_by_code"`
	RestartsByReason          map[string]float64 `json:"restarts_by_reason"`
	CheckpointsFailedByReason map[string]float64 `json:"checkpoints_failed_by_reason"`
}

// TopicFlow is what went through one topic. Kind is input, output,
// dead_letter, late or internal.
type TopicFlow struct {
	Topic   string  `json:"topic"`
	Kind    string  `json:"kind"`
	Records float64 `json:"records"`
	Bytes   float64 `json:"bytes"`
}

// PartitionLag is one input partition's lag.
type PartitionLag struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Records   float64 `json:"records"`
}

func (v *views) flow() FlowResponse {
	s := v.gather()
	resp := FlowResponse{
		At: v.now(), Inputs: []TopicFlow{}, Outputs: []TopicFlow{}, LagPartitions: []PartitionLag{},
		DeadLettersByCode:         s.byLabel("pipeline_dead_letter_records_total", "code"),
		RestartsByReason:          s.byLabel("pipeline_restarts_total", "reason"),
		CheckpointsFailedByReason: s.byLabel("pipeline_checkpoints_failed_total", "reason"),
	}
	for topic, n := range s.byLabel("pipeline_records_in_total", "topic") {
		b := s.value("pipeline_bytes_in_total", "topic", topic)
		if v.internal[topic] {
			resp.Inputs = append(resp.Inputs, TopicFlow{Topic: topic, Kind: "internal", Records: n, Bytes: b})
			continue
		}
		resp.Inputs = append(resp.Inputs, TopicFlow{Topic: topic, Kind: "input", Records: n, Bytes: b})
		resp.RecordsIn += n
		resp.BytesIn += b
	}
	for topic, n := range s.byLabel("pipeline_records_out_total", "topic") {
		f := TopicFlow{Topic: topic, Kind: "output", Records: n, Bytes: s.value("pipeline_bytes_out_total", "topic", topic)}
		switch {
		case v.internal[topic]:
			f.Kind = "internal"
		case v.deadLetter[topic]:
			f.Kind = "dead_letter"
		case v.late[topic]:
			f.Kind = "late"
			resp.Late += n
		default:
			resp.RecordsOut += n
			resp.BytesOut += f.Bytes
		}
		resp.Outputs = append(resp.Outputs, f)
	}
	resp.Late += s.value("pipeline_late_records_total", "result", "drop")
	for _, n := range resp.DeadLettersByCode {
		resp.DeadLetters += n
	}
	for _, x := range s["pipeline_consumer_lag_records"] {
		p, err := strconv.ParseInt(x.labels["partition"], 10, 32)
		if err != nil || p < 0 {
			continue // the client's pseudo-partition of a failed fetch
		}
		resp.LagPartitions = append(resp.LagPartitions, PartitionLag{Topic: x.labels["topic"], Partition: int32(p), Records: x.value})
		if resp.Lag == nil {
			resp.Lag = ptr(0)
		}
		*resp.Lag += x.value
	}
	byTopic := func(a, b TopicFlow) int { return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Topic, b.Topic)) }
	slices.SortFunc(resp.Inputs, byTopic)
	slices.SortFunc(resp.Outputs, byTopic)
	slices.SortFunc(resp.LagPartitions, func(a, b PartitionLag) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return resp
}

// EventTimeResponse is the answer to GET /api/v1/eventtime.
type EventTimeResponse struct {
	At time.Time `json:"at"`
	// Enabled: the job's sources have event_time.
	Enabled bool `json:"enabled"`
	// Watermark is the job's watermark as of the last checkpoint barrier
	// (null: none yet), LagSeconds the wall clock minus it.
	Watermark  *time.Time `json:"watermark"`
	LagSeconds *float64   `json:"lag_seconds"`
	// Partitions are the input partitions with event time this process
	// reads, Windows the window operators.
	Partitions []PartitionTime `json:"partitions"`
	Windows    []WindowInfo    `json:"windows"`
	// LateSideOutput and LateDropped are late records by what happened
	// to them.
	LateSideOutput float64 `json:"late_side_output"`
	LateDropped    float64 `json:"late_dropped"`
}

// PartitionTime is one input partition's watermark (null before its first
// record) and whether it counts as idle.
type PartitionTime struct {
	Topic     string     `json:"topic"`
	Partition int32      `json:"partition"`
	Watermark *time.Time `json:"watermark"`
	Idle      bool       `json:"idle"`
}

// WindowInfo is one window operator's windows.
type WindowInfo struct {
	Operator string  `json:"operator"`
	Shape    string  `json:"shape"`
	Open     float64 `json:"open"`
	Fired    float64 `json:"fired"`
	Late     float64 `json:"late"`
}

func (v *views) eventTime() EventTimeResponse {
	s := v.gather()
	resp := EventTimeResponse{At: v.now(), Partitions: []PartitionTime{}, Windows: []WindowInfo{},
		LateSideOutput: s.value("pipeline_late_records_total", "result", "side_output"),
		LateDropped:    s.value("pipeline_late_records_total", "result", "drop"),
	}
	for _, src := range v.cfg.Sources {
		resp.Enabled = resp.Enabled || src.EventTime != nil
	}
	if wm := s.value("pipeline_watermark_timestamp_seconds", "", ""); wm > 0 {
		t := unixTime(wm)
		resp.Watermark = &t
		resp.LagSeconds = ptr(s.value("pipeline_watermark_lag_seconds", "", ""))
	}
	type tp struct {
		topic string
		p     int32
	}
	parts := map[tp]*PartitionTime{}
	at := func(x sample) *PartitionTime {
		p, err := strconv.ParseInt(x.labels["partition"], 10, 32)
		if err != nil {
			return nil
		}
		k := tp{x.labels["topic"], int32(p)}
		if parts[k] == nil {
			parts[k] = &PartitionTime{Topic: k.topic, Partition: k.p}
		}
		return parts[k]
	}
	for _, x := range s["pipeline_watermark_partition_timestamp_seconds"] {
		if pt := at(x); pt != nil {
			t := unixTime(x.value)
			pt.Watermark = &t
		}
	}
	for _, x := range s["pipeline_watermark_partition_idle"] {
		if pt := at(x); pt != nil {
			pt.Idle = x.value == 1
		}
	}
	for _, pt := range parts {
		resp.Partitions = append(resp.Partitions, *pt)
	}
	slices.SortFunc(resp.Partitions, func(a, b PartitionTime) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	for _, step := range v.cfg.Steps {
		if step.Window == nil {
			continue
		}
		resp.Windows = append(resp.Windows, WindowInfo{
			Operator: step.ID, Shape: stepDetail(step),
			Open:  s.value("pipeline_windows_open", "operator", step.ID),
			Fired: s.value("pipeline_windows_fired_total", "operator", step.ID),
			Late:  s.value("pipeline_operator_late_records_total", "operator", step.ID),
		})
	}
	return resp
}

// unixTime is Unix seconds as a time, to the millisecond.
func unixTime(secs float64) time.Time {
	return time.UnixMilli(int64(math.Round(secs * 1000))).UTC()
}
