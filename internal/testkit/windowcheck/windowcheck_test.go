package windowcheck

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

func ms(t int64) time.Time { return time.UnixMilli(t).UTC() }

func flat(parts [][]Input) []Input {
	var out []Input
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestOracleByHand(t *testing.T) {
	p := Params{Size: 10, MaxOutOfOrderness: 5, AllowedLateness: 0, Partitions: 2}
	in := []Input{
		{Partition: 0, Offset: 0, N: 1, TS: 0},
		{Partition: 0, Offset: 1, N: 2, TS: 9},
		{Partition: 0, Offset: 2, N: 3, TS: 10},
		{Partition: 0, Offset: 3, N: 5, TS: 4},   // largest 10, watermark 5: behind it, but [0,10) is open: counted
		{Partition: 0, Offset: 4, N: 7, TS: 5},   // at the watermark
		{Partition: 0, Offset: 5, N: 9, TS: 30},  // partition 0: largest 30, watermark 25
		{Partition: 0, Offset: 6, N: 11, TS: 19}, // [10,20) closed at 25: late
		{Partition: 0, Offset: 7, N: 13, TS: 20}, // [20,30) open: counted
		{Partition: 1, Offset: 0, N: 4, TS: 26},  // partition 1: largest 26, watermark 21
	}
	outs, late := Oracle(p, in)
	want := []Output{
		{Key: "even", WindowStart: ms(0), WindowEnd: ms(10), Count: 1, Sum: 2},
		{Key: "odd", WindowStart: ms(0), WindowEnd: ms(10), Count: 3, Sum: 13},
		{Key: "odd", WindowStart: ms(10), WindowEnd: ms(20), Count: 1, Sum: 3},
	}
	if !slices.Equal(outs, want) {
		t.Fatalf("outputs\n got %v\nwant %v", outs, want)
	}
	if len(late) != 1 || late[0].N != 11 {
		t.Fatalf("late %v", late)
	}
	// A silent partition fires nothing.
	p.Partitions = 3
	if outs, _ := Oracle(p, in); len(outs) != 0 {
		t.Fatalf("a silent partition, yet %v", outs)
	}
	// Lateness 6: [10,20) closes at 26, so 19 counts; windows fire once
	// the watermark (21) reaches their end plus 6: [0,10) only.
	p.Partitions, p.AllowedLateness = 2, 6
	outs, late = Oracle(p, in)
	if len(late) != 0 || len(outs) != 2 || outs[1].Count != 3 || outs[1].Sum != 13 {
		t.Fatalf("with lateness 6: %v, late %v", outs, late)
	}
}

// Input shuffled within max_out_of_orderness gives the sorted input's
// windows and no late record.
func TestShuffledWithinBoundAsSorted(t *testing.T) {
	p := Params{Size: 1000, MaxOutOfOrderness: 200, Partitions: 3}
	for seed := range int64(30) {
		data := Generate(seed, p.Partitions, 500, p, 0, 1_700_000_000_000)
		shuffled := flat(data)
		sorted := make([]Input, 0, len(shuffled))
		for _, part := range data {
			s := slices.Clone(part)
			slices.SortStableFunc(s, func(a, b Input) int { return int(a.TS - b.TS) })
			for i := range s {
				s[i].Offset = int64(i)
			}
			sorted = append(sorted, s...)
		}
		a, lateA := Oracle(p, shuffled)
		b, lateB := Oracle(p, sorted)
		if len(lateA)+len(lateB) != 0 || !slices.Equal(a, b) || len(a) == 0 {
			t.Fatalf("seed %d: %d late, %d late; outputs equal: %v", seed, len(lateA), len(lateB), slices.Equal(a, b))
		}
	}
}

// Generate's late records are late by the per-window rule, and its
// records behind the watermark by more than the lateness whose window is
// open are counted, not late.
func TestGenerateLateAreLate(t *testing.T) {
	p := Params{Size: 1000, MaxOutOfOrderness: 200, AllowedLateness: 100, Partitions: 4}
	rng := rand.New(rand.NewPCG(1, 1))
	for range 20 {
		data := Generate(rng.Int64(), p.Partitions, 300, p, 0.05, 1_000_000)
		_, late := Oracle(p, flat(data))
		// Recount with the rule: late when the window has closed.
		want, behind := 0, 0
		for _, part := range data {
			largest := part[0].TS
			for _, r := range part[1:] {
				end := r.TS - r.TS%p.Size + p.Size
				switch {
				case end+p.AllowedLateness <= largest-p.MaxOutOfOrderness:
					want++
				case r.TS < largest-p.MaxOutOfOrderness-p.AllowedLateness:
					behind++
				}
				largest = max(largest, r.TS)
			}
		}
		if got := Behind(p, flat(data)); got != behind {
			t.Fatalf("Behind: %d, the rule: %d", got, behind)
		}
		if len(late) != want || want == 0 || behind == 0 {
			t.Fatalf("%d late by the oracle, %d by the rule; %d behind the watermark in an open window", len(late), want, behind)
		}
	}
}

func TestCompareFindsEveryKindOfMistake(t *testing.T) {
	p := Params{Size: 1000, MaxOutOfOrderness: 200, Partitions: 2}
	in := flat(Generate(7, 2, 400, p, 0.03, 0))
	outs, lateIn := Oracle(p, in)
	late := make([]Late, len(lateIn))
	for i, l := range lateIn {
		start := l.TS - ((l.TS%1000)+1000)%1000
		late[i] = Late{Partition: l.Partition, Offset: l.Offset, Value: l.Value, WindowStart: ms(start), WindowEnd: ms(start + 1000), Watermark: ms(start + 1000), Windows: 1}
	}
	if r := Compare(p, in, outs, late); !r.OK() {
		t.Fatalf("the oracle's own output: %v", r)
	}
	if len(outs) < 3 || len(late) < 2 {
		t.Fatalf("too little to test: %d outputs, %d late", len(outs), len(late))
	}
	cases := map[string]struct {
		outs []Output
		late []Late
		want string
	}{
		"missing":         {outs[1:], late, "1 missing"},
		"duplicated":      {append(slices.Clone(outs), outs[0]), late, "1 duplicated"},
		"extra":           {append(slices.Clone(outs), Output{Key: "odd", WindowStart: ms(1e9), WindowEnd: ms(1e9 + 1000)}), late, "1 unexpected"},
		"counted twice":   {append(slices.Clone(outs[1:]), Output{Key: outs[0].Key, WindowStart: outs[0].WindowStart, WindowEnd: outs[0].WindowEnd, Count: outs[0].Count + 1, Sum: outs[0].Sum + 1}), late, "1 missing"},
		"late missing":    {outs, late[1:], "1 late missing"},
		"late duplicated": {outs, append(slices.Clone(late), late[0]), "1 late duplicated"},
		"late changed":    {outs, append([]Late{{Partition: late[0].Partition, Offset: late[0].Offset, Value: []byte("{}"), WindowStart: late[0].WindowStart, WindowEnd: late[0].WindowEnd, Watermark: late[0].Watermark, Windows: 1}}, late[1:]...), "late wrong"},
		"window open":     {outs, append([]Late{{Partition: late[0].Partition, Offset: late[0].Offset, Value: late[0].Value, WindowStart: late[0].WindowStart, WindowEnd: late[0].WindowEnd, Watermark: late[0].WindowEnd.Add(-time.Millisecond), Windows: 1}}, late[1:]...), "late wrong"},
		"not late":        {outs, append(slices.Clone(late), Late{Partition: 0, Offset: 0, Value: in[0].Value}), "1 late unexpected"},
	}
	for name, c := range cases {
		r := Compare(p, in, c.outs, c.late)
		if r.OK() || !strings.Contains(r.String(), c.want) {
			t.Errorf("%s: %v", name, r)
		}
	}
}
