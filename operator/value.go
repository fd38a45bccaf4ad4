package operator

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"time"
)

// The value domain. Everything a step stores or emits is a JSON value:
// nil, bool, string, int or int64, float64 (finite), []any, map[string]any.
// Expressions may return more (other integer kinds, time.Time, []string,
// map[any][]any from groupBy, ...); normalize maps those into the domain
// once, where the step takes the result, so encoders and accumulators never
// meet anything else.

// canonical reports whether v is already in the value domain, so normalize
// can return it without copying. It walks containers: values decoded from
// JSON are always canonical, and the walk is cheaper than a copy.
func canonical(v any) bool {
	switch x := v.(type) {
	case nil, bool, string, int, int64, Decimal:
		return true
	case float64:
		return !math.IsNaN(x) && !math.IsInf(x, 0)
	case []any:
		for _, e := range x {
			if !canonical(e) {
				return false
			}
		}
		return true
	case map[string]any:
		for _, e := range x {
			if !canonical(e) {
				return false
			}
		}
		return true
	}
	return false
}

// normalize converts an expression result into the value domain. It fails
// (CodeType) for NaN and infinities, which JSON cannot carry, and for types
// with no JSON meaning (functions, structs, channels).
func normalize(v any) (any, *RecordError) {
	if canonical(v) {
		return v, nil
	}
	return normalizeSlow(v, 0)
}

func normalizeSlow(v any, depth int) (any, *RecordError) {
	if depth > maxDepth {
		return nil, &RecordError{Code: CodeType, Reason: "value nested too deeply"}
	}
	switch x := v.(type) {
	case nil, bool, string, int, int64, Decimal:
		return x, nil
	case float64:
		return finite(x)
	case float32:
		return finite(float64(x))
	case int8:
		return int(x), nil
	case int16:
		return int(x), nil
	case int32:
		return int(x), nil
	case uint8:
		return int(x), nil
	case uint16:
		return int(x), nil
	case uint32:
		return boxInt(int64(x)), nil
	case uint:
		return uintValue(uint64(x)), nil
	case uint64:
		return uintValue(x), nil
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano), nil
	case time.Duration:
		return x.String(), nil
	case []byte:
		return string(x), nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			n, err := normalizeSlow(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			n, err := normalizeSlow(e, depth+1)
			if err != nil {
				return nil, err
			}
			out[k] = n
		}
		return out, nil
	}
	// Other slices and maps (expr's []string from split, map[any][]any from
	// groupBy, ...) go through reflection: rare, so clarity over speed.
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		out := make([]any, rv.Len())
		for i := range out {
			n, err := normalizeSlow(rv.Index(i).Interface(), depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	case reflect.Map:
		out := make(map[string]any, rv.Len())
		it := rv.MapRange()
		for it.Next() {
			k, err := KeyString(it.Key().Interface())
			if err != nil {
				return nil, &RecordError{Code: CodeType, Reason: "object key: " + err.Reason}
			}
			n, rerr := normalizeSlow(it.Value().Interface(), depth+1)
			if rerr != nil {
				return nil, rerr
			}
			out[k] = n
		}
		return out, nil
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return nil, nil
		}
		return normalizeSlow(rv.Elem().Interface(), depth+1)
	}
	return nil, &RecordError{Code: CodeType, Reason: fmt.Sprintf("a %T cannot be represented in JSON", v)}
}

// deepCopy copies the containers of a canonical value; scalars are
// immutable and shared.
func deepCopy(v any) any {
	switch x := v.(type) {
	case []any:
		c := make([]any, len(x))
		for i, e := range x {
			c[i] = deepCopy(e)
		}
		return c
	case map[string]any:
		c := make(map[string]any, len(x))
		for k, e := range x {
			c[k] = deepCopy(e)
		}
		return c
	}
	return v
}

func finite(f float64) (any, *RecordError) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, &RecordError{Code: CodeType, Reason: "result " + strconv.FormatFloat(f, 'g', -1, 64) + " is not a finite number"}
	}
	return f, nil
}

func uintValue(u uint64) any {
	if u <= math.MaxInt64 {
		return boxInt(int64(u))
	}
	return float64(u)
}

// number is a numeric value as an expression gives it: an exact int64, or
// a float64 (which the numeric aggregates take as a decimal), or a
// Decimal (isFloat and isDec: not an integer, and exact).
type number struct {
	isFloat bool
	isDec   bool
	i       int64
	f       float64
	d       decimal
}

// toNumber accepts every integer and float kind an expression can produce.
func toNumber(v any) (number, bool) {
	switch x := v.(type) {
	case int:
		return number{i: int64(x)}, true
	case int64:
		return number{i: x}, true
	case float64:
		return number{isFloat: true, f: x}, !math.IsNaN(x) && !math.IsInf(x, 0)
	case int32:
		return number{i: int64(x)}, true
	case int16:
		return number{i: int64(x)}, true
	case int8:
		return number{i: int64(x)}, true
	case uint8:
		return number{i: int64(x)}, true
	case uint16:
		return number{i: int64(x)}, true
	case uint32:
		return number{i: int64(x)}, true
	case uint:
		if uint64(x) > math.MaxInt64 {
			return number{isFloat: true, f: float64(x)}, true
		}
		return number{i: int64(x)}, true
	case uint64:
		if x > math.MaxInt64 {
			return number{isFloat: true, f: float64(x)}, true
		}
		return number{i: int64(x)}, true
	case float32:
		f := float64(x)
		return number{isFloat: true, f: f}, !math.IsNaN(f) && !math.IsInf(f, 0)
	case Decimal:
		return number{isFloat: true, isDec: true, d: x.d}, true
	}
	return number{}, false
}

func cmpOrdered(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// typeName names a value's JSON kind for messages.
func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "bool"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	if _, ok := toNumber(v); ok {
		return "number"
	}
	return fmt.Sprintf("%T", v)
}

// KeyString turns a key_by result into the group key. Scalars only: a
// string is itself, a number is its JSON text (so 2 and 2.0 are the same
// group), a bool is "true"/"false", a time is RFC 3339 in UTC. null,
// objects and arrays are errors (CodeType): grouping by them is almost
// always a mistake, and a silent "null" group would hide it. The error has
// no Step: the caller knows which expression it evaluated (Expr.EvalKey
// fills it in).
func KeyString(v any) (string, *RecordError) {
	k, _, err := groupKey(v)
	return k, err
}

// keyKind is the JSON type of a group key, which its text alone does not
// tell: the key 3 and the key "3" are one group (the same text, the same
// state and record key), but an aggregate's output says "key":3 for the
// number and "key":"3" for the string. The zero value is a string, the
// kind of every key before kinds were kept.
type keyKind uint8

const (
	keyString keyKind = iota
	keyNumber
	keyBool
)

// groupKey is KeyString with the key's JSON type.
func groupKey(v any) (string, keyKind, *RecordError) {
	switch x := v.(type) {
	case string:
		return x, keyString, nil
	case bool:
		return strconv.FormatBool(x), keyBool, nil
	case int:
		return strconv.Itoa(x), keyNumber, nil
	case int64:
		return strconv.FormatInt(x, 10), keyNumber, nil
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano), keyString, nil
	case Decimal:
		return string(x.appendJSON(nil)), keyNumber, nil
	}
	if n, ok := toNumber(v); ok {
		if !n.isFloat {
			return strconv.FormatInt(n.i, 10), keyNumber, nil
		}
		return string(appendFloat(nil, n.f)), keyNumber, nil
	}
	return "", keyString, &RecordError{Code: CodeType, Reason: "key must be a string, number or bool, got " + typeName(v)}
}

// appendKey appends the JSON of a group key of kind k. A key that is not
// what its kind says (a state restored from a damaged changelog) is written
// as a string, so the output stays valid JSON.
func appendKey(dst []byte, key string, k keyKind) []byte {
	switch {
	case k == keyNumber && isJSONNumber(key), k == keyBool && (key == "true" || key == "false"):
		return append(dst, key...)
	}
	return appendString(dst, key)
}

// isJSONNumber reports whether s is a JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func isJSONNumber(s string) bool {
	i := 0
	digits := func() bool {
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i > start
	}
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case !digits():
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if !digits() {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if !digits() {
			return false
		}
	}
	return i == len(s)
}
