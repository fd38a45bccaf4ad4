package main

import (
	"fmt"
	"slices"
	"strings"
)

// joinRound is one round of the stream–table join: our contender's line
// and Kafka Streams' (bench/join.sh runs several, each a pair).
type joinRound struct{ ours, ks result }

// joinRounds pairs the i-th pipeline join line with the i-th Kafka
// Streams one, in file order; rounds either side lacks are left out.
func joinRounds(rs []result) []joinRound {
	var ours, ks []result
	for _, r := range rs {
		if r.Job != "join-enrich" {
			continue
		}
		switch r.Kind {
		case "pipeline":
			ours = append(ours, r)
		case "kstreams":
			ks = append(ks, r)
		}
	}
	out := make([]joinRound, min(len(ours), len(ks)))
	for i := range out {
		out[i] = joinRound{ours[i], ks[i]}
	}
	return out
}

// onlyJoins is whether every line is a join contender's.
func onlyJoins(rs []result) bool {
	for _, r := range rs {
		if r.Job != "join-enrich" {
			return false
		}
	}
	return len(rs) > 0
}

// ratio is a / b, or 0 when either is missing.
func ratio(a, b float64) float64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	return a / b
}

// spread is "median [min–max]" of v's non-zero values, with format f.
func spread(v []float64, f string) string {
	v = slices.DeleteFunc(slices.Clone(v), func(x float64) bool { return x == 0 })
	if len(v) == 0 {
		return "—"
	}
	slices.Sort(v)
	med := v[len(v)/2]
	if len(v)%2 == 0 {
		med = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return fmt.Sprintf(f+" ["+f+"–"+f+"]", med, v[0], v[len(v)-1])
}

// joins writes the stream–table join's rounds: each engine's numbers, then
// each round's ratios and their spread.
func joins(b *strings.Builder, rs []result) {
	rounds := joinRounds(rs)
	if len(rounds) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## Stream–table join\n\n")
	fmt.Fprintf(b, "Orders left-joined with a compacted customers table, one output per order with the customer's tier, exactly once at 1 s (`jobs/join-enrich.yaml`, `peers/kstreams/.../JoinEnrich.java`); every output was checked against the table. The restore: each contender started on a table of the given keys and no orders until the table is read to its end (the pipeline: its `table read to its end` log line; Kafka Streams, which reads a source KTable's topic as an input on a first start: its group's committed offsets at the table topic's end), stopped (Kafka Streams' state directory deleted, as `exactly_once_v2` does after a crash), and started again: restart → read is from the second start to the table read to its end (the pipeline: the log line; Kafka Streams: `RUNNING` and every partition of the source KTable restored from its own topic, `topology.optimization=all`). \"Own count\" is the engine's time for that read alone (the log line's `took`; Kafka Streams' restore listener, first partition's start to last one's end). Memory per key: VmRSS at the end of the restart minus VmRSS of a start on an empty table, over the keys; Kafka Streams keeps the table in RocksDB files, counted apart (disk bytes per key).\n\n")
	fmt.Fprintf(b, "| round | contender | records/s | CPU s / M records | table keys | first start → read, s | restart → read, s | own count, s | CPU s by then | VmRSS MiB (empty table) | RSS bytes / key | disk bytes / key |\n")
	fmt.Fprintf(b, "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	row := func(i int, r result) {
		if r.Error != "" {
			fmt.Fprintf(b, "| %d | %s | failed: %s | | | | | | | | | |\n", i, r.Name, strings.ReplaceAll(r.Error, "|", "/"))
			return
		}
		disk := "—"
		if r.TableDiskBytesPerKey != 0 {
			disk = fmt.Sprintf("%.0f", r.TableDiskBytesPerKey)
		}
		fmt.Fprintf(b, "| %d | %s | %.0f | %.1f | %d | %.2f | %.2f | %.2f | %.1f | %.0f (%.0f) | %.0f | %s |\n", i, r.Name, r.RecordsPerSec, r.CPUSecPerMillion,
			r.TableKeys, r.FirstLoadSeconds, r.RestoreSeconds, r.RestoreEngineSeconds, r.RestoreCPUSeconds, r.TableRSSMiB, r.BaseRSSMiB, r.TableBytesPerKey, disk)
	}
	for i, rd := range rounds {
		row(i+1, rd.ours)
		row(i+1, rd.ks)
	}
	fmt.Fprintf(b, "\nEach round, the pipeline against Kafka Streams (records/s: ours over theirs; CPU per record, restore time and RSS per key: theirs over ours, so above 1 is ours ahead):\n\n")
	fmt.Fprintf(b, "| round | records/s | CPU per record | restart → read | RSS per key |\n|---:|---:|---:|---:|---:|\n")
	var thr, cpu, rst, mem []float64
	for i, rd := range rounds {
		o, k := rd.ours, rd.ks
		if o.Error != "" || k.Error != "" {
			fmt.Fprintf(b, "| %d | failed | | | |\n", i+1)
			continue
		}
		x := []float64{ratio(o.RecordsPerSec, k.RecordsPerSec), ratio(k.CPUSecPerMillion, o.CPUSecPerMillion),
			ratio(k.RestoreSeconds, o.RestoreSeconds), ratio(k.TableBytesPerKey, o.TableBytesPerKey)}
		thr, cpu, rst, mem = append(thr, x[0]), append(cpu, x[1]), append(rst, x[2]), append(mem, x[3])
		fmt.Fprintf(b, "| %d | %.2f× | %.2f× | %.2f× | %.2f× |\n", i+1, x[0], x[1], x[2], x[3])
	}
	fmt.Fprintf(b, "| median [min–max] | %s | %s | %s | %s |\n", spread(thr, "%.2f×"), spread(cpu, "%.2f×"), spread(rst, "%.2f×"), spread(mem, "%.2f×"))
}
