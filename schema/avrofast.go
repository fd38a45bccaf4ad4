package schema

import (
	"encoding/binary"
	"math"
	"strconv"

	"github.com/hamba/avro/v2"

	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/operator"
)

// The fast way from a job's JSON output to Avro. An aggregate's output
// reaches a sink as the JSON the job writes for every format (compact, the
// fields in order); the general way decodes it into a map (numbers read
// exactly) and encodes that. For a record of plain fields (strings,
// longs, ints, doubles, booleans, and those or null) written in the
// schema's order, as every derived schema's outputs are, this plan reads
// the JSON and writes the Avro in one pass, allocating nothing: measured
// on bench/'s keyed sum it was most of what the Avro output cost. Any
// other JSON (an escape in a string, a fraction in an integer field, a
// field out of order or missing, a decimal) it declines, and the general
// way encodes it, or explains why it cannot.

type fastKind uint8

const (
	fastString fastKind = 1 + iota
	fastLong
	fastInt
	fastDouble
	fastBool
)

type fastField struct {
	// member is `"name":` as it appears in the JSON.
	member []byte
	kind   fastKind
	// nullable: a union of null (index nullIndex) and kind (index
	// valueIndex).
	nullable              bool
	nullIndex, valueIndex int64
}

type fastPlan struct{ fields []fastField }

// compileFast is the plan of aw's record, or nil when a field is not
// plain.
func compileFast(aw *avroWriter) *fastPlan {
	if aw.fields == nil {
		return nil
	}
	p := &fastPlan{}
	for i, f := range aw.fields {
		ff := fastField{member: []byte(strconv.Quote(f.Name()) + ":")}
		if i > 0 {
			ff.member = append([]byte{','}, ff.member...)
		}
		t := deref(f.Type())
		if u, ok := t.(*avro.UnionSchema); ok {
			types := u.Types()
			if len(types) != 2 || !u.Nullable() {
				return nil
			}
			ni, vi := u.Indices()
			ff.nullable, ff.nullIndex, ff.valueIndex = true, int64(ni), int64(vi)
			t = deref(types[vi])
		}
		ps, ok := t.(*avro.PrimitiveSchema)
		if !ok || logical(ps) != "" {
			return nil
		}
		switch ps.Type() {
		case avro.String:
			ff.kind = fastString
		case avro.Long:
			ff.kind = fastLong
		case avro.Int:
			ff.kind = fastInt
		case avro.Double:
			ff.kind = fastDouble
		case avro.Boolean:
			ff.kind = fastBool
		default:
			return nil
		}
		p.fields = append(p.fields, ff)
	}
	return p
}

// append appends the Avro of js, or reports false (nothing appended).
func (p *fastPlan) append(dst, js []byte) ([]byte, bool) {
	start := len(dst)
	if len(js) < 2 || js[0] != '{' {
		return dst, false
	}
	pos := 1
	for _, f := range p.fields {
		if len(js)-pos < len(f.member) || string(js[pos:pos+len(f.member)]) != string(f.member) {
			return dst[:start], false
		}
		pos += len(f.member)
		if pos >= len(js) {
			return dst[:start], false
		}
		if js[pos] == 'n' {
			if !f.nullable || len(js)-pos < 4 || string(js[pos:pos+4]) != "null" {
				return dst[:start], false
			}
			dst = binary.AppendVarint(dst, f.nullIndex)
			pos += 4
			continue
		}
		if f.nullable {
			dst = binary.AppendVarint(dst, f.valueIndex)
		}
		var ok bool
		switch f.kind {
		case fastString:
			dst, pos, ok = fastStr(dst, js, pos)
		case fastLong, fastInt:
			var v int64
			v, pos, ok = fastInt64(js, pos)
			if ok && f.kind == fastInt && (v < math.MinInt32 || v > math.MaxInt32) {
				ok = false
			}
			dst = binary.AppendVarint(dst, v)
		case fastDouble:
			end := pos
			for end < len(js) && js[end] != ',' && js[end] != '}' {
				end++
			}
			var fl float64
			var err error
			fl, err = strconv.ParseFloat(string(js[pos:end]), 64)
			ok, pos = err == nil, end
			dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(fl))
		case fastBool:
			switch {
			case len(js)-pos >= 4 && string(js[pos:pos+4]) == "true":
				dst, pos, ok = append(dst, 1), pos+4, true
			case len(js)-pos >= 5 && string(js[pos:pos+5]) == "false":
				dst, pos, ok = append(dst, 0), pos+5, true
			}
		}
		if !ok {
			return dst[:start], false
		}
	}
	if pos != len(js)-1 || js[pos] != '}' {
		return dst[:start], false
	}
	return dst, true
}

// fastStr writes the JSON string at js[pos] if it has no escape.
func fastStr(dst, js []byte, pos int) ([]byte, int, bool) {
	if js[pos] != '"' {
		return dst, pos, false
	}
	end := pos + 1
	for end < len(js) && js[end] != '"' {
		if js[end] == '\\' || js[end] < 0x20 {
			return dst, pos, false
		}
		end++
	}
	if end >= len(js) {
		return dst, pos, false
	}
	dst = binary.AppendVarint(dst, int64(end-pos-1))
	return append(dst, js[pos+1:end]...), end + 1, true
}

// fastInt64 reads a JSON integer (no fraction or exponent) that fits.
func fastInt64(js []byte, pos int) (int64, int, bool) {
	neg := false
	if pos < len(js) && js[pos] == '-' {
		neg = true
		pos++
	}
	start := pos
	var u uint64
	for pos < len(js) && js[pos] >= '0' && js[pos] <= '9' {
		if u > (math.MaxUint64-9)/10 {
			return 0, pos, false
		}
		u = u*10 + uint64(js[pos]-'0')
		pos++
	}
	if pos == start || (pos < len(js) && (js[pos] == '.' || js[pos] == 'e' || js[pos] == 'E')) {
		return 0, pos, false
	}
	switch {
	case neg && u <= 1<<63:
		return -int64(u), pos, true
	case !neg && u <= math.MaxInt64:
		return int64(u), pos, true
	}
	return 0, pos, false
}

// IntOutput is the sink's operator.IntOutput for an aggregate with these
// value names and functions, or nil: the sink's schema must be a record
// of a string "key" and then the values, in order, each a long or a
// union of null and long (count and sum never null). The integer path
// then writes its outputs straight as this sink's Avro.
func (k *Sink) IntOutput(names []string, funcs []config.AggregateFunc) operator.IntOutput {
	if k.avro == nil || len(k.avro.fields) != len(names)+1 || k.avro.fields[0].Name() != "key" {
		return nil
	}
	if ps, ok := deref(k.avro.fields[0].Type()).(*avro.PrimitiveSchema); !ok || ps.Type() != avro.String || logical(ps) != "" {
		return nil
	}
	o := &intOutput{}
	o.header, _ = header.AppendEncode(nil, k.id, nil)
	for i, name := range names {
		f := k.avro.fields[i+1]
		if f.Name() != name || funcs[i] == config.AggAvg {
			return nil
		}
		v := intValue{nullIndex: -1}
		t := deref(f.Type())
		if u, ok := t.(*avro.UnionSchema); ok {
			if len(u.Types()) != 2 || !u.Nullable() {
				return nil
			}
			ni, vi := u.Indices()
			v.nullIndex, v.valueIndex = int64(ni), int64(vi)
			t = deref(u.Types()[vi])
		}
		if ps, ok := t.(*avro.PrimitiveSchema); !ok || ps.Type() != avro.Long || logical(ps) != "" {
			return nil
		}
		o.values = append(o.values, v)
	}
	return o
}

type intValue struct {
	nullIndex, valueIndex int64 // nullIndex -1: not nullable
}

// intOutput writes {key, values...} as framed Avro.
type intOutput struct {
	header []byte
	values []intValue
}

func (o *intOutput) AppendIntOutput(dst []byte, key string, vals []int64, has uint32) ([]byte, bool) {
	start := len(dst)
	dst = append(dst, o.header...)
	dst = binary.AppendVarint(dst, int64(len(key)))
	dst = append(dst, key...)
	for i, v := range o.values {
		set := has&(1<<i) != 0
		switch {
		case v.nullIndex < 0 && !set:
			return dst[:start], false
		case v.nullIndex < 0:
			dst = binary.AppendVarint(dst, vals[i])
		case set:
			dst = binary.AppendVarint(binary.AppendVarint(dst, v.valueIndex), vals[i])
		default:
			dst = binary.AppendVarint(dst, v.nullIndex)
		}
	}
	return dst, true
}
