package main

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The rebalance measurement (issue 35: rebalances that move only what
// moves). Two processes hold -rebalance-keys keys of state with input
// flowing at -rate; a third joins, runs a while, and leaves (SIGTERM: it
// leaves the group at once). For each event and each process that stayed:
//
//   - pause: the longest time between two checkpoints it completed around
//     the event (pipeline_checkpoint_last_completed_timestamp_seconds,
//     sampled every 50 ms): its outputs commit with its checkpoints, so
//     that is the longest gap in its committed output. The target is two
//     checkpoint intervals;
//   - kept and moved here: the partitions of its new assignment it owned
//     in the generation before, and those it did not (its "group
//     assignment" log lines);
//   - restored: the state keys its next attempt restored and how long
//     that took (its "restored" line).

// rebalanceRow is one staying process's view of one event.
type rebalanceRow struct {
	event, proc    string
	pause          time.Duration
	kept, moved    int
	keys, keptKeys int64
	took           time.Duration
}

// checkpointSampler polls each process's last completed checkpoint time
// and keeps the distinct ones.
type checkpointSampler struct {
	mu    sync.Mutex
	procs map[string]*proc
	times map[string][]time.Time
}

func (s *checkpointSampler) add(id string, p *proc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.procs[id] = p
}

func (s *checkpointSampler) run(ctx context.Context) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		s.mu.Lock()
		procs := make(map[string]*proc, len(s.procs))
		for id, p := range s.procs {
			procs[id] = p
		}
		s.mu.Unlock()
		for id, p := range procs {
			rctx, cancel := context.WithTimeout(ctx, time.Second)
			at, err := p.lastCheckpoint(rctx)
			cancel()
			if err != nil || at.IsZero() {
				continue
			}
			s.mu.Lock()
			if ts := s.times[id]; len(ts) == 0 || !ts[len(ts)-1].Equal(at) {
				s.times[id] = append(ts, at)
			}
			s.mu.Unlock()
		}
	}
}

// pause is the longest gap between consecutive checkpoints of process id
// that ends after from and starts before to.
func (s *checkpointSampler) pause(id string, from, to time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var longest time.Duration
	ts := s.times[id]
	for i := 1; i < len(ts); i++ {
		if ts[i].After(from) && ts[i-1].Before(to) {
			longest = max(longest, ts[i].Sub(ts[i-1]))
		}
	}
	return longest
}

// completedAfter reports whether process id completed a checkpoint after t.
func (s *checkpointSampler) completedAfter(id string, t time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := s.times[id]
	return len(ts) > 0 && ts[len(ts)-1].After(t)
}

func rebalance(o options) ([]rebalanceRow, error) {
	r, err := newRun(o, "group", "rebalance", false)
	if err != nil {
		return nil, err
	}
	defer r.close()
	if err := r.produce(o.rebalanceKeys, o.rebalanceKeys); err != nil {
		return nil, err
	}
	s := &checkpointSampler{procs: map[string]*proc{}, times: map[string][]time.Time{}}
	for _, id := range []string{"a", "b"} {
		p, err := startProc(o, r.env, id)
		if err != nil {
			return nil, err
		}
		r.procs[id] = p
		s.add(id, p)
	}
	if err := r.awaitCaughtUp(o.rebalanceKeys, 15*time.Minute); err != nil {
		return nil, err
	}
	log.Printf("groupbench: rebalance: %d keys of state over a and b", o.rebalanceKeys)
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	wg.Add(2)
	go func() { defer wg.Done(); r.produceSteadily(ctx, o.rate) }()
	go func() { defer wg.Done(); s.run(ctx) }()
	time.Sleep(5 * time.Second)

	// settled waits until every process in ids completed a checkpoint
	// after t, then a few more intervals.
	settled := func(t time.Time, ids ...string) error {
		deadline := time.Now().Add(3 * time.Minute)
		for {
			all := true
			for _, id := range ids {
				all = all && s.completedAfter(id, t)
			}
			if all {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%v completed no checkpoint within 3 minutes of the event", ids)
			}
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(5 * time.Second)
		return nil
	}
	rows := func(event string, at time.Time) ([]rebalanceRow, error) {
		var out []rebalanceRow
		for _, id := range []string{"a", "b"} {
			row := rebalanceRow{event: event, proc: id, pause: s.pause(id, at, time.Now())}
			var err error
			row.kept, row.moved, row.keys, row.keptKeys, row.took, err = r.procs[id].assignmentsAfter(at)
			if err != nil {
				return nil, err
			}
			out = append(out, row)
		}
		return out, nil
	}

	joined := time.Now()
	c, err := startProc(o, r.env, "c")
	if err != nil {
		return nil, err
	}
	r.procs["c"] = c
	s.add("c", c)
	if err := settled(joined, "a", "b", "c"); err != nil {
		return nil, err
	}
	out, err := rows("a third joins", joined)
	if err != nil {
		return nil, err
	}
	left := time.Now()
	c.stop()
	if err := settled(left, "a", "b"); err != nil {
		return nil, err
	}
	after, err := rows("the third leaves", left)
	if err != nil {
		return nil, err
	}
	return append(out, after...), nil
}

// lastCheckpoint scrapes the process's last completed checkpoint time
// (zero before its first, or before its admin listener is up).
func (p *proc) lastCheckpoint(ctx context.Context) (time.Time, error) {
	p.mu.Lock()
	addr := p.admin
	p.mu.Unlock()
	if addr == "" {
		return time.Time{}, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return time.Time{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return time.Time{}, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "pipeline_checkpoint_last_completed_timestamp_seconds") {
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			if err != nil || v == 0 {
				return time.Time{}, err
			}
			return time.Unix(0, int64(v*1e9)), nil
		}
	}
	return time.Time{}, sc.Err()
}

var (
	assignmentLine = regexp.MustCompile(`^time=(\S+) .*msg="group assignment" .*kept=(\d+) moved_here=(\d+)`)
	restoredAtLine = regexp.MustCompile(`^time=(\S+) .*msg=restored .*state_keys=(\d+) .*took=(\S+)`)
	keptLine       = regexp.MustCompile(`^time=(\S+) .*msg="kept the state of the partitions this process still owns" .*kept_keys=(\d+) restored_keys=(\d+)`)
)

// assignmentsAfter reads the process's log for the assignments it got
// after t (summed: a rebalance may take more than one generation) and
// the last restore after t.
func (p *proc) assignmentsAfter(t time.Time) (kept, moved int, keys, keptKeys int64, took time.Duration, err error) {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return 0, 0, 0, 0, 0, err
	}
	var continued bool
	for _, line := range strings.Split(string(data), "\n") {
		if m := assignmentLine.FindStringSubmatch(line); m != nil && after(m[1], t) {
			k, _ := strconv.Atoi(m[2])
			n, _ := strconv.Atoi(m[3])
			kept, moved = k, moved+n
		}
		if m := keptLine.FindStringSubmatch(line); m != nil && after(m[1], t) {
			// The attempt kept the state of what it still owned: what
			// it read is only what moved here.
			keptKeys, _ = strconv.ParseInt(m[2], 10, 64)
			keys, _ = strconv.ParseInt(m[3], 10, 64)
			continued = true
		}
		if m := restoredAtLine.FindStringSubmatch(line); m != nil && after(m[1], t) {
			if !continued {
				keys, _ = strconv.ParseInt(m[2], 10, 64)
				keptKeys = 0
			}
			took, _ = time.ParseDuration(m[3])
			continued = false
		}
	}
	return kept, moved, keys, keptKeys, took, nil
}

func after(stamp string, t time.Time) bool {
	at, err := time.Parse(time.RFC3339Nano, stamp)
	return err == nil && at.After(t)
}

// rebalanceTable is the rebalance section of the results.
func rebalanceTable(o options, rows []rebalanceRow) string {
	var md strings.Builder
	fmt.Fprintf(&md, "\n## Rebalances: %d keys of state over 2 processes, input at %d records/s\n\n", o.rebalanceKeys, o.rate)
	md.WriteString("A third process joins, then leaves (SIGTERM). Per staying process: the longest gap between its completed checkpoints around the event (its committed output stops for as long), and what its new assignments kept, what moved to it, and what it restored. Checkpoint interval 1 s.\n\n")
	md.WriteString("| event | process | longest gap between checkpoints, s | vs interval | partitions kept | moved here | keys kept in memory | keys restored | restore took |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range slices.Clone(rows) {
		fmt.Fprintf(&md, "| %s | %s | %.2f | %.1fx | %d | %d | %d | %d | %v |\n", r.event, r.proc, r.pause.Seconds(), r.pause.Seconds(), r.kept, r.moved, r.keptKeys, r.keys, r.took)
	}
	return md.String()
}
