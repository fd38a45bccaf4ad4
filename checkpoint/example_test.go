package checkpoint_test

import (
	"fmt"
	"time"

	"github.com/eoflow/pipeline/checkpoint"
)

// The runtime's loop, with the I/O reduced to prints: feed an input, take
// Ready, act in the documented order, Advance.
func ExampleCoordinator() {
	start := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	c, err := checkpoint.NewCoordinator(checkpoint.CoordinatorConfig{
		Interval: time.Second,
		Tasks:    []checkpoint.TaskID{"source-0", "aggregate-2", "sink"},
	}, start)
	if err != nil {
		panic(err)
	}
	act := func() {
		rd := c.Ready()
		if rd.Fail != nil {
			fmt.Println("restart:", rd.Fail)
		}
		for _, a := range rd.Aborted {
			fmt.Println("drop snapshots and transaction of", a.ID, a.Reason)
		}
		for _, id := range rd.Trigger {
			fmt.Println("inject barrier", id)
		}
		if rd.Commit != 0 {
			fmt.Println("write checkpoint record", rd.Commit, "into its transaction and commit")
		}
		for _, id := range rd.Completed {
			fmt.Println("checkpoint", id, "complete")
		}
		c.Advance()
	}

	c.Tick(start.Add(time.Second))
	act()
	for _, task := range c.Tasks() {
		_ = c.Ack(task, 1)
	}
	act()
	_ = c.Committed(1, start.Add(1200*time.Millisecond))
	act()
	c.Tick(start.Add(2 * time.Second))
	act()
	_ = c.Decline("sink", 2, fmt.Errorf("producer fenced"))
	act()
	// Output:
	// inject barrier 1
	// write checkpoint record 1 into its transaction and commit
	// checkpoint 1 complete
	// inject barrier 2
	// restart: checkpoint 2 declined by task "sink": producer fenced; the job must restart from checkpoint 1
	// drop snapshots and transaction of 2 declined
}
