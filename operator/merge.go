package operator

import "math/bits"

// MergeStates returns a new state holding the aggregate of states, which
// hold the records of consecutive spans of time in order (the sessions a
// record bridges, earliest first): count, sum and avg add up, min and max
// compare, first keeps the earliest session's first value and last the
// latest session's last. The inputs are unchanged. It fails only when an
// integer sum would leave int64 (CodeOverflow, as Add does).
func (a *Aggregator) MergeStates(states ...*AggregateState) (*AggregateState, *RecordError) {
	out := a.NewState()
	for _, st := range states {
		if st.layout != a.layout {
			panic("operator: AggregateState of another Aggregator")
		}
		for i, acc := range out.accs {
			if err := mergeAcc(acc, st.accs[i]); err != nil {
				return nil, err.withStep(a.valuePath(i))
			}
		}
		if st.keyKind != keyString {
			out.keyKind = st.keyKind
		}
	}
	return out, nil
}

// mergeAcc adds the later accumulator o into a, both of one function.
func mergeAcc(a, o Accumulator) *RecordError {
	switch x := a.(type) {
	case *CountAcc:
		x.n += o.(*CountAcc).n
	case *SumAcc:
		y := o.(*SumAcc)
		if x.d == nil && y.d == nil {
			s, overflow := addInt64(x.i, y.i)
			if overflow {
				return x.overflow(y.i)
			}
			x.i = s
			return nil
		}
		d := promote(x.d, x.i).add(promote(y.d, y.i))
		x.i, x.d = 0, &d
	case *MinMaxAcc:
		y := o.(*MinMaxAcc)
		if !y.has {
			return nil
		}
		if x.has {
			c := promote(y.d, y.i).cmp(promote(x.d, x.i))
			if (x.max && c <= 0) || (!x.max && c >= 0) {
				return nil // ties keep the earlier value
			}
		}
		x.has, x.i, x.d = true, y.i, nil
		if y.d != nil {
			d := *y.d
			x.d = &d
		}
	case *AvgAcc:
		y := o.(*AvgAcc)
		x.n += y.n
		if x.d == nil && y.d == nil {
			var carry uint64
			x.lo, carry = bits.Add64(x.lo, y.lo, 0)
			x.hi += y.hi + int64(carry)
			return nil
		}
		d := x.decimal().add(y.decimal())
		x.d, x.hi, x.lo = &d, 0, 0
	case *FirstLastAcc:
		y := o.(*FirstLastAcc)
		if y.has && (x.last || !x.has) {
			x.has = true
			x.set(deepCopy(y.value()))
		}
	}
	return nil
}
