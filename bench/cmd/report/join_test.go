package main

import (
	"strings"
	"testing"
)

func TestJoinsPairsRoundsAndSpreadsRatios(t *testing.T) {
	rs := []result{
		{Name: "pipeline-keyed-sum-exactly_once-1s", Kind: "pipeline", Job: "keyed-sum", RecordsPerSec: 1},
		{Name: "p", Kind: "pipeline", Job: "join-enrich", RecordsPerSec: 300, CPUSecPerMillion: 2, RestoreSeconds: 1, TableBytesPerKey: 100},
		{Name: "k", Kind: "kstreams", Job: "join-enrich", RecordsPerSec: 100, CPUSecPerMillion: 20, RestoreSeconds: 4, TableBytesPerKey: 50},
		{Name: "k", Kind: "kstreams", Job: "join-enrich", RecordsPerSec: 100, CPUSecPerMillion: 10, RestoreSeconds: 2, TableBytesPerKey: 50},
		{Name: "p", Kind: "pipeline", Job: "join-enrich", RecordsPerSec: 200, CPUSecPerMillion: 2, RestoreSeconds: 1, TableBytesPerKey: 100},
		{Name: "p", Kind: "pipeline", Job: "join-enrich", RecordsPerSec: 500, CPUSecPerMillion: 1, RestoreSeconds: 1, TableBytesPerKey: 100},
	}
	if got := len(joinRounds(rs)); got != 2 {
		t.Fatalf("%d rounds, want 2 (the third pipeline line has no Kafka Streams pair)", got)
	}
	var b strings.Builder
	joins(&b, rs)
	for _, want := range []string{
		"| 1 | 3.00× | 10.00× | 4.00× | 0.50× |",
		"| 2 | 2.00× | 5.00× | 2.00× | 0.50× |",
		"| median [min–max] | 2.50× [2.00×–3.00×] | 7.50× [5.00×–10.00×] | 3.00× [2.00×–4.00×] | 0.50× [0.50×–0.50×] |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no line %q in\n%s", want, b.String())
		}
	}
}
