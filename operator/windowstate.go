package operator

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"time"

	"github.com/eoflow/pipeline/internal/wire"
)

// WindowState is one group key's open windows, sorted by start: each a
// window of the step's shape and the aggregate of the records in it. The
// runtime assigns records to windows, merges sessions and fires windows;
// this type only holds and encodes them.
type WindowState struct {
	Windows []OpenWindow
}

// OpenWindow is one window not yet fired: the half-open interval
// [Start, End) in epoch milliseconds and its aggregate.
type OpenWindow struct {
	Start, End int64
	State      *AggregateState
}

// windowStateVersion starts every WindowState encoding.
const windowStateVersion = 1

// AppendWindowState appends the changelog encoding of ws:
//
//	byte     encoding version (1)
//	uvarint  number of windows
//	per window, by start: varint start, varint end (epoch milliseconds),
//	         uvarint length, AggregateState encoding
func (a *Aggregator) AppendWindowState(b []byte, ws *WindowState) ([]byte, error) {
	b = append(b, windowStateVersion)
	b = binary.AppendUvarint(b, uint64(len(ws.Windows)))
	for _, w := range ws.Windows {
		b = binary.AppendVarint(b, w.Start)
		b = binary.AppendVarint(b, w.End)
		enc, err := w.State.AppendBinary(nil)
		if err != nil {
			return nil, err
		}
		b = binary.AppendUvarint(b, uint64(len(enc)))
		b = append(b, enc...)
	}
	return b, nil
}

// DecodeWindowState decodes an AppendWindowState encoding made with this
// aggregate's values (in any order). Corrupt input, or windows out of
// order, is an error, never a panic.
func (a *Aggregator) DecodeWindowState(b []byte) (*WindowState, error) {
	r := wire.NewReader(b)
	if v := r.Byte("version"); r.Err() == nil && v != windowStateVersion {
		r.Fail("version", fmt.Sprintf("unknown window state version %d", v))
	}
	n := r.Count("windows")
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("decode window state: %w", err)
	}
	ws := &WindowState{Windows: make([]OpenWindow, 0, n)}
	for i := 0; i < n; i++ {
		start, end := r.Varint("window start"), r.Varint("window end")
		enc := r.Bytes("window aggregate")
		if err := r.Err(); err != nil {
			return nil, fmt.Errorf("decode window state: %w", err)
		}
		if end <= start || (i > 0 && start < ws.Windows[i-1].Start) {
			return nil, fmt.Errorf("decode window state: window %d [%d, %d) is empty or out of order", i, start, end)
		}
		st, err := a.DecodeState(enc)
		if err != nil {
			return nil, fmt.Errorf("window [%d, %d): %w", start, end, err)
		}
		ws.Windows = append(ws.Windows, OpenWindow{Start: start, End: end, State: st})
	}
	if err := r.End("window state"); err != nil {
		return nil, fmt.Errorf("decode window state: %w", err)
	}
	return ws, nil
}

// AppendWindowOutput appends the output of one fired (or, with
// every_update, updated) window of groupKey:
// {"key":<group key>,"window_start":"<RFC 3339>","window_end":"<RFC 3339>","<name1>":<result1>,...}
// with times in UTC, e.g.
// {"key":"even","window_start":"2026-12-04T10:00:00Z","window_end":"2026-12-04T10:00:10Z","count":3,"sum":6}.
func (s *AggregateState) AppendWindowOutput(dst []byte, groupKey string, start, end int64) []byte {
	dst = append(dst, `{"key":`...)
	dst = appendKey(dst, groupKey, s.keyKind)
	dst = append(dst, `,"window_start":"`...)
	dst = AppendTime(dst, start)
	dst = append(dst, `","window_end":"`...)
	dst = AppendTime(dst, end)
	dst = append(dst, '"')
	return s.appendValues(dst)
}

// The epoch milliseconds RFC 3339 can write: years 0000 to 9999.
const (
	minRFC3339 = -62_167_219_200_000 // 0000-01-01T00:00:00Z
	maxRFC3339 = 253_402_300_799_999 // 9999-12-31T23:59:59.999Z
)

// AppendTime appends epoch milliseconds ms as RFC 3339 text in UTC, with
// as many fractional digits as it needs (none for whole seconds). A time
// outside the years 0000 to 9999, which RFC 3339 cannot hold (an event
// time of 1e15 is in the year 33658), is appended as its epoch
// milliseconds in decimal instead, so that any int64 prints as something
// a reader can parse back.
func AppendTime(dst []byte, ms int64) []byte {
	if ms < minRFC3339 || ms > maxRFC3339 {
		return strconv.AppendInt(dst, ms, 10)
	}
	return time.UnixMilli(ms).UTC().AppendFormat(dst, time.RFC3339Nano)
}
