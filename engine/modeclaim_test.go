package engine

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/checkpoint/kstore"
	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/internal/kread"
	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
)

// What a job's checkpoint records allow each mode, with and without a
// savepoint.
func TestJudgeMode(t *testing.T) {
	rec := &checkpoint.Record{ID: 7}
	members := map[string]*checkpoint.Record{"j/a": {ID: 3}}
	for _, c := range []struct {
		name     string
		recs     jobRecords
		want     config.ScaleMode
		from     bool
		verdict  modeVerdict
		saysWhat string
	}{
		{"a new job: single claims", jobRecords{}, config.ScaleSingle, false, modeClaim, ""},
		{"a new job: group claims", jobRecords{}, config.ScaleGroup, false, modeClaim, ""},
		{"claimed for single: single runs", jobRecords{claim: config.ScaleSingle}, config.ScaleSingle, false, modeRun, ""},
		{"claimed for single, nothing committed: group refused", jobRecords{claim: config.ScaleSingle}, config.ScaleGroup, false, modeRefuse, "claimed for single mode"},
		{"claimed for group, nothing committed: single refused", jobRecords{claim: config.ScaleGroup}, config.ScaleSingle, false, modeRefuse, "claimed for group mode"},
		{"claimed for single, with a checkpoint: group refused", jobRecords{claim: config.ScaleSingle, single: rec}, config.ScaleGroup, false, modeRefuse, "ran in single mode (its last checkpoint is 7)"},
		{"claimed for group, with members: single refused", jobRecords{claim: config.ScaleGroup, members: members}, config.ScaleSingle, false, modeRefuse, "ran in group mode"},
		{"claimed for single, from a savepoint: group takes it", jobRecords{claim: config.ScaleSingle, single: rec}, config.ScaleGroup, true, modeClaim, ""},
		{"claimed for group, from a savepoint: single takes it", jobRecords{claim: config.ScaleGroup, members: members}, config.ScaleSingle, true, modeClaim, ""},
		// Jobs of an older build have records and no claim.
		{"unclaimed single-mode records: group refused", jobRecords{single: rec}, config.ScaleGroup, false, modeRefuse, "ran in single mode"},
		{"unclaimed single-mode records: single claims", jobRecords{single: rec}, config.ScaleSingle, false, modeClaim, ""},
		{"unclaimed member records: single refused", jobRecords{members: members}, config.ScaleSingle, false, modeRefuse, "ran in group mode"},
		{"unclaimed member records: group claims", jobRecords{members: members}, config.ScaleGroup, false, modeClaim, ""},
		{"unclaimed, imported into single after group: single claims", jobRecords{single: rec, members: members}, config.ScaleSingle, false, modeClaim, ""},
		// A claim outweighs the records of the mode the job left.
		{"moved to single: stale member records", jobRecords{claim: config.ScaleSingle, single: rec, members: members}, config.ScaleSingle, false, modeRun, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			verdict, err := judgeMode("j", &c.recs, c.want, c.from)
			if verdict != c.verdict {
				t.Fatalf("verdict %d (%v), want %d", verdict, err, c.verdict)
			}
			if c.verdict != modeRefuse {
				if err != nil {
					t.Fatalf("error %v beside verdict %d", err, verdict)
				}
				return
			}
			if !errors.Is(err, ErrIncompatible) || !strings.Contains(err.Error(), c.saysWhat) {
				t.Fatalf("refusal %v, want ErrIncompatible saying %q", err, c.saysWhat)
			}
		})
	}
}

// Claimers of both modes race for a new job on the real broker: every one
// learns the same winner, and the topic holds that one claim.
func TestClaimModeRace(t *testing.T) {
	k := kafkatest.Broker(t)
	job := kafkatest.Topic(t, "claim")
	conn := []kgo.Opt{kgo.SeedBrokers(k.Bootstrap()...)}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := kstore.Ensure(ctx, kadm.NewClient(kafkatest.Client(t, k.Bootstrap())), job, -1); err != nil {
		t.Fatal(err)
	}
	jitter := equalJitter(rand.New(rand.NewPCG(1, 2)))
	const claimers = 6
	won := make([]config.ScaleMode, claimers)
	errs := make([]error, claimers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range claimers {
		want := config.ScaleSingle
		if i%2 == 1 {
			want = config.ScaleGroup
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			won[i], errs[i] = claimMode(ctx, conn, job, want, false, time.Minute, jitter)
		}()
	}
	close(start)
	wg.Wait()
	for i := range claimers {
		if errs[i] != nil {
			t.Fatalf("claimer %d: %v", i, errs[i])
		}
		if won[i] != won[0] {
			t.Fatalf("claimers disagree on the mode: %v", won)
		}
	}
	var claims []string
	if err := kread.All(ctx, conn, checkpoint.TopicName(job), func(r *kgo.Record) error {
		if string(r.Key) == modeKey(job) {
			claims = append(claims, string(r.Value))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(claims) != 1 || claims[0] != string(won[0]) {
		t.Fatalf("claims committed: %v, want the one of %s", claims, won[0])
	}
}

// Single and group mode started on a new job at the same moment: exactly
// one runs, the other is refused, and the output is exact. The single-mode
// process's first commit waits until the group-mode process commits too
// or is refused, so that neither could have seen the other's checkpoint
// record (the window in which both ran, each writing every output).
func TestModesStartedTogetherOnANewJob(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	e.numbers(1, 4000)
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free)
	single, singleLogs := newJob(t, paritySum(t, e.env), withBeforeCommit(func(checkpoint.ID) {
		select {
		case <-release:
		case <-time.After(time.Minute):
		}
	}))
	ge := map[string]string{}
	for k, v := range e.env {
		ge[k] = v
	}
	groupEnv(&testEnv{env: ge})
	group, groupLogs := newJob(t, paritySumGroup(t, ge), WithInstanceID("a"), withBeforeCommit(func(checkpoint.ID) { free() }))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	type exit struct {
		mode string
		err  error
	}
	exits := make(chan exit, 2)
	for _, r := range []struct {
		mode string
		job  *Job
	}{{"single", single}, {"group", group}} {
		go func() {
			err := r.job.Run(ctx)
			free()
			exits <- exit{r.mode, err}
		}()
	}
	var refused exit
	select {
	case refused = <-exits:
	case <-time.After(time.Minute):
		t.Fatalf("both modes run the new job (%d outputs for 4000 inputs)", len(e.outputValues()))
	}
	if !errors.Is(refused.err, ErrIncompatible) {
		t.Fatalf("%s mode stopped with %v, want a refusal (ErrIncompatible)", refused.mode, refused.err)
	}
	winner, logs := &running{job: group, logs: groupLogs}, groupLogs
	if refused.mode == "group" {
		winner, logs = &running{job: single, logs: singleLogs}, singleLogs
	}
	winner.done = make(chan error, 1)
	go func() { winner.done <- (<-exits).err }()
	rep := e.awaitFinal(4000, winner)
	if !rep.Exact() {
		t.Fatalf("%s mode refused, the other's output: %v\n%s", refused.mode, rep, logs.String())
	}
	t.Logf("%s mode was refused: %v", refused.mode, refused.err)
}

// A single-mode process whose offsets the job's consumer group refuses,
// because the group has a member, stops and says why: a group-mode
// process of the job would be writing every output a second time. (The
// mode claim keeps such processes out of one another's way; this is the
// second line, shown with a plain consumer in the group.)
func TestSingleModeStopsWhenTheGroupHasMembers(t *testing.T) {
	e := newTestEnv(t, "exactly_once")
	member := kafkatest.Client(t, e.brokers, kgo.ConsumerGroup(e.env["JOB_NAME"]), kgo.ConsumeTopics(e.env["INPUT_TOPIC"]))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := kadm.NewClient(kafkatest.Client(t, e.brokers))
	for {
		pctx, pcancel := context.WithTimeout(ctx, 100*time.Millisecond)
		member.PollRecords(pctx, 1) // joins
		pcancel()
		described, err := adm.DescribeGroups(ctx, e.env["JOB_NAME"])
		if err != nil {
			t.Fatal(err)
		}
		if g := described[e.env["JOB_NAME"]]; len(g.Members) == 1 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the consumer did not join the group")
		}
	}
	e.numbers(1, 100)
	r := start(t, paritySum(t, e.env))
	select {
	case err := <-r.done:
		if !errors.Is(err, ErrOtherMode) || !strings.Contains(err.Error(), "UNKNOWN_MEMBER_ID") {
			t.Fatalf("Run = %v, want ErrOtherMode from UNKNOWN_MEMBER_ID", err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("single mode runs on while the job's group has a member:\n%s", r.logs.String())
	}
}

// Kafka 4.1 answers a claim's commit that races another claimer's
// InitProducerId with UNKNOWN_SERVER_ERROR (its coordinator throws
// IllegalStateException: PREPARE_COMMIT while PREPARE_EPOCH_FENCE is
// pending), which TestClaimModeRace met on the real broker. The claim's
// outcome is then unknown: the claimer reads the claim again, and its
// next pass claims.
func TestClaimRetriesACommitTheBrokerFailed(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	failed := 0
	c.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		ereq := req.(*kmsg.EndTxnRequest)
		if !ereq.Commit || failed > 0 {
			return nil, nil, false
		}
		failed++
		resp := ereq.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.UnknownServerError.Code
		return resp, nil, true
	})
	conn := []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := kstore.Ensure(ctx, kadm.NewClient(kafkatest.Client(t, c.ListenAddrs())), "job", -1); err != nil {
		t.Fatal(err)
	}
	won, err := claimMode(ctx, conn, "job", config.ScaleGroup, false, time.Minute, func(d time.Duration) time.Duration { return d })
	if err != nil || won != config.ScaleGroup || failed != 1 {
		t.Fatalf("claim: %q, %v (commits failed: %d)", won, err, failed)
	}
	recs, err := readJobRecords(ctx, conn, "job")
	if err != nil || recs.claim != config.ScaleGroup {
		t.Fatalf("the job's claim after the retry: %q %v", recs.claim, err)
	}
}

// A member's newest checkpoint record is its last one in the topic,
// whatever its id: a member that recovered while another's open
// transaction held the topic's last stable offset below its own newest
// records continues from an older id, and writes ids it wrote before
// (here 3 again, then 2 after a 4): what it wrote last is what it holds
// now (restoreTime merges the partitions' times from it).
func TestFoldJobRecordsTakesAMembersLastRecord(t *testing.T) {
	var recs jobRecords
	fold := foldJobRecords("job", &recs)
	for i, c := range []struct {
		id  checkpoint.ID
		max int64
	}{{3, 100}, {3, 200}, {4, 300}, {2, 400}} {
		rec := &checkpoint.Record{Job: "job", ID: c.id, ConfigFingerprint: "f", KeyGroups: 8, EventTime: &checkpoint.EventTime{
			Partitions: []checkpoint.PartitionTime{{Topic: "in", Partition: 0, MaxEventTime: c.max}}}}
		v, err := checkpoint.EncodeRecord(rec)
		if err != nil {
			t.Fatal(err)
		}
		if err := fold(&kgo.Record{Key: []byte("job/a"), Value: v, Offset: int64(i)}); err != nil {
			t.Fatal(err)
		}
		if got := recs.members["job/a"].EventTime.Partitions[0].MaxEventTime; got != c.max {
			t.Fatalf("after record %d (id %d): the member's newest holds %d, want %d", i, c.id, got, c.max)
		}
	}
}
