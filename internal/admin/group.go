package admin

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/eoflow/pipeline/engine"
)

// The whole job, from any process: GET /api/v1/group gathers every
// process's status and numbers. In group mode a process asks each other
// member, at the admin address it advertised through the consumer group
// (engine/adminpeers.go), for its /api/v1/job, /api/v1/flow and
// /api/v1/graph, all at once, each within peerTimeout, and adds them up.
// A member that does not answer in time, or advertised no address, is
// listed as unreachable with the reason, and the totals say they lack it
// (complete false): never a silent gap, and a dead member costs the page
// one timeout, not a hang. The requests carry no token (the endpoints
// read are open) and follow no redirect. In single mode the answer is
// this process alone.

// peerTimeout bounds each request to another process.
const peerTimeout = 1500 * time.Millisecond

// maxPeerAnswer bounds what one answer of another process may hold.
const maxPeerAnswer = 8 << 20

// GroupResponse is the answer to GET /api/v1/group.
type GroupResponse struct {
	At time.Time `json:"at"`
	// Mode is scale.mode; Generation the consumer group's generation as
	// this process last saw it (0 in single mode).
	Mode       string `json:"mode"`
	Generation int32  `json:"generation"`
	// Processes are the job's processes by instance id (this one alone in
	// single mode).
	Processes []ProcessView `json:"processes"`
	// Complete: every process answered, so Flow and Graph are the whole
	// job's; else they add up those that did.
	Complete bool `json:"complete"`
	// Flow and Graph are the sums of the processes' answers: the job's
	// records in and out, lag and dead letters, and each node's numbers.
	Flow  FlowResponse  `json:"flow"`
	Graph GraphResponse `json:"graph"`
}

// ProcessView is one process of the job.
type ProcessView struct {
	Instance string `json:"instance"`
	// Admin is the admin address it advertised ("" for none).
	Admin string `json:"admin"`
	// Self: the process that answers this request.
	Self bool `json:"self"`
	// Reachable: it answered; else Error says why not, and Job, Flow and
	// Graph are null.
	Reachable bool           `json:"reachable"`
	Error     string         `json:"error,omitempty"`
	Job       *engine.Status `json:"job"`
	Flow      *FlowResponse  `json:"flow"`
	Graph     *GraphResponse `json:"graph"`
}

// peerClient fetches other processes' answers.
type peerClient struct {
	http    *http.Client
	timeout time.Duration
}

func newPeerClient(timeout time.Duration) *peerClient {
	return &peerClient{timeout: cmp.Or(timeout, peerTimeout), http: &http.Client{
		// Never follow a redirect: an answer comes from the address the
		// member advertised, or not at all.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// get decodes the JSON answer of GET http://addr+path into v. The request
// carries no credentials.
func (c *peerClient) get(ctx context.Context, addr, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s answered %s", path, resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxPeerAnswer)).Decode(v); err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	return nil
}

// fetch asks the process at addr for its status and numbers, within the
// client's timeout.
func (c *peerClient) fetch(ctx context.Context, p *ProcessView) {
	if p.Admin == "" {
		p.Error = "it advertised no admin address (its admin API is off, or it runs a build that does not advertise one)"
		return
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var (
		job   engine.Status
		flow  FlowResponse
		graph GraphResponse
		wg    sync.WaitGroup
		errs  [3]error
	)
	for i, x := range []struct {
		path string
		v    any
	}{{"/api/v1/job", &job}, {"/api/v1/flow", &flow}, {"/api/v1/graph", &graph}} {
		wg.Go(func() { errs[i] = c.get(ctx, p.Admin, x.path, x.v) })
	}
	wg.Wait()
	// The three usually fail alike (refused, timed out): the first says
	// why.
	for _, err := range errs {
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			err = fmt.Errorf("no answer from %s within %v: %w", p.Admin, c.timeout, err)
		}
		p.Error = err.Error()
		return
	}
	p.Reachable, p.Job, p.Flow, p.Graph = true, &job, &flow, &graph
}

func (s *server) group(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, s.gatherGroup(r.Context()))
}

// gatherGroup is the job's processes and their sums.
func (s *server) gatherGroup(ctx context.Context) GroupResponse {
	st := s.job.Status()
	flow, graph := s.views.flow(), s.views.graph()
	self := ProcessView{Self: true, Reachable: true, Job: &st, Flow: &flow, Graph: &graph}
	resp := GroupResponse{At: s.views.now(), Mode: st.Mode, Complete: true}
	g := st.Group
	if g == nil {
		resp.Processes = []ProcessView{self}
		resp.Flow, resp.Graph = flow, graph
		return resp
	}
	resp.Generation = g.Generation
	self.Instance, self.Admin = g.Instance, g.Admins[g.Instance]
	procs := []ProcessView{self}
	for _, m := range g.Members {
		if m != g.Instance {
			procs = append(procs, ProcessView{Instance: m, Admin: g.Admins[m]})
		}
	}
	var wg sync.WaitGroup
	for i := range procs[1:] {
		p := &procs[1+i]
		wg.Go(func() { s.peers.fetch(ctx, p) })
	}
	wg.Wait()
	slices.SortFunc(procs, func(a, b ProcessView) int { return cmp.Compare(a.Instance, b.Instance) })
	resp.Processes = procs
	var flows []FlowResponse
	for _, p := range procs {
		if !p.Reachable {
			resp.Complete = false
			continue
		}
		flows = append(flows, *p.Flow)
	}
	resp.Flow, resp.Graph = sumFlows(resp.At, flows), sumGraphs(resp.At, graph, procs)
	return resp
}

// sumFlows adds up the processes' flows.
func sumFlows(at time.Time, flows []FlowResponse) FlowResponse {
	out := FlowResponse{
		At: at, Inputs: []TopicFlow{}, Outputs: []TopicFlow{}, LagPartitions: []PartitionLag{},
		DeadLettersByCode: map[string]float64{}, RestartsByReason: map[string]float64{}, CheckpointsFailedByReason: map[string]float64{},
	}
	type topicKey struct {
		in          bool
		kind, topic string
	}
	topics := map[topicKey]TopicFlow{}
	// A partition is one process's, but one that lost it may still
	// report its last lag until it forgets it: the larger counts.
	type tp struct {
		topic string
		p     int32
	}
	lags := map[tp]float64{}
	for _, f := range flows {
		out.RecordsIn += f.RecordsIn
		out.BytesIn += f.BytesIn
		out.RecordsOut += f.RecordsOut
		out.BytesOut += f.BytesOut
		out.DeadLetters += f.DeadLetters
		out.Late += f.Late
		for in, fs := range map[bool][]TopicFlow{true: f.Inputs, false: f.Outputs} {
			for _, t := range fs {
				k := topicKey{in, t.Kind, t.Topic}
				sum := topics[k]
				sum.Topic, sum.Kind = t.Topic, t.Kind
				sum.Records += t.Records
				sum.Bytes += t.Bytes
				topics[k] = sum
			}
		}
		for _, l := range f.LagPartitions {
			k := tp{l.Topic, l.Partition}
			lags[k] = max(lags[k], l.Records)
		}
		for _, m := range []struct{ dst, src map[string]float64 }{
			{out.DeadLettersByCode, f.DeadLettersByCode}, {out.RestartsByReason, f.RestartsByReason}, {out.CheckpointsFailedByReason, f.CheckpointsFailedByReason},
		} {
			for k, v := range m.src {
				m.dst[k] += v
			}
		}
	}
	for k, t := range topics {
		if k.in {
			out.Inputs = append(out.Inputs, t)
		} else {
			out.Outputs = append(out.Outputs, t)
		}
	}
	for k, n := range lags {
		out.LagPartitions = append(out.LagPartitions, PartitionLag{Topic: k.topic, Partition: k.p, Records: n})
		if out.Lag == nil {
			out.Lag = ptr(0)
		}
		*out.Lag += n
	}
	byTopic := func(a, b TopicFlow) int { return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Topic, b.Topic)) }
	slices.SortFunc(out.Inputs, byTopic)
	slices.SortFunc(out.Outputs, byTopic)
	slices.SortFunc(out.LagPartitions, func(a, b PartitionLag) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}

// sumGraphs adds up the processes' graphs over shape, this process's
// graph: a node's numbers are the sums of the nodes of the same index and
// id (every process runs the same file), its tasks named
// "<instance>/<task>".
func sumGraphs(at time.Time, shape GraphResponse, procs []ProcessView) GraphResponse {
	out := GraphResponse{At: at, Nodes: make([]GraphNode, len(shape.Nodes)), Tasks: []TaskInfo{}}
	for i, n := range shape.Nodes {
		n.Records, n.RecordsIn, n.Dropped, n.Late, n.Keys, n.StateBytes, n.WindowsOpen = nil, nil, nil, nil, nil, nil, nil
		n.DeadLetters, n.BlockedSeconds, n.Tasks = 0, 0, 0
		out.Nodes[i] = n
	}
	add := func(dst **float64, v *float64) {
		if v == nil {
			return
		}
		if *dst == nil {
			*dst = ptr(0)
		}
		**dst += *v
	}
	for _, p := range procs {
		if !p.Reachable {
			continue
		}
		for _, n := range p.Graph.Nodes {
			if n.Index < 0 || n.Index >= len(out.Nodes) || out.Nodes[n.Index].ID != n.ID {
				continue // not this file's node
			}
			o := &out.Nodes[n.Index]
			add(&o.Records, n.Records)
			add(&o.RecordsIn, n.RecordsIn)
			add(&o.Dropped, n.Dropped)
			add(&o.Late, n.Late)
			add(&o.Keys, n.Keys)
			add(&o.StateBytes, n.StateBytes)
			add(&o.WindowsOpen, n.WindowsOpen)
			o.DeadLetters += n.DeadLetters
			o.BlockedSeconds += n.BlockedSeconds
			o.Tasks += n.Tasks
		}
		for _, t := range p.Graph.Tasks {
			if p.Instance != "" {
				t.Task = p.Instance + "/" + t.Task
			}
			out.Tasks = append(out.Tasks, t)
		}
	}
	slices.SortFunc(out.Tasks, func(a, b TaskInfo) int { return cmp.Compare(a.Task, b.Task) })
	return out
}
