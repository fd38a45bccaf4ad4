package main

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/eoflow/pipeline/internal/testkit/windowcheck"
)

// windowMember is a group-mode process of the windowed job j under
// instance id.
func windowMember(j *job, id string) *job {
	m := &job{t: j.t, bin: j.bin, conn: j.conn, config: j.config, env: map[string]string{}}
	maps.Copy(m.env, j.env)
	m.env["PIPELINE_INSTANCE_ID"] = id
	j.t.Cleanup(func() {
		m.kill()
		if j.t.Failed() {
			j.t.Logf("instance %s output:\n%s", id, m.output())
		}
	})
	return m
}

// parity-windows on two group-mode processes: the second joins while the
// input arrives (a rebalance hands it half of the source partitions, whose
// clocks it must continue), then the first is SIGKILLed and restarted.
// The committed windows and late records are exactly the batch oracle's
// of the input alone: what one process writes.
func TestGroupModeWindowsExactUnderSIGKILL(t *testing.T) {
	seed := envInt(t, "CRASH_SEED", time.Now().UnixNano())
	t.Logf("seed %d (CRASH_SEED=%d replays it)", seed, seed)
	p := windowParams
	j := newWindowJob(t, "100ms", p)
	j.env["SCALE_MODE"] = "group"
	j.env["SCALE_PARTITIONS"] = "4"
	j.env["SESSION_TIMEOUT"] = groupSessionTimeout.String()
	base := time.Now().Add(-time.Hour).UnixMilli() / 1000 * 1000
	data := windowcheck.Generate(seed, windowPartitions, 800, p, 0.02, base)
	in := &windowInput{j: j, data: data, next: make([]int, windowPartitions)}
	feed := func(d time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end) && !in.done(); {
			in.write(10)
			time.Sleep(40 * time.Millisecond)
		}
	}
	a, b := windowMember(j, "a"), windowMember(j, "b")
	a.start()
	feed(1500 * time.Millisecond)
	t.Logf("instance b joins (written per partition: %v)", in.next)
	b.start()
	feed(2 * time.Second)
	t.Logf("SIGKILL instance a (written per partition: %v)", in.next)
	a.kill()
	feed(500 * time.Millisecond)
	a.start()
	for !in.done() {
		feed(time.Second)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		rep, err := windowcheck.Check(ctx, j.conn, p, j.env["INPUT_TOPIC"], j.env["OUTPUT_TOPIC"], j.env["LATE_TOPIC"])
		cancel()
		if err == nil && rep.OK() {
			t.Logf("%v", rep)
			break
		}
		for _, m := range []*job{a, b} {
			select {
			case err := <-m.exited:
				m.cmd = nil
				t.Fatalf("instance %s exited: %v", m.env["PIPELINE_INSTANCE_ID"], err)
			default:
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the output never matched the oracle: %v %v", err, rep)
		}
		time.Sleep(300 * time.Millisecond)
	}
	a.terminate()
	b.terminate()
}
