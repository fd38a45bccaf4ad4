package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/internal/datagen"
	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
)

// The web UI in a real browser (headless Chromium, driven over the
// DevTools protocol by chromedp) against the parity-sum example running as
// a process on the broker: every page loads and shows the job's operators
// and numbers equal to its metrics, nothing is requested from another
// host, no script logs an error or throws, the keyboard reaches the graph,
// both color schemes apply, and a savepoint is refused without the token
// and taken with it.
//
// PIPELINE_UI_SCREENSHOTS=DIR also writes the screenshots of docs/ there,
// of the job under a steady input: go test -run TestWebUIInABrowser
// ./cmd/pipeline with KAFKA_BOOTSTRAP set, then copy them to docs/.
func TestWebUIInABrowser(t *testing.T) {
	const token = "ui-test-token"
	j := newJob(t, "exactly_once") // skips under -short
	browserPath := chromiumPath(t)
	shots := os.Getenv("PIPELINE_UI_SCREENSHOTS")
	if shots != "" {
		// Names that read well in the docs, unique on a shared broker.
		var b [2]byte
		_, _ = rand.Read(b[:])
		s := hex.EncodeToString(b[:])
		j.env["JOB_NAME"], j.env["INPUT_TOPIC"], j.env["OUTPUT_TOPIC"] = "parity-sum-"+s, "numbers-"+s, "parity-sums-"+s
		kafkatest.CreateTopic(t, j.conn0(), j.env["INPUT_TOPIC"], 4, nil)
		j.env["CHECKPOINT_INTERVAL"] = "1s"
	}
	savepoints := t.TempDir()
	j.env["ADMIN_LISTEN"] = "127.0.0.1:0"
	j.env["PIPELINE_ADMIN_TOKEN"] = token
	j.env["SAVEPOINT_DIR"] = savepoints
	const n = 2000
	j.numbers(1, n)
	// Records the job cannot use: the dead-letter tail must show them as
	// text, the markup too.
	bad := []string{"not json", `{"n": "<b>bold</b>"}`, "\xff\xfe"}
	cl := kafkatest.Client(t, j.conn0(), kgo.DefaultProduceTopic(j.env["INPUT_TOPIC"]))
	for _, v := range bad {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	j.start()
	j.awaitFinal(n, false)
	m := adminAddr.FindStringSubmatch(j.output())
	if m == nil {
		t.Fatal("no admin address in the log")
	}
	base := "http://" + m[1]
	// Everything read, written and visible: the numbers stand still.
	awaitJSON(t, base+"/api/v1/flow", func(f map[string]any) bool {
		return f["records_in"] == float64(n+len(bad)) && f["records_out"] == float64(n) && f["dead_letters"] == float64(len(bad))
	})
	metrics := scrapeMetrics(t, base)
	recordsIn := metrics.sum("pipeline_records_in_total", "")
	sums := metrics.sum("pipeline_operator_records_total", `operator="sums"`)
	if recordsIn != n+float64(len(bad)) || sums != n {
		t.Fatalf("metrics: %v records in, %v handed to sums", recordsIn, sums)
	}

	b := newBrowser(t, browserPath, base)
	b.run("open the UI", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`#overview-cards`)))
	// The first Tab reaches the skip link.
	b.run("tab", chromedp.KeyEvent("\t"))
	b.poll("the skip link is focused", `document.activeElement && document.activeElement.classList.contains("skip")`)

	b.poll("overview: records in as the metric says", fmt.Sprintf(`document.querySelector('[data-field="records-in"]')?.dataset.value === "%v"`, recordsIn))
	b.poll("overview: a rate", `/\d rec\/s/.test(document.querySelector('[data-field="records-in"] .value').textContent)`)
	b.poll("overview: dead letters", fmt.Sprintf(`document.querySelector('[data-field="dead-letters"]')?.dataset.value === "%d"`, len(bad)))
	b.poll("header: job and state", fmt.Sprintf(`document.getElementById("job-name").textContent === %q && document.getElementById("job-state").textContent === "running"`, j.env["JOB_NAME"]))

	b.page("graph")
	sink := "sink-0:" + j.env["OUTPUT_TOPIC"]
	for _, node := range []string{"numbers", "parity", "sums", sink} {
		b.poll("graph: node "+node, fmt.Sprintf(`!!document.querySelector('svg g[data-node=%q]')`, node))
	}
	b.poll("graph: sums's records as the metric says", fmt.Sprintf(`document.querySelector('td[data-node="sums"][data-field="records"]')?.dataset.value === "%v"`, sums))
	b.poll("graph: the source's records", fmt.Sprintf(`document.querySelector('td[data-node="numbers"][data-field="records"]')?.dataset.value === "%v"`, recordsIn))
	// A stateless step that no sink reads counts its records too: every
	// record read reaches parity (a value that is not JSON fails there),
	// and those that did not fail go on to sums.
	b.poll("graph: parity's records in", fmt.Sprintf(`document.querySelector('td[data-node="parity"][data-field="records_in"]')?.dataset.value === "%v"`, recordsIn))
	b.poll("graph: parity's records passed on", fmt.Sprintf(`document.querySelector('td[data-node="parity"][data-field="records"]')?.dataset.value === "%v"`, sums))
	b.poll("graph: parity's dead letters", fmt.Sprintf(`document.querySelector('td[data-node="parity"][data-field="dead_letters"]')?.dataset.value === "%d"`, len(bad)))
	b.poll("graph: the keys sums holds", `document.querySelector('td[data-node="sums"][data-field="keys"]')?.dataset.value === "2"`)
	// The keyboard reaches a box, and Enter shows its numbers.
	b.run("focus sums", chromedp.Focus(chromedp.CSS(`svg g[data-node="sums"]`)), chromedp.KeyEvent("\r"))
	b.poll("graph: Enter shows the box's numbers", `document.querySelector('main .result h2')?.textContent.includes("sums")`)

	b.page("checkpoints")
	b.poll("checkpoints: some completed", `document.querySelectorAll('[data-checkpoint]').length > 0 && !!document.querySelector('.chart svg rect')`)
	b.poll("checkpoints: times in the viewer's zone, UTC on hover", `document.querySelector('main time')?.title.endsWith(" UTC")`)

	b.page("eventtime")
	b.poll("event time: none in this job", `document.querySelector('main').textContent.includes("No source of this job has event_time")`)

	b.page("group")
	b.poll("group: single mode", `document.querySelector('main').textContent.includes("Single mode") && document.querySelector('main').textContent.includes("128")`)

	b.page("deadletters")
	b.poll("dead letters: the records, their codes and steps", `(() => { const t = document.getElementById("dead-letters").textContent;
		return t.includes("not json") && t.includes("decode") && t.includes("eval") && t.includes("steps[0].key_by") && t.includes("\\xff\\xfe"); })()`)
	b.poll("dead letters: markup shown as text", `document.getElementById("dead-letters").textContent.includes("<b>bold</b>") && !document.querySelector("#dead-letters b")`)

	b.page("config")
	b.poll("configuration: the effective file, the token masked", fmt.Sprintf(`(() => { const t = document.getElementById("config-yaml").textContent;
		return t.includes("name: %s") && t.includes("token: '********'") && !t.includes(%q); })()`, j.env["JOB_NAME"], token))

	b.page("savepoints")
	b.poll("savepoints: the list", `document.getElementById("sp-list").textContent.includes("None yet")`)
	b.run("take a savepoint without the token", chromedp.SetValue(chromedp.CSS("#sp-dir"), "refused"), chromedp.Click(chromedp.CSS("#sp-create")))
	b.poll("savepoints: refused without the token", `document.getElementById("sp-result").textContent.includes("Refused (401)")`)
	if _, err := os.Stat(filepath.Join(savepoints, "refused")); !os.IsNotExist(err) {
		t.Fatalf("a refused savepoint left %s: %v", filepath.Join(savepoints, "refused"), err)
	}
	b.run("take a savepoint with the token", chromedp.SendKeys(chromedp.CSS("#sp-token"), token),
		chromedp.SetValue(chromedp.CSS("#sp-dir"), "from-the-ui"), chromedp.Click(chromedp.CSS("#sp-create")))
	b.poll("savepoints: taken", `document.getElementById("sp-result").textContent.includes("complete")`)
	b.poll("savepoints: listed", `!!document.querySelector('[data-savepoint="from-the-ui"]')`)
	if _, err := os.Stat(filepath.Join(savepoints, "from-the-ui", "savepoint.json")); err != nil {
		t.Fatalf("the savepoint taken from the UI is not on disk: %v", err)
	}

	// Both schemes apply.
	for scheme, bg := range map[string]string{"dark": "rgb(13, 17, 23)", "light": "rgb(247, 248, 250)"} {
		b.run("prefers-color-scheme: "+scheme, emulateScheme(scheme))
		b.poll(scheme+" background", fmt.Sprintf(`getComputedStyle(document.body).backgroundColor === %q`, bg))
	}
	b.check()

	if shots != "" {
		b.screenshots(t, j, shots)
	}
}

// conn0 is the broker's bootstrap addresses.
func (j *job) conn0() []string { return strings.Split(j.env["KAFKA_BROKERS"], ",") }

// chromiumPath finds the browser: $CHROMIUM, else chromium on PATH.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium on PATH: apt-get install chromium (.ci/run does), or set $CHROMIUM")
	return ""
}

// browser is a headless Chromium with one tab, and what the tab reported:
// console errors, exceptions, and requests to other hosts.
type browser struct {
	t    *testing.T
	ctx  context.Context
	base string
	mu   sync.Mutex
	bad  []string
}

func newBrowser(t *testing.T, path, base string) *browser {
	t.Helper()
	b := &browser{t: t, base: base}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.WindowSize(1200, 800),
		chromedp.Flag("disable-gpu", true), chromedp.Flag("lang", "en-US"))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc, chromedp.WithListener(b.listen))
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b.ctx = ctx
	// The first call starts the browser, which lives as long as its
	// context: this one, without a timeout.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1200, 760)); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return b
}

// listen records what must not happen.
func (b *browser) listen(ev any) {
	var bad string
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
			var args []string
			for _, a := range ev.Args {
				args = append(args, string(a.Value)+a.Description)
			}
			bad = fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(args, " "))
		}
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		bad = "exception: " + d.Text
		if d.Exception != nil {
			bad += " " + d.Exception.Description
		}
	case *cdplog.EventEntryAdded:
		// The browser's own errors: a Content-Security-Policy violation
		// (a script or style from another host) among them. Failed
		// requests are the page's business: the refused savepoint is one.
		if e := ev.Entry; e.Level == cdplog.EntryLevelError && e.Source != cdplog.EntrySourceNetwork {
			bad = fmt.Sprintf("browser log (%s): %s %s", e.Source, e.Text, e.URL)
		}
	case *network.EventRequestWillBeSent:
		if u := ev.Request.URL; !strings.HasPrefix(u, b.base+"/") && !strings.HasPrefix(u, "data:") {
			bad = "a request to another host: " + u
		}
	}
	if bad != "" {
		b.mu.Lock()
		b.bad = append(b.bad, bad)
		b.mu.Unlock()
	}
}

// check fails the test for anything the page reported.
func (b *browser) check() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.bad {
		b.t.Error(s)
	}
}

func (b *browser) run(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.check()
		b.t.Fatalf("%s: %v", what, err)
	}
}

// poll waits until the expression is true in the page.
func (b *browser) poll(what, expr string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(10*time.Second), chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
		main, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.querySelector("main")?.innerText ?? ""`))
		b.check()
		b.t.Fatalf("%s: %v\nthe page:\n%.3000s", what, err, main)
	}
}

// page follows the page's link, as a user does.
func (b *browser) page(name string) {
	b.t.Helper()
	b.run("go to "+name, chromedp.Click(chromedp.CSS(`#nav a[data-page="`+name+`"]`)))
	b.poll("on "+name, fmt.Sprintf(`document.querySelector('#nav a[aria-current="page"]')?.dataset.page === %q`, name))
}

func emulateScheme(scheme string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}},
		})
		return chromedp.Void{}, err
	}
}

// screenshots writes the pages of docs/ into dir, with the job under a
// steady input, so the rates are not 0.
func (b *browser) screenshots(t *testing.T, j *job, dir string) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = datagen.Numbers(ctx, j.conn, datagen.Options{Topic: j.env["INPUT_TOPIC"], From: 2001, Rate: 2500})
	}()
	defer func() { cancel(); <-done }()
	b.run("light", emulateScheme("light"))
	time.Sleep(4 * time.Second) // a few checkpoints and polls under load
	for _, p := range []string{"overview", "graph", "checkpoints", "deadletters", "savepoints"} {
		b.page(p)
		time.Sleep(2500 * time.Millisecond) // two polls: rates
		png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "ui-"+p+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// awaitJSON polls url until ok holds for its JSON answer.
func awaitJSON(t *testing.T, url string, ok func(map[string]any) bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var last map[string]any
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			last = nil
			_ = json.NewDecoder(resp.Body).Decode(&last)
			resp.Body.Close()
			if last != nil && ok(last) {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s never became what the test waits for; last: %v", url, last)
}

// promText is a scrape, for sums of series.
type promText string

func scrapeMetrics(t *testing.T, base string) promText {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return promText(body)
}

// sum adds the samples of family whose labels contain match.
func (p promText) sum(family, match string) float64 {
	total := 0.0
	sc := bufio.NewScanner(strings.NewReader(string(p)))
	for sc.Scan() {
		line := sc.Text()
		name, rest, ok := strings.Cut(line, "{")
		if !ok || name != family || !strings.Contains(rest, match) {
			continue
		}
		if i := strings.LastIndexByte(rest, ' '); i >= 0 {
			if v, err := strconv.ParseFloat(rest[i+1:], 64); err == nil {
				total += v
			}
		}
	}
	return total
}
