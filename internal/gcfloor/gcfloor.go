package gcfloor

import (
	"context"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Percent is the GOGC that makes the heap goal after a collection that
// left live bytes at least floor bytes, and never below base (the GOGC
// the process runs with otherwise): Go's goal is live × (1 + GOGC/100).
// It is base when nothing was live yet (the first cycle has not run),
// and at most maxPercent: Go keeps GOGC in an int32, and a live heap of a
// few bytes would ask for more.
func Percent(live, floor uint64, base int) int {
	if live == 0 || floor <= live {
		return base
	}
	// Rounded up, so the goal reaches the floor.
	p := ((floor-live)*100 + live - 1) / live
	return max(int(min(p, maxPercent)), base)
}

// maxPercent bounds Percent: a goal a hundred times the live heap, which
// reaches any floor once a few MB are live.
const maxPercent = 10_000

// Wanted reports whether the process's environment leaves the collector
// to this package: neither GOGC nor GOMEMLIMIT is set.
func Wanted() bool {
	return os.Getenv("GOGC") == "" && os.Getenv("GOMEMLIMIT") == ""
}

// base is the GOGC Go runs with when the environment sets none.
const base = 100

// Run keeps the heap goal at least floor bytes until ctx ends, looking
// for a finished collection every poll; then it sets GOGC back to the
// default. It is the only thing in the process that may set GOGC
// meanwhile.
func Run(ctx context.Context, floor uint64, poll time.Duration) {
	defer debug.SetGCPercent(base)
	samples := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/gc/heap/live:bytes"}}
	var seen uint64
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		metrics.Read(samples)
		if cycles := samples[0].Value.Uint64(); cycles != seen {
			seen = cycles
			debug.SetGCPercent(Percent(samples[1].Value.Uint64(), floor, base))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
