package operator

import (
	"math"
	"strconv"
	"time"
)

// EventTime evaluates a source's event-time expression on r, an input
// record not yet through Process: it decodes r as Process would (so
// Process does not decode it again) and returns the time in epoch
// milliseconds. The expression must give epoch milliseconds (an integer,
// or a float with an integral value) or RFC 3339 text; anything else is a
// RecordError (CodeType) naming the expression, and the record goes to the
// dead-letter topic like any record a step cannot evaluate. Call
// AlsoRead(e) once first, so the chain decodes the fields e reads.
func (c *Chain) EventTime(r *Record, e *Expr) (int64, *RecordError) {
	if err := r.decodeFields(&c.dec, e.path, c.need); err != nil {
		return 0, err
	}
	v, err := e.run(&c.vm, r)
	if err != nil {
		return 0, err
	}
	ms, terr := EventTimeOf(v)
	if terr != nil {
		return 0, terr.withStep(e.path)
	}
	return ms, nil
}

// EventTimeOf converts an event-time value to epoch milliseconds: integers
// are milliseconds, strings are RFC 3339 (any precision; below a
// millisecond is truncated towards the past, as epoch milliseconds are)
// or decimal milliseconds, a time.Time is itself. The error has no Step.
func EventTimeOf(v any) (int64, *RecordError) {
	ms, err := eventTimeOf(v)
	if err != nil {
		return 0, err
	}
	return ms, CheckEventTime(ms)
}

// CheckEventTime refuses the two event times the window arithmetic
// cannot represent: math.MinInt64 is the "no watermark yet" value, so a
// partition whose record carries it would never start its clock, and no
// window can contain math.MaxInt64 (a window ends at an exclusive bound,
// and a session's would be empty). Both are a RecordError (CodeType), so
// the record goes to the dead letters instead of corrupting the windows.
func CheckEventTime(ms int64) *RecordError {
	if ms == math.MinInt64 || ms == math.MaxInt64 {
		return &RecordError{Code: CodeType, Reason: "event time " + strconv.FormatInt(ms, 10) + " is outside the representable range (the smallest and largest int64 are reserved)"}
	}
	return nil
}

func eventTimeOf(v any) (int64, *RecordError) {
	fail := func(why string) (int64, *RecordError) {
		return 0, &RecordError{Code: CodeType, Reason: "event time " + why}
	}
	switch x := v.(type) {
	case time.Time:
		return x.UnixMilli(), nil
	case string:
		if t, err := time.Parse(time.RFC3339Nano, x); err == nil {
			return t.UnixMilli(), nil
		}
		if n, err := strconv.ParseInt(x, 10, 64); err == nil {
			return n, nil
		}
		return fail("must be RFC 3339 text (e.g. 2026-12-04T10:00:00Z) or epoch milliseconds, got " + strconv.Quote(x))
	case nil:
		return fail("is null")
	case Decimal:
		if ms, ok := x.Int64(); ok {
			return ms, nil
		}
		return fail("must be whole epoch milliseconds, got " + x.String())
	}
	n, ok := toNumber(v)
	if !ok {
		return fail("must be epoch milliseconds or RFC 3339 text, got " + typeName(v))
	}
	if !n.isFloat {
		return n.i, nil
	}
	if x := n.f; x != math.Trunc(x) || x < math.MinInt64 || x >= math.MaxInt64 {
		return fail("must be whole epoch milliseconds, got " + strconv.FormatFloat(x, 'g', -1, 64))
	}
	return int64(n.f), nil
}
