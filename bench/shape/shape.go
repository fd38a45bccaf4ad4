// Package shape makes the benchmark's record values. Two shapes:
//
//   - flat (the default, datagen.Event): {"key","amount","ts","pad"}, the
//     size made up by the one "pad" string;
//   - wide (the record-size curve of issue 15): the same three fields the
//     jobs use, among many they do not: strings, integers, decimals,
//     booleans, nulls, a nested object and arrays, in a layout that is the
//     same for every record of one size (a schema), with values that vary.
//
// Both the workload (bench/cmd/workload) and the runner's latency probe
// (bench/cmd/runner) write through here, so a probe looks like the input.
//
// The wide shape keeps the peers' field scan right: Kafka Streams and
// Flink (bench/peers/*/src) take the first occurrence of "key":", "amount":
// and "ts": anywhere in the text. So no other field, at any depth, has one
// of those names, and no string value holds a quote or a colon: the first
// occurrence is the top-level field. key comes first, amount after about
// half of the other fields, ts last.
package shape

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"

	"github.com/eoflow/pipeline/internal/datagen"
)

// Shapes are the names Value accepts.
var Shapes = []string{"flat", "wide"}

// Check returns an error unless name is a shape.
func Check(name string) error {
	for _, s := range Shapes {
		if s == name {
			return nil
		}
	}
	return fmt.Errorf("unknown record shape %q (flat or wide)", name)
}

// Value is the value of one record of shape name, about size bytes (flat:
// exactly datagen.Event). r draws the wide shape's unused fields; flat does
// not use it.
func Value(name, key string, amount int, ts int64, size int, r *rand.Rand) []byte {
	if name == "wide" {
		return Wide(nil, key, amount, ts, size, r)
	}
	return datagen.Event(key, amount, ts, size)
}

// kind is one type of unused field of the wide shape.
type kind byte

const (
	kString  kind = iota // "s<i>":"<8 of [a-z0-9]>", an id: a new value per record
	kInt                 // "n<i>":<6 digits>
	kDecimal             // "d<i>":<3 digits>.<2 digits>
	kCountry             // "c<i>":"<one of 8 two-letter codes>": few values
	kBool                // "b<i>":true|false
	kObject              // "o<i>":{"id":<6>,"name":"<8>","score":<3.2>,"active":<bool>}
	kInts                // "a<i>":[<4 digits> x4]
	kStrings             // "l<i>":["<4>","<4>","<4>"]
	kNull                // "z<i>":null
	nKinds
)

// width is the widest a field of kind k and number i writes, with its
// leading comma.
func (k kind) width(i int) int {
	name := 2 + len(k.prefix()) + len(strconv.Itoa(i)) + 1 // "x12":
	switch k {
	case kString:
		return 1 + name + 10
	case kInt:
		return 1 + name + 6
	case kDecimal:
		return 1 + name + 6
	case kCountry:
		return 1 + name + 4
	case kBool:
		return 1 + name + 5
	case kObject:
		return 1 + name + len(`{"id":123456,"name":"abcdefgh","score":123.45,"active":false}`)
	case kInts:
		return 1 + name + len(`[1234,1234,1234,1234]`)
	case kStrings:
		return 1 + name + len(`["abcd","abcd","abcd"]`)
	case kNull:
		return 1 + name + 4
	}
	panic("shape: unknown kind")
}

func (k kind) prefix() string { return string("sndcboalz"[k]) }

// fixedWidth is what a wide record takes besides its unused fields, at
// the most: {"key":"<up to 10>", ,"amount":<up to 7>, ,"ts":<13>,
// ,"pad":"" and the closing brace. The pad takes up what the others
// leave, so that every record of one size is that size.
const fixedWidth = len(`{"key":"`) + 10 + len(`"`) + len(`,"amount":`) + 7 + len(`,"ts":`) + 13 + len(`,"pad":""`) + len(`}`)

var (
	layoutMu sync.Mutex
	layouts  = map[int][]kind{}
)

// layout is the list of unused fields of a wide record of size bytes: the
// kinds in turn, as many as fit.
func layout(size int) []kind {
	layoutMu.Lock()
	defer layoutMu.Unlock()
	if l, ok := layouts[size]; ok {
		return l
	}
	var l []kind
	used := fixedWidth
	for i := 0; ; i++ {
		k := kind(i % int(nKinds))
		if used+k.width(i) > size {
			break
		}
		used += k.width(i)
		l = append(l, k)
	}
	layouts[size] = l
	return l
}

var (
	countries = []string{"DE", "FR", "US", "JP", "BR", "IN", "NG", "AU"}
	alnum     = "abcdefghijklmnopqrstuvwxyz0123456789"
)

// Wide appends the wide record of key, amount and ts of about size bytes
// (exactly size when the key has at most 10 bytes and amount at most 7
// digits and size leaves room for the job's fields) to b. r draws the
// values of the unused fields.
func Wide(b []byte, key string, amount int, ts int64, size int, r *rand.Rand) []byte {
	start := len(b)
	l := layout(size)
	b = append(b, `{"key":"`...)
	b = append(b, key...)
	b = append(b, '"')
	half := len(l) / 2
	for i, k := range l {
		if i == half {
			b = appendAmount(b, amount)
		}
		b = appendField(b, k, i, r)
	}
	if half == len(l) {
		b = appendAmount(b, amount)
	}
	// The pad, then ts: what is left of size, less ts and the brace.
	tsLen := len(`,"ts":`) + len(strconv.AppendInt(nil, ts, 10)) + 1
	b = append(b, `,"pad":"`...)
	for len(b)-start+1+tsLen < size {
		b = append(b, 'x')
	}
	b = append(b, '"')
	b = append(b, `,"ts":`...)
	b = strconv.AppendInt(b, ts, 10)
	return append(b, '}')
}

func appendAmount(b []byte, amount int) []byte {
	b = append(b, `,"amount":`...)
	return strconv.AppendInt(b, int64(amount), 10)
}

func appendField(b []byte, k kind, i int, r *rand.Rand) []byte {
	b = append(b, ',', '"')
	b = append(b, k.prefix()...)
	b = strconv.AppendInt(b, int64(i), 10)
	b = append(b, '"', ':')
	switch k {
	case kString:
		b = appendStr(b, 8, r)
	case kInt:
		b = strconv.AppendInt(b, 100000+r.Int64N(900000), 10)
	case kDecimal:
		b = appendDecimal(b, r)
	case kCountry:
		b = append(b, '"')
		b = append(b, countries[r.IntN(len(countries))]...)
		b = append(b, '"')
	case kBool:
		b = strconv.AppendBool(b, r.IntN(2) == 0)
	case kObject:
		b = append(b, `{"id":`...)
		b = strconv.AppendInt(b, 100000+r.Int64N(900000), 10)
		b = append(b, `,"name":`...)
		b = appendStr(b, 8, r)
		b = append(b, `,"score":`...)
		b = appendDecimal(b, r)
		b = append(b, `,"active":`...)
		b = strconv.AppendBool(b, r.IntN(2) == 0)
		b = append(b, '}')
	case kInts:
		b = append(b, '[')
		for j := range 4 {
			if j > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, 1000+r.Int64N(9000), 10)
		}
		b = append(b, ']')
	case kStrings:
		b = append(b, '[')
		for j := range 3 {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendStr(b, 4, r)
		}
		b = append(b, ']')
	case kNull:
		b = append(b, "null"...)
	}
	return b
}

// appendStr appends a quoted string of n characters of [a-z0-9].
func appendStr(b []byte, n int, r *rand.Rand) []byte {
	b = append(b, '"')
	for j := 0; j < n; j++ {
		b = append(b, alnum[r.IntN(len(alnum))])
	}
	return append(b, '"')
}

// appendDecimal appends a number 100.00..999.99 with two decimals.
func appendDecimal(b []byte, r *rand.Rand) []byte {
	v := 10000 + r.IntN(90000)
	b = strconv.AppendInt(b, int64(v/100), 10)
	b = append(b, '.')
	return append(b, byte('0'+v/10%10), byte('0'+v%10))
}
