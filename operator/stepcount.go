package operator

// Counting what each stateless step does. The steps of a route run fused
// in one Chain, so a step's records are not handed anywhere that could
// count them: instead each Chain clone tallies, per record, the step the
// record stopped at (one add per record and route, on the goroutine that
// runs it), and Branches.TakeStepCounts turns the tallies into each
// step's records in, out, dropped and failed.
//
// Routes that share their first steps (a fan-out after a filter: both
// branches' routes run the filter) see the same records there, so only
// the first route through each prefix of steps counts them (route.owns);
// a merge is routes that differ before the step, and each counts what it
// brings.

// tally is how far one Chain clone's records got.
type tally struct {
	// stopped[k] counts records that stopped at step k (filtered out,
	// dropped by an inner join, or failed); stopped[len(steps)] those that
	// came through every step. failed[k] counts those of stopped[k] that
	// failed (dead letters).
	stopped []int64
	failed  []int64
}

func newTally(steps int) *tally {
	return &tally{stopped: make([]int64, steps+1), failed: make([]int64, steps)}
}

// count records a record that stopped at step at (-1: it never reached
// the first step, and counts nowhere).
func (t *tally) count(at int, failed bool) {
	if t == nil || at < 0 {
		return
	}
	t.stopped[at]++
	if failed {
		t.failed[at]++
	}
}

// StepCount is what one stateless step did with the records that reached
// it: In reached it, Out it passed on, Dropped it filtered out (a filter,
// or an inner join that found no value), Failed went to the dead letters
// from it. In = Out + Dropped + Failed.
type StepCount struct {
	In, Out, Dropped, Failed int64
}

// TakeStepCounts adds what each stateless step did since the last call to
// counts, indexed as config.Steps (at least that long; keyed steps are
// left alone), and starts counting afresh. Call it on the goroutine that
// runs b.
func (b *Branches) TakeStepCounts(counts []StepCount) {
	for _, rt := range b.tallied {
		c := rt.chain
		t := c.tally
		if t == nil {
			continue
		}
		through := t.stopped[len(c.steps)]
		t.stopped[len(c.steps)] = 0
		for k := len(c.steps) - 1; k >= 0; k-- {
			in := through + t.stopped[k]
			if rt.owns == nil || rt.owns[k] {
				sc := &counts[c.steps[k].index]
				sc.In += in
				sc.Out += through
				sc.Failed += t.failed[k]
				sc.Dropped += t.stopped[k] - t.failed[k]
			}
			t.stopped[k], t.failed[k] = 0, 0
			through = in
		}
	}
}

// owners marks, for each route of each source, the steps whose prefix of
// the route no earlier route of the source runs (route.owns).
func owners(routes [][]route) {
	for _, rs := range routes {
		seen := map[string]bool{}
		for i := range rs {
			c := rs[i].chain
			owns := make([]bool, len(c.steps))
			prefix := make([]byte, 0, 8*len(c.steps))
			for k, st := range c.steps {
				prefix = append(prefix, byte(st.index>>8), byte(st.index), ',')
				if !seen[string(prefix)] {
					seen[string(prefix)] = true
					owns[k] = true
				}
			}
			rs[i].owns = owns
		}
	}
}
