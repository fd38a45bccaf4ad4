package twophasev1_test

import (
	"fmt"

	twophase "github.com/eoflow/pipeline/internal/twophasev1"
)

// The runtime's loop in miniature: recover, then commit epoch 1 across the
// Kafka transaction (the decision log) and a database, reporting every
// call as successful. Each Ready prints on one line.
func ExampleProtocol() {
	m, err := twophase.NewProtocol(twophase.Config{DecisionLog: "kafka", Participants: []string{"db"}})
	if err != nil {
		panic(err)
	}
	must := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	// run takes each Ready, acts on it in order, advances, and reports the
	// outcomes, until the Protocol has nothing more to ask.
	run := func() {
		for m.HasReady() {
			rd := m.Ready()
			fmt.Println(rd)
			m.Advance()
			for _, a := range rd.Actions {
				switch a.Kind {
				case twophase.ActRecover:
					must(m.Recovered(a.Participant, nil)) // nothing in doubt
				case twophase.ActReadDecision:
					must(m.DecisionRead(0)) // no checkpoint yet
				case twophase.ActBegin:
					must(m.Begun(a.Participant, a.Epoch))
				case twophase.ActPrepare:
					must(m.Prepared(a.Participant, a.Epoch))
				case twophase.ActCommit:
					must(m.Committed(a.Participant, a.Epoch))
				}
			}
		}
	}
	must(m.Start())
	run()
	must(m.Barrier(1)) // barrier 1 reached the participants
	run()
	must(m.Decide(1)) // the checkpoint coordinator hands out commit 1
	run()
	// Output:
	// recover kafka; recover db
	// read_decision kafka
	// resume 0; begin kafka 1; begin db 1
	// prepare kafka 1; prepare db 1
	// commit kafka 1
	// decided 1; commit db 1
	// done 1; begin kafka 2; begin db 2
}
