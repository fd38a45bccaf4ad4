package metrics

import "time"

// Checkpoint describes one completed checkpoint.
type Checkpoint struct {
	// ID is the checkpoint's id (checkpoint.ID).
	ID uint64
	// Duration runs from the trigger to the commit of its transaction.
	Duration time.Duration
	// Alignment is the longest time a task held inputs back waiting for
	// this checkpoint's barrier from all of them.
	Alignment time.Duration
	// Bytes is what the checkpoint wrote to the internal topics: state
	// changes plus the checkpoint record.
	Bytes int64
}

// CheckpointCompleted records a checkpoint whose transaction committed.
// Call it right after the commit: its completion time is taken then.
func (m *Metrics) CheckpointCompleted(c Checkpoint) {
	m.checkpointDuration.Observe(c.Duration.Seconds())
	m.checkpointAlignment.Observe(c.Alignment.Seconds())
	m.checkpointSize.Observe(float64(c.Bytes))
	m.lastCheckpointID.Set(float64(c.ID))
	m.lastCheckpointTime.Set(float64(m.now().UnixNano()) / 1e9)
}

// CheckpointFailed counts a checkpoint aborted before its commit. reason is
// a twophase.AbortReason's String (timeout, declined, commit_failed,
// job_failed): a fixed word, never an error message.
func (m *Metrics) CheckpointFailed(reason string) {
	m.checkpointsFailed.WithLabelValues(reason).Inc()
}

// Restored records a restore from checkpoint id, which took took (reading
// the checkpoint record and rebuilding state). id is 0 when the job had no
// checkpoint yet. The completion time is left alone: the restored
// checkpoint was completed by an earlier process, maybe long ago, and the
// checkpoint-age alert is about this one making progress.
func (m *Metrics) Restored(id uint64, took time.Duration) {
	m.lastCheckpointID.Set(float64(id))
	m.restoreDuration.Set(took.Seconds())
}

// SetCheckpointInterval exports checkpoint.interval, which the
// checkpoint-age alert measures against.
func (m *Metrics) SetCheckpointInterval(d time.Duration) {
	m.checkpointInterval.Set(d.Seconds())
}

// SetTransactionTimeout exports kafka.transaction_timeout, which the
// transaction-age alert measures against.
func (m *Metrics) SetTransactionTimeout(d time.Duration) {
	m.txnTimeout.Set(d.Seconds())
}

// TransactionBegan marks a transaction open from now:
// pipeline_transaction_age_seconds grows from here, at every scrape, until
// TransactionCommitted or TransactionAborted.
func (m *Metrics) TransactionBegan() {
	m.txnBegan.Store(m.now().UnixNano())
}

// TransactionCommitted records a successful commit whose EndTxn round trip
// took took, and closes the open transaction.
func (m *Metrics) TransactionCommitted(took time.Duration) {
	m.txnBegan.Store(0)
	m.commitDuration.Observe(took.Seconds())
}

// TransactionAborted counts a transaction ended with abort (or abandoned
// to the next attempt's fencing), and closes it.
func (m *Metrics) TransactionAborted() {
	m.txnBegan.Store(0)
	m.aborts.Inc()
}

// Fenced counts that another instance fenced this one's producer. The
// process should keep serving /metrics for a couple of scrape intervals
// before it exits, or Prometheus never sees the count.
func (m *Metrics) Fenced() {
	m.txnBegan.Store(0)
	m.fenced.Inc()
}

func (m *Metrics) transactionAge() float64 {
	began := m.txnBegan.Load()
	if began == 0 {
		return 0
	}
	return max(float64(m.now().UnixNano()-began)/1e9, 0)
}

// Restarted counts a restart of the job from its last completed
// checkpoint. reason is a fixed word: the twophase.AbortReason that
// caused it, or a short class such as "kafka" or "task"; never an error
// message.
func (m *Metrics) Restarted(reason string) {
	m.restarts.WithLabelValues(reason).Inc()
}

// StatePiecesWritten counts n records written to the state topic as
// pieces of values too large for one record, at the commit that made
// them part of the state.
func (m *Metrics) StatePiecesWritten(n int) {
	if n > 0 {
		m.statePieces.Add(float64(n))
	}
}

// InternalRecordTooLarge counts a record of the job's state or
// checkpoint topic that could not be written to it even in pieces: the
// job stops rather than fail every attempt at its checkpoint.
func (m *Metrics) InternalRecordTooLarge(topic string) {
	m.tooLarge.WithLabelValues(topic).Inc()
}

// SetState sets the keyed state held by an operator (its stable id):
// keys, and bytes of keys and values.
func (m *Metrics) SetState(operator string, keys, bytes int64) {
	m.stateKeys.WithLabelValues(operator).Set(float64(keys))
	m.stateBytes.WithLabelValues(operator).Set(float64(bytes))
}

// SavepointCompleted counts a savepoint written, and how long it took.
func (m *Metrics) SavepointCompleted(took time.Duration) {
	m.savepoints.WithLabelValues("completed").Inc()
	m.savepointDuration.Set(took.Seconds())
}

// SavepointFailed counts a savepoint that could not be written.
func (m *Metrics) SavepointFailed() { m.savepoints.WithLabelValues("failed").Inc() }
