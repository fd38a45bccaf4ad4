package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/eoflow/pipeline/internal/fault"
	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
)

// TestGroupModeKilledWhileCommitting: a member killed after its epoch's
// offsets joined its transaction, before the commit, leaves them pending
// in the group, and every offset fetch of the group (which must be
// stable) waits for them. Nobody may leave them to the transaction
// timeout (5 minutes here): a process restarted with the same instance id
// fences its own transactional id before it joins (as the group's only
// member it replaces itself without a rebalance, so nobody else would),
// the survivors of a member that stays dead fence it when they are
// assigned its partitions, before they fetch their offsets, and a process
// started after every member was gone fences the instances of the job's
// checkpoint records that are out of the group with a transaction open.
// Each goes on within a minute, and the sums stay exact.
func TestGroupModeKilledWhileCommitting(t *testing.T) {
	g := newGroupJob(t, kafkatest.Broker(t).Bootstrap())
	g.withTransactionTimeout("5m")
	ctx, stopFeeding := context.WithCancel(context.Background())
	fed := g.feed(ctx)
	defer func() { stopFeeding(); fed() }()
	killAt := fault.EnvVar + "=" + string(fault.BeforeCommit) + "@5"

	g.logf("the only member, killed at its fifth commit")
	a := g.member("a")
	a.start(killAt)
	g.awaitKilledWhileCommitting(a)
	restored := g.count("a", "msg=restored")
	a.start()
	g.awaitRestore("a", restored)

	g.logf("a second member, killed at its fifth commit, stays dead")
	b := g.member("b")
	b.start(killAt)
	g.awaitKilledWhileCommitting(b)
	restored = g.count("a", "msg=restored")
	g.awaitRestore("a", restored)
	if !strings.Contains(a.output(), `msg="fenced a departed member's transactional id`) {
		t.Fatalf("instance a took over without fencing b:\n%s", a.output())
	}
	time.Sleep(2 * time.Second)
	g.alive()

	g.logf("b back, killed at its fifth commit again; a killed too: nobody sees b leave")
	b.start(killAt)
	g.awaitKilledWhileCommitting(b)
	a.kill()
	time.Sleep(groupSessionTimeout + 3*time.Second) // both out of the group
	c := g.member("c")
	c.start()
	g.awaitRestore("c", 0)
	if !strings.Contains(c.output(), `msg="fenced a departed member's transactional id: its open transaction is aborted" job=`+g.env["JOB_NAME"]+" instance=b") {
		t.Fatalf("instance c restored without fencing b:\n%s", c.output())
	}
	time.Sleep(2 * time.Second)
	g.alive()

	stopFeeding()
	fed()
	n, err := g.resume(1)
	if err != nil {
		t.Fatal(err)
	}
	if rep := g.awaitExact(n); !rep.Exact() {
		t.Fatalf("not exactly once: %v", rep)
	}
}

// withTransactionTimeout runs the members with kafka.transaction_timeout
// d: the parity-sum example's file with the one line added.
func (g *groupJob) withTransactionTimeout(d string) {
	g.config = exampleWith(g.t, "  brokers: ${KAFKA_BROKERS:-127.0.0.1:9092}\n", "  transaction_timeout: "+d+"\n")
}

// awaitKilledWhileCommitting waits for m's fault point to kill it, and
// checks that it left offsets pending in the group: the case under test.
func (g *groupJob) awaitKilledWhileCommitting(m *job) {
	g.t.Helper()
	select {
	case <-m.exited:
		m.cmd = nil
	case <-time.After(2 * time.Minute):
		g.t.Fatalf("the armed fault did not kill the process within 2 minutes:\n%s", m.output())
	}
	if !strings.Contains(m.output(), "fault: killing the process at "+string(fault.BeforeCommit)) {
		g.t.Fatalf("the process exited, not at the fault point:\n%s", m.output())
	}
	if !g.offsetsPending() {
		g.t.Fatal("killed before its commit, the process left no offsets pending in the group: the test proves nothing")
	}
	g.logf("killed before its commit, offsets pending")
}

// offsetsPending: a stable offset fetch of the group is refused or held.
func (g *groupJob) offsetsPending() bool {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(kadm.RequireStable(context.Background()), 5*time.Second)
	defer cancel()
	offsets, err := kadm.NewClient(kafkatest.Client(g.t, g.brokers)).FetchOffsets(ctx, g.env["JOB_NAME"])
	switch {
	case errors.Is(err, kerr.UnstableOffsetCommit) || ctx.Err() != nil:
		return true
	case err != nil:
		g.t.Fatal(err)
	}
	pending := false
	offsets.Each(func(o kadm.OffsetResponse) {
		pending = pending || errors.Is(o.Err, kerr.UnstableOffsetCommit)
	})
	return pending
}

// awaitRestore waits for instance id to restore once more than before,
// for a minute: far less than the transaction timeout a pending offset
// commit would otherwise hold it for.
func (g *groupJob) awaitRestore(id string, before int) {
	g.t.Helper()
	start := time.Now()
	for g.count(id, "msg=restored") == before {
		if time.Since(start) > time.Minute {
			g.t.Fatalf("instance %s did not restore within a minute (the transaction timeout is 5 minutes):\n%s", id, g.member(id).output())
		}
		g.alive()
		time.Sleep(200 * time.Millisecond)
	}
	g.logf("instance %s restored after %v", id, time.Since(start).Round(time.Millisecond))
}
