package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
)

// groupUIJob is a stateless group-mode job (a filter), so that its
// processes start in a moment.
const groupUIJob = `name: ${JOB_NAME}
kafka: {brokers: ["${KAFKA_BROKERS}"]}
scale: {mode: group, session_timeout: 6s}
checkpoint: {interval: 200ms}
sources: [{id: numbers, topics: ["${INPUT_TOPIC}"], start: earliest}]
steps: [{id: evens, filter: 'n % 2 == 0'}]
sinks: [{topic: "${OUTPUT_TOPIC}"}]
admin: {listen: "${ADMIN_LISTEN}"}
`

// In group mode the web UI of one process shows the other: process a's
// group page lists b with the partitions b reports itself and b's
// records, its overview and graph the whole job's records; once b is
// killed, a's page says b is unreachable instead of leaving it out.
func TestWebUIGroupShowsEveryProcess(t *testing.T) {
	k := kafkatest.Broker(t) // skips under -short
	browserPath := chromiumPath(t)
	g := newGroupJob(t, k.Bootstrap())
	g.config = filepath.Join(t.TempDir(), "group.yaml")
	if err := os.WriteFile(g.config, []byte(groupUIJob), 0o644); err != nil {
		t.Fatal(err)
	}
	g.env["ADMIN_LISTEN"] = "127.0.0.1:0"
	shots := os.Getenv("PIPELINE_UI_SCREENSHOTS")
	if shots != "" {
		// Names that read well in the docs, unique on a shared broker.
		var r [2]byte
		_, _ = rand.Read(r[:])
		s := hex.EncodeToString(r[:])
		g.env["JOB_NAME"], g.env["INPUT_TOPIC"], g.env["OUTPUT_TOPIC"] = "evens-"+s, "numbers-"+s, "evens-"+s+"-out"
		kafkatest.CreateTopic(t, k.Bootstrap(), g.env["INPUT_TOPIC"], 6, nil)
	}
	a, b := g.member("a"), g.member("b")
	a.start()
	b.start()
	base := map[string]string{}
	deadline := time.Now().Add(time.Minute)
	for id, m := range map[string]*job{"a": a, "b": b} {
		for base[id] == "" {
			if s := adminAddr.FindStringSubmatch(m.output()); s != nil {
				base[id] = "http://" + s[1]
			} else if time.Now().After(deadline) {
				t.Fatalf("no admin address in %s's log", id)
			} else {
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	// Both in, then the input, so each reads a share.
	awaitJSON(t, base["a"]+"/api/v1/group", func(r map[string]any) bool { return bothIn(r) })
	const n = 1000
	a.numbers(1, n)
	var bAssigned []string
	var bIn float64
	awaitJSON(t, base["a"]+"/api/v1/group", func(r map[string]any) bool {
		if !bothIn(r) || r["flow"].(map[string]any)["records_in"] != float64(n) {
			return false
		}
		pb := r["processes"].([]any)[1].(map[string]any)
		bIn = pb["flow"].(map[string]any)["records_in"].(float64)
		bAssigned = nil
		for _, p := range pb["job"].(map[string]any)["group"].(map[string]any)["assigned"].([]any) {
			bAssigned = append(bAssigned, p.(string))
		}
		return true
	})
	// What b says of itself.
	awaitJSON(t, base["b"]+"/api/v1/job", func(r map[string]any) bool {
		var own []string
		for _, p := range r["group"].(map[string]any)["assigned"].([]any) {
			own = append(own, p.(string))
		}
		return slices.Equal(own, bAssigned)
	})
	if bIn == 0 || bIn == n {
		t.Fatalf("b read %v of %d records: the partitions are not shared", bIn, n)
	}

	br := newBrowser(t, browserPath, base["a"])
	br.run("open a's UI", chromedp.Navigate(base["a"]+"/ui/#/group"), chromedp.WaitVisible(chromedp.CSS(`main`)))
	br.poll("group: b is listed with its partitions", fmt.Sprintf(`(() => { const c = document.querySelector('[data-process="b"][data-field="assigned"]');
		return !!c && %s.every(p => c.textContent.includes(p)); })()`, partitionWords(bAssigned)))
	br.poll("group: b's records", fmt.Sprintf(`document.querySelector('td[data-process="b"][data-field="records-in"]')?.dataset.value === "%v"`, bIn))
	br.poll("group: a is this one", `document.querySelector('td[data-process="a"][data-field="state"]')?.textContent === "running" && document.querySelector('main').textContent.includes("(this one)")`)
	if shots != "" {
		br.run("light", emulateScheme("light"))
		time.Sleep(2500 * time.Millisecond) // two polls: rates
		png, err := chromedp.Run(br.ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(shots, "ui-group.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	br.page("overview")
	br.poll("overview: the whole job's records in", fmt.Sprintf(`document.querySelector('[data-field="records-in"]')?.dataset.value === "%d" && !!document.querySelector('[data-field="job-wide"]')`, n))
	br.page("graph")
	br.poll("graph: the whole job's filter", fmt.Sprintf(`document.querySelector('td[data-node="evens"][data-field="records_in"]')?.dataset.value === "%d" && document.querySelector('td[data-node="evens"][data-field="dropped"]')?.dataset.value === "%d"`, n, n/2))

	b.kill()
	br.page("group")
	br.poll("group: b, killed, is unreachable, not left out", `document.querySelector('[data-process="b"][data-field="unreachable"]')?.textContent.includes("unreachable")`)
	br.check()
}

// bothIn reports whether an answer of /api/v1/group shows a and b, both
// answering, both with partitions.
func bothIn(r map[string]any) bool {
	ps, _ := r["processes"].([]any)
	if r["complete"] != true || len(ps) != 2 {
		return false
	}
	for i, id := range []string{"a", "b"} {
		p := ps[i].(map[string]any)
		if p["instance"] != id || p["reachable"] != true {
			return false
		}
		gr, _ := p["job"].(map[string]any)["group"].(map[string]any)
		if as, _ := gr["assigned"].([]any); len(as) == 0 {
			return false
		}
	}
	return true
}

// partitionWords is a JavaScript array of the partition numbers of
// "topic/partition" names, as the group page lists them.
func partitionWords(tps []string) string {
	var ps []string
	for _, tp := range tps {
		ps = append(ps, fmt.Sprintf("%q", tp[strings.LastIndexByte(tp, '/')+1:]))
	}
	return "[" + strings.Join(ps, ", ") + "]"
}
