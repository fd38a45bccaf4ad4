package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// fakeClock returns a Metrics reading a clock the test moves.
func fakeClock(t *testing.T) (*Metrics, *time.Time) {
	t.Helper()
	m := New(nil, "j")
	now := time.Unix(1_700_000_000, 0)
	m.now = func() time.Time { return now }
	return m, &now
}

// The open transaction's age is computed at scrape time: it keeps growing
// while nothing happens, which is exactly when the alert on it must fire.
func TestTransactionAgeGrowsWhileStuck(t *testing.T) {
	m, now := fakeClock(t)
	end := map[string]func(){
		"commit": func() { m.TransactionCommitted(time.Millisecond) },
		"abort":  m.TransactionAborted,
		"fenced": m.Fenced,
	}
	for name, endTxn := range end {
		if got := m.transactionAge(); got != 0 {
			t.Fatalf("%s: age %v with no open transaction, want 0", name, got)
		}
		m.TransactionBegan()
		*now = now.Add(45 * time.Second)
		if got := m.transactionAge(); got != 45 {
			t.Errorf("%s: age %v after 45s, want 45", name, got)
		}
		*now = now.Add(10 * time.Second)
		if got := m.transactionAge(); got != 55 {
			t.Errorf("%s: age %v after 55s with no event, want 55", name, got)
		}
		endTxn()
		if got := m.transactionAge(); got != 0 {
			t.Errorf("%s: age %v after the transaction ended, want 0", name, got)
		}
	}
}

// The completion time is this process's clock at CheckpointCompleted; a
// restore sets the id but not the time, because the restored checkpoint
// says nothing about this process making progress.
func TestCheckpointCompletionTime(t *testing.T) {
	m, now := fakeClock(t)
	m.Restored(41, 2*time.Second)
	if got := gauge(t, m.lastCheckpointTime); got != 0 {
		t.Errorf("completion time %v after a restore, want 0 (none by this process)", got)
	}
	if got := gauge(t, m.lastCheckpointID); got != 41 {
		t.Errorf("last id %v after restoring 41", got)
	}
	*now = now.Add(1500 * time.Millisecond)
	m.CheckpointCompleted(Checkpoint{ID: 42, Duration: 30 * time.Millisecond})
	if got, want := gauge(t, m.lastCheckpointTime), 1_700_000_001.5; got != want {
		t.Errorf("completion time %v, want %v", got, want)
	}
	if got := gauge(t, m.lastCheckpointID); got != 42 {
		t.Errorf("last id %v, want 42", got)
	}
	if got := gauge(t, m.restoreDuration); got != 2 {
		t.Errorf("restore duration %v, want 2", got)
	}
}

func gauge(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	var d dto.Metric
	if err := g.Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.GetGauge().GetValue()
}
