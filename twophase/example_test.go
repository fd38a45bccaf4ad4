package twophase_test

import (
	"fmt"

	"github.com/eoflow/pipeline/twophase"
)

// The runtime's loop in miniature: recover, then commit epoch 1 across the
// Kafka transaction (the decision log) and a database, reporting every
// call as successful.
func ExampleProtocol() {
	m, err := twophase.NewProtocol(twophase.Config{DecisionLog: "kafka", Participants: []string{"db"}})
	if err != nil {
		panic(err)
	}
	var queue []twophase.Action
	run := func(acts []twophase.Action, err error) {
		if err != nil {
			panic(err)
		}
		queue = append(queue, acts...)
		for len(queue) > 0 {
			a := queue[0]
			queue = queue[1:]
			fmt.Println(a)
			var next []twophase.Action
			switch a.Kind {
			case twophase.ActRecover:
				next, err = m.Recovered(a.Participant, nil) // nothing in doubt
			case twophase.ActReadDecision:
				next, err = m.DecisionRead(0) // no checkpoint yet
			case twophase.ActPrepare:
				next, err = m.Prepared(a.Participant, a.Epoch)
			case twophase.ActCommit:
				next, err = m.Committed(a.Participant, a.Epoch)
			}
			if err != nil {
				panic(err)
			}
			queue = append(queue, next...)
		}
	}
	run(m.Start())
	run(m.Begin(1))  // barrier 1 reached the participants
	run(m.Decide(1)) // the checkpoint coordinator hands out commit 1
	// Output:
	// recover kafka
	// recover db
	// read_decision kafka
	// resume 0
	// prepare kafka 1
	// prepare db 1
	// commit kafka 1
	// decided 1
	// commit db 1
	// done 1
}
