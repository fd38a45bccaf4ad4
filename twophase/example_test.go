package twophase_test

import (
	"fmt"
	"time"

	"github.com/eoflow/pipeline/checkpoint"
	"github.com/eoflow/pipeline/twophase"
)

// The engine's loop in miniature, with every participant call succeeding
// at once: recover, start the task graph, take a checkpoint across the
// Kafka transaction (the decision log) and a database, then stop. Each
// Ready prints on one line.
func ExampleMachine() {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	m, err := twophase.NewMachine(twophase.Config{DecisionLog: "kafka", Participants: []string{"db"}, Interval: time.Second})
	if err != nil {
		panic(err)
	}
	step := func(msg twophase.Msg) {
		if err := m.Step(msg); err != nil {
			panic(err)
		}
	}
	// run takes each Ready, acts on it in order, advances, and reports the
	// outcomes, until the Machine has nothing more to ask.
	run := func() {
		for m.HasReady() {
			rd := m.Ready()
			fmt.Println(rd)
			m.Advance()
			for _, a := range rd.Actions {
				if a.Kind == twophase.ActTrigger {
					// Inject barrier a.Epoch; here every task acks it at once.
					for _, task := range []checkpoint.TaskID{"source-0", "sink"} {
						step(twophase.Msg{Type: twophase.MsgAck, Task: task, Epoch: a.Epoch})
					}
				}
				if a.Calls() {
					step(twophase.Outcome(a, nil)) // the call succeeded; nothing in doubt, nothing decided yet
				}
			}
		}
	}
	run()
	step(twophase.Msg{Type: twophase.MsgStart, Now: start, Tasks: []checkpoint.TaskID{"source-0", "sink"}})
	step(twophase.Msg{Type: twophase.MsgTick, Now: start.Add(time.Second)})
	run()
	step(twophase.Msg{Type: twophase.MsgStop, Now: start.Add(1500 * time.Millisecond)})
	run()
	fmt.Println(m.State())
	// Output:
	// recover kafka; recover db
	// read_decision kafka
	// resume 0; begin kafka 1; begin db 1
	// trigger 1
	// prepare kafka 1; prepare db 1
	// commit kafka 1
	// completed 1; commit db 1
	// done 1; begin kafka 2; begin db 2
	// trigger 2
	// prepare kafka 2; prepare db 2
	// commit kafka 2
	// completed 2; commit db 2
	// done 2
	// stopped
}
