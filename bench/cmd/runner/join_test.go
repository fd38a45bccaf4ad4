package main

import (
	"strings"
	"testing"
	"time"
)

func TestJoinCheckJudgesEachOutputByTheTable(t *testing.T) {
	j := newJoinCheck(map[string]string{"c1": "gold", "c2": "silver"})
	j.check([]byte("c1"), []byte(`{"id":1,"customer":"c1","n":3,"tier":"gold"}`))
	j.check([]byte("x9"), []byte(`{"id":2,"customer":"x9","n":4,"tier":"none"}`))
	if err := j.err(); err != nil {
		t.Fatalf("right outputs judged wrong: %v", err)
	}
	j.check([]byte("c2"), []byte(`{"id":3,"customer":"c2","n":5,"tier":"gold"}`))   // wrong tier
	j.check([]byte("c1"), []byte(`{"id":4,"customer":"c2","n":5,"tier":"silver"}`)) // wrong key
	j.check([]byte("c3"), []byte(`{"id":5,"customer":"c3","n":5,"tier":"bronze"}`)) // not in the table
	j.check([]byte("c1"), []byte(`{"id":6,"customer":"c1","n":5}`))                 // no tier
	err := j.err()
	if err == nil || !strings.HasPrefix(err.Error(), "4 outputs disagree") || !strings.Contains(err.Error(), `"id":3`) {
		t.Fatalf("err = %v, want 4 wrong outputs, the first id 3", err)
	}
	if got := j.tally(); got["gold"] != 2 || got["none"] != 1 || got["silver"] != 1 || got["bronze"] != 1 || got[""] != 1 {
		t.Errorf("tally %v", got)
	}
}

func TestTableLoadedReadsEachEnginesLine(t *testing.T) {
	pipe := `time=2026-12-06T16:44:11.000Z level=INFO msg="admin listening" metrics=http://127.0.0.1:1/metrics
time=2026-12-06T16:44:11.100Z level=INFO msg="table read to its end" job=j table=customers topic=t partitions=8 keys=99000 bytes=2475000 took=113ms
`
	if d, _, ok := tableLoaded("pipeline", []byte(pipe)); !ok || d != 113*time.Millisecond {
		t.Errorf("pipeline: %v %v, want 113ms", d, ok)
	}
	if _, _, ok := tableLoaded("pipeline", []byte(strings.SplitN(pipe, "\n", 2)[0])); ok {
		t.Error("pipeline: loaded before its line")
	}
	ks := "bench: RUNNING after 2861 ms restored=103000 restore_ms=205 partitions=8/8 store_keys~99000 rss_kib=154000 heap_used_mib=80 heap_committed_mib=120\n"
	if d, n, ok := tableLoaded("kstreams", []byte(ks)); !ok || d != 205*time.Millisecond || n != 103000 {
		t.Errorf("kstreams: %v %d %v, want 205ms and 103000 records", d, n, ok)
	}
	if _, _, ok := tableLoaded("kstreams", []byte("something else\n")); ok {
		t.Error("kstreams: loaded without its line")
	}
}
