package paritycheck

import "testing"

// run simulates the every_record outputs of inputs in the given order.
func run(inputs ...int64) map[string][]Output {
	out := map[string][]Output{}
	state := map[string]Output{}
	for _, n := range inputs {
		key := "odd"
		if n%2 == 0 {
			key = "even"
		}
		s := state[key]
		s.Key, s.Count, s.Sum = key, s.Count+1, s.Sum+n
		state[key] = s
		out[key] = append(out[key], s)
	}
	return out
}

func TestExpected(t *testing.T) {
	e := Expected(5) // odd 1,3,5; even 2,4
	if e["odd"] != (Output{"odd", 3, 9}) || e["even"] != (Output{"even", 2, 6}) {
		t.Fatalf("Expected(5) = %v", e)
	}
}

func TestJudgeExactRun(t *testing.T) {
	r := Judge(run(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 10)
	if !r.Exact() {
		t.Fatalf("a clean run judged inexact: %v", r)
	}
	// Input order across partitions may interleave freely.
	if r := Judge(run(2, 1, 4, 3, 6, 5, 10, 9, 8, 7), 10); !r.Exact() {
		t.Fatalf("reordered inputs judged inexact: %v", r)
	}
}

func TestJudgeFindsLossAndDuplicates(t *testing.T) {
	lost := Judge(run(1, 2, 3, 4, 6, 7, 8, 9, 10), 10) // 5 never processed
	if lost.Exact() || lost.Missing != 1 || lost.Duplicated != 0 {
		t.Fatalf("a lost input: %v", lost)
	}

	// A replay after a crash: odd outputs for 1,3 then the state rolled
	// back to after 1 and 3 was processed again (at_least_once).
	out := run(1, 2, 3, 4, 5, 6)
	out["odd"] = append(out["odd"][:2], Output{"odd", 2, 4}, Output{"odd", 3, 9})
	dup := Judge(out, 6)
	if dup.Exact() || dup.OutOfOrder != 1 || dup.Duplicated != 1 || dup.Missing != 0 || !dup.StateExact() {
		t.Fatalf("a replayed output: %v", dup)
	}

	// The same output twice in a row (a duplicated write).
	out = run(1, 2, 3, 4)
	out["even"] = append(out["even"], out["even"][1])
	if r := Judge(out, 4); r.Exact() || r.OutOfOrder != 1 || r.Duplicated != 1 {
		t.Fatalf("a duplicated write: %v", r)
	}

	// at_most_once after a crash: state lost, counts start over at 7; 5,
	// 4, 6 and 8 were polled (offsets committed) but never written.
	out = run(1, 2, 3)
	after := run(7, 9)
	out["odd"] = append(out["odd"], after["odd"]...)
	if r := Judge(out, 9); r.Missing != 4 || r.Duplicated != 0 || r.OutOfOrder != 1 {
		t.Fatalf("lost state: %v", r)
	}
	if r := Judge(map[string][]Output{"odd": run(1, 3)["odd"]}, 4); r.Missing != 2 {
		t.Fatalf("no even outputs at all must count both evens missing: %v", r)
	}
}
