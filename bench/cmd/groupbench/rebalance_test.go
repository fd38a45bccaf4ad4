package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestAssignmentsAfterReadsTheLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	log := `time=2026-12-06T10:00:00.000Z level=INFO msg="group assignment" job=j generation=1 kept=0 moved_here=16
time=2026-12-06T10:00:01.000Z level=INFO msg=restored job=j checkpoint=0 state_keys=0 partitions=16 workers=2 took=5ms
time=2026-12-06T10:00:10.000Z level=INFO msg="group assignment" job=j generation=2 kept=11 moved_here=0
time=2026-12-06T10:00:10.500Z level=INFO msg="group assignment" job=j generation=3 kept=10 moved_here=1
time=2026-12-06T10:00:11.000Z level=INFO msg=restored job=j checkpoint=9 state_keys=600000 partitions=10 workers=2 took=1.5s
`
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &proc{logPath: path}
	kept, moved, keys, keptKeys, took, err := p.assignmentsAfter(time.Date(2026, 12, 6, 10, 0, 5, 0, time.UTC))
	if err != nil || kept != 10 || moved != 1 || keys != 600000 || keptKeys != 0 || took != 1500*time.Millisecond {
		t.Fatalf("kept %d moved %d keys %d kept keys %d took %v err %v", kept, moved, keys, keptKeys, took, err)
	}
	// An attempt that kept its state says what it kept and what it read.
	more := `time=2026-12-06T10:00:20.000Z level=INFO msg="group assignment" job=j generation=4 kept=10 moved_here=3
time=2026-12-06T10:00:20.300Z level=INFO msg="kept the state of the partitions this process still owns" job=j kept_partitions="[0 1]" dropped_keys=0 kept_keys=500000 restored_keys=150000
time=2026-12-06T10:00:20.400Z level=INFO msg=restored job=j checkpoint=19 state_keys=650000 partitions=13 workers=2 took=400ms
`
	if err := os.WriteFile(path, []byte(log+more), 0o644); err != nil {
		t.Fatal(err)
	}
	kept, moved, keys, keptKeys, took, err = p.assignmentsAfter(time.Date(2026, 12, 6, 10, 0, 15, 0, time.UTC))
	if err != nil || kept != 10 || moved != 3 || keys != 150000 || keptKeys != 500000 || took != 400*time.Millisecond {
		t.Fatalf("kept %d moved %d keys %d kept keys %d took %v err %v", kept, moved, keys, keptKeys, took, err)
	}
}

func TestPauseIsTheLongestGapAroundTheEvent(t *testing.T) {
	at := func(s float64) time.Time { return time.Unix(1000, 0).Add(time.Duration(s * float64(time.Second))) }
	s := &checkpointSampler{times: map[string][]time.Time{"a": {at(0), at(1), at(5), at(6), at(7), at(20)}}}
	if got := s.pause("a", at(4), at(6.5)); got != 4*time.Second {
		t.Fatalf("pause %v, want 4s (from 1 to 5; the gap from 7 to 20 starts after the window)", got)
	}
}
