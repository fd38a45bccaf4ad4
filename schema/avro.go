package schema

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hamba/avro/v2"

	"github.com/eoflow/pipeline/operator"
)

// Avro. hamba/avro parses a schema and reads and writes the primitive
// encodings; this file maps what it reads onto the operator's value
// domain and back, compiling each schema once into a tree of functions
// (a schema is read for every record of its id).
//
// Values read, by Avro type: null nil; boolean bool; int int (date: a
// time.Time at midnight UTC; time-millis: a time.Duration); long int64
// (timestamp-millis/-micros and their local- forms: a time.Time in UTC;
// time-micros: a time.Duration); float and double float64; string (and
// uuid) string; bytes and fixed []byte (decimal: an operator.Decimal);
// enum the symbol's string; array []any; map and record map[string]any; a
// union the value of its branch (nil for null), as Confluent's and
// fastavro's generic readers give it.

// avroConfig lets strings and bytes be as large as a Kafka record.
var avroConfig = avro.Config{MaxByteSliceSize: 1 << 30}.Freeze()

// readFn reads one value of a schema.
type readFn func(r *avro.Reader) any

// avroReader is a compiled writer schema.
type avroReader struct {
	schema avro.Schema
	read   readFn
	// fields are the top-level record's field names in order (nil: the
	// schema is not a record).
	fields []string
	record []readFn
	// decimals: the schema has a decimal somewhere.
	decimals bool
	// ints is the integer path's plan for the chain that reads with it
	// (avroint.go).
	ints intsCache
}

// maxBlockItems bounds one block of an array or map: a count beyond it
// is refused (items of no bytes, null, would otherwise let a few bytes
// ask for billions of them).
const maxBlockItems = 1 << 20

// compileAvroReader compiles s for reading.
func compileAvroReader(s avro.Schema) (*avroReader, error) {
	c := &avroCompiler{named: map[string]*readFn{}}
	read, err := c.reader(s)
	if err != nil {
		return nil, err
	}
	ar := &avroReader{schema: s, read: read, decimals: strings.Contains(s.String(), `"decimal"`)}
	if rs, ok := deref(s).(*avro.RecordSchema); ok {
		for _, f := range rs.Fields() {
			fr, err := c.reader(f.Type())
			if err != nil {
				return nil, err
			}
			ar.fields = append(ar.fields, f.Name())
			ar.record = append(ar.record, fr)
		}
	}
	return ar, nil
}

// errAvroTrailing: the value ended before the bytes did.
var errAvroTrailing = errors.New("bytes left over after the value: the bytes do not match the schema")

// decodeObject reads a record value.
func (ar *avroReader) decodeObject(b []byte) (map[string]any, error) {
	if ar.fields == nil {
		return nil, fmt.Errorf("the schema is not a record but %s: a value must be a record for its fields to be read", ar.schema.Type())
	}
	r := avro.NewReader(nil, 0, avro.WithReaderConfig(avroConfig)).Reset(b)
	m := make(map[string]any, len(ar.fields))
	for i, name := range ar.fields {
		m[name] = ar.record[i](r)
		if r.Error != nil {
			return nil, avroReadError(r.Error)
		}
	}
	return m, end(r)
}

// decodeValue reads any value.
func (ar *avroReader) decodeValue(b []byte) (any, error) {
	r := avro.NewReader(nil, 0, avro.WithReaderConfig(avroConfig)).Reset(b)
	v := ar.read(r)
	if r.Error != nil {
		return nil, avroReadError(r.Error)
	}
	return v, end(r)
}

// end checks that every byte was read.
func end(r *avro.Reader) error {
	r.Peek()
	if r.Error == nil {
		return errAvroTrailing
	}
	return nil
}

func avroReadError(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return errors.New("the bytes end inside the value: they do not match the schema")
	}
	return err
}

// deref follows a reference to the named schema.
func deref(s avro.Schema) avro.Schema {
	if r, ok := s.(*avro.RefSchema); ok {
		return r.Schema()
	}
	return s
}

// avroCompiler compiles schemas into readFns; named types are compiled
// once, so recursive types work.
type avroCompiler struct {
	named map[string]*readFn
}

func logical(s avro.Schema) avro.LogicalType {
	if ls, ok := s.(avro.LogicalTypeSchema); ok && ls.Logical() != nil {
		return ls.Logical().Type()
	}
	return ""
}

func (c *avroCompiler) reader(s avro.Schema) (readFn, error) {
	switch s := s.(type) {
	case *avro.RefSchema:
		name := s.Schema().FullName()
		if p, ok := c.named[name]; ok {
			return func(r *avro.Reader) any { return (*p)(r) }, nil
		}
		return c.reader(s.Schema())
	case *avro.NullSchema:
		return func(*avro.Reader) any { return nil }, nil
	case *avro.PrimitiveSchema:
		return primitiveReader(s)
	case *avro.RecordSchema:
		p := new(readFn)
		c.named[s.FullName()] = p
		names := make([]string, len(s.Fields()))
		reads := make([]readFn, len(s.Fields()))
		for i, f := range s.Fields() {
			fr, err := c.reader(f.Type())
			if err != nil {
				return nil, err
			}
			names[i], reads[i] = f.Name(), fr
		}
		*p = func(r *avro.Reader) any {
			m := make(map[string]any, len(names))
			for i, name := range names {
				m[name] = reads[i](r)
				if r.Error != nil {
					return nil
				}
			}
			return m
		}
		return *p, nil
	case *avro.EnumSchema:
		symbols := s.Symbols()
		return func(r *avro.Reader) any {
			i := int(r.ReadInt())
			if i < 0 || i >= len(symbols) {
				r.ReportError("read enum", fmt.Sprintf("symbol %d of %d", i, len(symbols)))
				return nil
			}
			return symbols[i]
		}, nil
	case *avro.ArraySchema:
		items, err := c.reader(s.Items())
		if err != nil {
			return nil, err
		}
		return func(r *avro.Reader) any {
			out := []any{}
			for {
				n, _ := r.ReadBlockHeader()
				if r.Error != nil || n == 0 {
					return out
				}
				if n > maxBlockItems {
					r.ReportError("read array", fmt.Sprintf("a block of %d items", n))
					return nil
				}
				for range n {
					out = append(out, items(r))
					if r.Error != nil {
						return nil
					}
				}
			}
		}, nil
	case *avro.MapSchema:
		values, err := c.reader(s.Values())
		if err != nil {
			return nil, err
		}
		return func(r *avro.Reader) any {
			out := map[string]any{}
			for {
				n, _ := r.ReadBlockHeader()
				if r.Error != nil || n == 0 {
					return out
				}
				if n > maxBlockItems {
					r.ReportError("read map", fmt.Sprintf("a block of %d items", n))
					return nil
				}
				for range n {
					k := r.ReadString()
					out[k] = values(r)
					if r.Error != nil {
						return nil
					}
				}
			}
		}, nil
	case *avro.UnionSchema:
		types := s.Types()
		branches := make([]readFn, len(types))
		for i, t := range types {
			b, err := c.reader(t)
			if err != nil {
				return nil, err
			}
			branches[i] = b
		}
		return func(r *avro.Reader) any {
			i := r.ReadLong()
			if i < 0 || i >= int64(len(branches)) {
				r.ReportError("read union", fmt.Sprintf("branch %d of %d", i, len(branches)))
				return nil
			}
			return branches[i](r)
		}, nil
	case *avro.FixedSchema:
		size := s.Size()
		if dl, ok := s.Logical().(*avro.DecimalLogicalSchema); ok {
			scale, precision := dl.Scale(), dl.Precision()
			return func(r *avro.Reader) any {
				b := make([]byte, size)
				r.Read(b)
				return checkPrecision(r, decimalOf(r, b, scale), precision)
			}, nil
		}
		return func(r *avro.Reader) any {
			b := make([]byte, size)
			r.Read(b)
			return b
		}, nil
	}
	return nil, fmt.Errorf("avro type %s is not supported", s.Type())
}

func primitiveReader(s *avro.PrimitiveSchema) (readFn, error) {
	lt := logical(s)
	switch s.Type() {
	case avro.Boolean:
		return func(r *avro.Reader) any { return r.ReadBool() }, nil
	case avro.Int:
		switch lt {
		case avro.Date:
			return func(r *avro.Reader) any { return time.Unix(int64(r.ReadInt())*86400, 0).UTC() }, nil
		case avro.TimeMillis:
			return func(r *avro.Reader) any { return time.Duration(r.ReadInt()) * time.Millisecond }, nil
		}
		return func(r *avro.Reader) any { return int(r.ReadInt()) }, nil
	case avro.Long:
		switch lt {
		case avro.TimestampMillis, avro.LocalTimestampMillis:
			return func(r *avro.Reader) any { return time.UnixMilli(r.ReadLong()).UTC() }, nil
		case avro.TimestampMicros, avro.LocalTimestampMicros:
			return func(r *avro.Reader) any { return time.UnixMicro(r.ReadLong()).UTC() }, nil
		case avro.TimeMicros:
			return func(r *avro.Reader) any { return time.Duration(r.ReadLong()) * time.Microsecond }, nil
		}
		return func(r *avro.Reader) any { return r.ReadLong() }, nil
	case avro.Float:
		return func(r *avro.Reader) any { return float64(r.ReadFloat()) }, nil
	case avro.Double:
		return func(r *avro.Reader) any { return r.ReadDouble() }, nil
	case avro.String:
		return func(r *avro.Reader) any { return r.ReadString() }, nil
	case avro.Bytes:
		if dl, ok := s.Logical().(*avro.DecimalLogicalSchema); ok {
			scale, precision := dl.Scale(), dl.Precision()
			return func(r *avro.Reader) any { return checkPrecision(r, decimalOf(r, r.ReadBytes(), scale), precision) }, nil
		}
		return func(r *avro.Reader) any {
			b := r.ReadBytes()
			return append([]byte(nil), b...)
		}, nil
	}
	return nil, fmt.Errorf("avro type %s is not supported", s.Type())
}

// decimalOf is the Decimal of a two's-complement big-endian unscaled
// value (Avro's decimal).
func decimalOf(r *avro.Reader, b []byte, scale int) any {
	if r.Error != nil {
		return nil
	}
	var d operator.Decimal
	var err error
	if len(b) <= 8 {
		var v int64
		for _, c := range b {
			v = v<<8 | int64(c)
		}
		if len(b) > 0 && len(b) < 8 && b[0]&0x80 != 0 {
			v -= 1 << (8 * len(b)) // sign-extend
		}
		d, err = operator.DecimalOfInt64(v, scale)
	} else {
		z := new(big.Int).SetBytes(b)
		if b[0]&0x80 != 0 {
			z.Sub(z, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
		}
		d, err = operator.NewDecimal(z, scale)
	}
	if err != nil {
		r.ReportError("read decimal", err.Error())
		return nil
	}
	return d
}

// checkPrecision refuses a decimal of more digits than its schema's
// precision: the bytes do not match the schema.
func checkPrecision(r *avro.Reader, v any, precision int) any {
	d, ok := v.(operator.Decimal)
	if !ok || precision <= 0 {
		return v
	}
	if z := d.Unscaled(); z.Sign() != 0 && len(z.Abs(z).String()) > precision {
		r.ReportError("read decimal", fmt.Sprintf("%s has more than the %d digits of its schema's decimal", d, precision))
		return nil
	}
	return v
}

// unscaledBytes is the two's-complement big-endian encoding of z, in the
// fewest bytes (Avro's decimal; Java's BigInteger.toByteArray).
func unscaledBytes(z *big.Int) []byte {
	if z.IsInt64() {
		v := z.Int64()
		n := 1
		for n < 8 && (v < -(1<<(8*n-1)) || v >= 1<<(8*n-1)) {
			n++
		}
		b := make([]byte, n)
		for i := n - 1; i >= 0; i-- {
			b[i] = byte(v)
			v >>= 8
		}
		return b
	}
	n := z.BitLen()/8 + 1
	if z.Sign() >= 0 {
		b := z.FillBytes(make([]byte, n))
		return b
	}
	// Two's complement: 2^(8n) + z.
	t := new(big.Int).Lsh(big.NewInt(1), uint(8*n))
	t.Add(t, z)
	return t.FillBytes(make([]byte, n))
}

// writeFn writes one value of a schema, or says why it cannot.
type writeFn func(w *avro.Writer, v any) error

// avroWriter is a compiled schema for writing.
type avroWriter struct {
	schema avro.Schema
	write  writeFn
	// fields and record are the top-level record's fields and their
	// writers (nil: not a record).
	fields   []*avro.Field
	record   []writeFn
	defaults []any
}

func compileAvroWriter(s avro.Schema) (*avroWriter, error) {
	c := &avroWriteCompiler{named: map[string]*writeFn{}}
	write, err := c.writer(s)
	if err != nil {
		return nil, err
	}
	aw := &avroWriter{schema: s, write: write}
	if rs, ok := deref(s).(*avro.RecordSchema); ok {
		for _, f := range rs.Fields() {
			fw, err := c.writer(f.Type())
			if err != nil {
				return nil, err
			}
			aw.fields = append(aw.fields, f)
			aw.record = append(aw.record, fw)
		}
	}
	return aw, nil
}

// appendObject appends the encoding of an object: each field of the
// record schema from fields (a field the object lacks takes its
// default, or is an error).
func (aw *avroWriter) appendObject(dst []byte, fields map[string]any) ([]byte, error) {
	if aw.fields == nil {
		return dst, fmt.Errorf("the schema is %s, not a record", aw.schema.Type())
	}
	w := avro.NewWriter(nil, 0, avro.WithWriterConfig(avroConfig))
	w.Reset(nil)
	for i, f := range aw.fields {
		v, ok := fields[f.Name()]
		if !ok {
			if !f.HasDefault() {
				return dst, fieldError(f.Name(), errNoDefault)
			}
			v = f.Default()
		}
		if err := aw.record[i](w, v); err != nil {
			return dst, fieldError(f.Name(), err)
		}
	}
	return append(dst, w.Buffer()...), nil
}

type avroWriteCompiler struct {
	named map[string]*writeFn
}

func (c *avroWriteCompiler) writer(s avro.Schema) (writeFn, error) {
	switch s := s.(type) {
	case *avro.RefSchema:
		if p, ok := c.named[s.Schema().FullName()]; ok && p != nil {
			return func(w *avro.Writer, v any) error { return (*p)(w, v) }, nil
		}
		return c.writer(s.Schema())
	case *avro.NullSchema:
		return func(_ *avro.Writer, v any) error {
			if v != nil {
				return fmt.Errorf("want null, got %s", kindOf(v))
			}
			return nil
		}, nil
	case *avro.PrimitiveSchema:
		return primitiveWriter(s)
	case *avro.RecordSchema:
		p := new(writeFn)
		c.named[s.FullName()] = p
		fields := s.Fields()
		writes := make([]writeFn, len(fields))
		for i, f := range fields {
			fw, err := c.writer(f.Type())
			if err != nil {
				return nil, err
			}
			writes[i] = fw
		}
		*p = func(w *avro.Writer, v any) error {
			m, ok := v.(map[string]any)
			if !ok {
				return fmt.Errorf("want a record, got %s", kindOf(v))
			}
			for i, f := range fields {
				fv, ok := m[f.Name()]
				if !ok {
					if !f.HasDefault() {
						return fieldError(f.Name(), errNoDefault)
					}
					fv = f.Default()
				}
				if err := writes[i](w, fv); err != nil {
					return fieldError(f.Name(), err)
				}
			}
			return nil
		}
		return *p, nil
	case *avro.EnumSchema:
		symbols := s.Symbols()
		return func(w *avro.Writer, v any) error {
			str, ok := v.(string)
			if !ok {
				return fmt.Errorf("want an enum symbol, got %s", kindOf(v))
			}
			for i, sym := range symbols {
				if sym == str {
					w.WriteInt(int32(i))
					return nil
				}
			}
			return fmt.Errorf("%q is not a symbol of enum %s", str, s.FullName())
		}, nil
	case *avro.ArraySchema:
		items, err := c.writer(s.Items())
		if err != nil {
			return nil, err
		}
		return func(w *avro.Writer, v any) error {
			a, ok := v.([]any)
			if !ok {
				return fmt.Errorf("want an array, got %s", kindOf(v))
			}
			if len(a) > 0 {
				w.WriteLong(int64(len(a)))
				for i, e := range a {
					if err := items(w, e); err != nil {
						return indexError(i, err)
					}
				}
			}
			w.WriteLong(0)
			return nil
		}, nil
	case *avro.MapSchema:
		values, err := c.writer(s.Values())
		if err != nil {
			return nil, err
		}
		return func(w *avro.Writer, v any) error {
			m, ok := v.(map[string]any)
			if !ok {
				return fmt.Errorf("want a map, got %s", kindOf(v))
			}
			if len(m) > 0 {
				w.WriteLong(int64(len(m)))
				for _, k := range sortedKeys(m) {
					w.WriteString(k)
					if err := values(w, m[k]); err != nil {
						return keyError(k, err)
					}
				}
			}
			w.WriteLong(0)
			return nil
		}, nil
	case *avro.UnionSchema:
		types := s.Types()
		branches := make([]writeFn, len(types))
		for i, t := range types {
			b, err := c.writer(t)
			if err != nil {
				return nil, err
			}
			branches[i] = b
		}
		return func(w *avro.Writer, v any) error {
			// The first branch of the value's own type, else the first
			// that takes it (a number into a string branch is its text),
			// null for nil.
			var firstErr error
			for pass := range 2 {
				for i, t := range types {
					if (v == nil) != (t.Type() == avro.Null) || (pass == 0) != exactBranch(t, v) {
						continue
					}
					probe := avro.NewWriter(nil, 0, avro.WithWriterConfig(avroConfig))
					if err := branches[i](probe, v); err != nil {
						if firstErr == nil {
							firstErr = err
						}
						continue
					}
					w.WriteLong(int64(i))
					_, _ = w.Write(probe.Buffer())
					return nil
				}
			}
			if firstErr != nil {
				return firstErr
			}
			return fmt.Errorf("no branch of the union takes %s", kindOf(v))
		}, nil
	case *avro.FixedSchema:
		size := s.Size()
		if dl, ok := s.Logical().(*avro.DecimalLogicalSchema); ok {
			scale, precision := dl.Scale(), dl.Precision()
			return func(w *avro.Writer, v any) error {
				b, err := decimalBytes(v, scale, precision)
				if err != nil {
					return err
				}
				if len(b) > size {
					return fmt.Errorf("decimal needs %d bytes, the fixed has %d", len(b), size)
				}
				out := make([]byte, size)
				fill := byte(0)
				if len(b) > 0 && b[0]&0x80 != 0 {
					fill = 0xff
				}
				for i := range size - len(b) {
					out[i] = fill
				}
				copy(out[size-len(b):], b)
				_, _ = w.Write(out)
				return nil
			}, nil
		}
		return func(w *avro.Writer, v any) error {
			b, ok := bytesOf(v)
			if !ok || len(b) != size {
				return fmt.Errorf("want %d bytes, got %s", size, kindOf(v))
			}
			_, _ = w.Write(b)
			return nil
		}, nil
	}
	return nil, fmt.Errorf("avro type %s is not supported", s.Type())
}

func primitiveWriter(s *avro.PrimitiveSchema) (writeFn, error) {
	lt := logical(s)
	switch s.Type() {
	case avro.Boolean:
		return func(w *avro.Writer, v any) error {
			b, ok := v.(bool)
			if !ok {
				return fmt.Errorf("want a boolean, got %s", kindOf(v))
			}
			w.WriteBool(b)
			return nil
		}, nil
	case avro.Int:
		if lt == avro.Date {
			return func(w *avro.Writer, v any) error {
				t, ok := timeOf(v)
				if !ok {
					return fmt.Errorf("want a date, got %s", kindOf(v))
				}
				w.WriteInt(int32(t.UTC().Unix() / 86400))
				return nil
			}, nil
		}
		return func(w *avro.Writer, v any) error {
			i, ok := intOf(v)
			if !ok || i < math.MinInt32 || i > math.MaxInt32 {
				return fmt.Errorf("want an int, got %s", kindOf(v))
			}
			w.WriteInt(int32(i))
			return nil
		}, nil
	case avro.Long:
		switch lt {
		case avro.TimestampMillis, avro.LocalTimestampMillis:
			return func(w *avro.Writer, v any) error {
				t, ok := timeOf(v)
				if !ok {
					return fmt.Errorf("want a timestamp, got %s", kindOf(v))
				}
				w.WriteLong(t.UnixMilli())
				return nil
			}, nil
		case avro.TimestampMicros, avro.LocalTimestampMicros:
			return func(w *avro.Writer, v any) error {
				t, ok := timeOf(v)
				if !ok {
					return fmt.Errorf("want a timestamp, got %s", kindOf(v))
				}
				w.WriteLong(t.UnixMicro())
				return nil
			}, nil
		}
		return func(w *avro.Writer, v any) error {
			i, ok := intOf(v)
			if !ok {
				return fmt.Errorf("want a long, got %s", kindOf(v))
			}
			w.WriteLong(i)
			return nil
		}, nil
	case avro.Float:
		return func(w *avro.Writer, v any) error {
			f, ok := floatOf(v)
			if !ok {
				return fmt.Errorf("want a float, got %s", kindOf(v))
			}
			w.WriteFloat(float32(f))
			return nil
		}, nil
	case avro.Double:
		return func(w *avro.Writer, v any) error {
			f, ok := floatOf(v)
			if !ok {
				return fmt.Errorf("want a double, got %s", kindOf(v))
			}
			w.WriteDouble(f)
			return nil
		}, nil
	case avro.String:
		return func(w *avro.Writer, v any) error {
			s, ok := stringOf(v)
			if !ok {
				return fmt.Errorf("want a string, got %s", kindOf(v))
			}
			w.WriteString(s)
			return nil
		}, nil
	case avro.Bytes:
		if dl, ok := s.Logical().(*avro.DecimalLogicalSchema); ok {
			scale, precision := dl.Scale(), dl.Precision()
			return func(w *avro.Writer, v any) error {
				b, err := decimalBytes(v, scale, precision)
				if err != nil {
					return err
				}
				w.WriteBytes(b)
				return nil
			}, nil
		}
		return func(w *avro.Writer, v any) error {
			b, ok := bytesOf(v)
			if !ok {
				return fmt.Errorf("want bytes, got %s", kindOf(v))
			}
			w.WriteBytes(b)
			return nil
		}, nil
	}
	return nil, fmt.Errorf("avro type %s is not supported", s.Type())
}

// decimalBytes is v as a decimal of the given scale, in at most
// precision digits: exact, or an error (a sum with more digits after the
// point than the schema keeps is not rounded silently).
func decimalBytes(v any, scale, precision int) ([]byte, error) {
	d, ok := operator.DecimalValue(v)
	if !ok {
		return nil, fmt.Errorf("want a decimal, got %s", kindOf(v))
	}
	r, ok := d.Rescale(scale)
	if !ok {
		return nil, fmt.Errorf("%s has more than the %d digits after the point of the schema's decimal", d, scale)
	}
	z := r.Unscaled()
	if precision > 0 && len(new(big.Int).Abs(z).String()) > precision && z.Sign() != 0 {
		return nil, fmt.Errorf("%s has more than the %d digits of the schema's decimal(%d,%d)", d, precision, precision, scale)
	}
	return unscaledBytes(z), nil
}

func intOf(v any) (int64, bool) {
	switch x := v.(type) {
	case int:
		return int64(x), true
	case int64:
		return x, true
	case float64:
		if x == math.Trunc(x) && x >= math.MinInt64 && x < math.MaxInt64 {
			return int64(x), true
		}
	case operator.Decimal:
		return x.Int64()
	case bool, string:
	}
	return 0, false
}

func floatOf(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case operator.Decimal:
		return x.Float64(), true
	}
	return 0, false
}

// stringOf is v as text: a string, or a scalar's text (a group key of
// a number, written into a string field, is its text).
func stringOf(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case []byte:
		return string(x), true
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano), true
	case int:
		return strconv.Itoa(x), true
	case int64:
		return strconv.FormatInt(x, 10), true
	case bool:
		return strconv.FormatBool(x), true
	case operator.Decimal:
		return x.String(), true
	}
	return "", false
}

func bytesOf(v any) ([]byte, bool) {
	switch x := v.(type) {
	case []byte:
		return x, true
	case string:
		return []byte(x), true
	}
	return nil, false
}

// timeOf is v as a time: a time.Time, epoch milliseconds, or RFC 3339
// text (how the JSON of a window bound reads back).
func timeOf(v any) (time.Time, bool) {
	switch x := v.(type) {
	case time.Time:
		return x, true
	case string:
		t, err := time.Parse(time.RFC3339Nano, x)
		return t, err == nil
	}
	if i, ok := intOf(v); ok {
		return time.UnixMilli(i).UTC(), true
	}
	return time.Time{}, false
}

// kindOf names v's type for an error.
func kindOf(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string " + strconv.Quote(truncate(x, 40))
	case int, int64:
		return fmt.Sprintf("the integer %d", x)
	case float64:
		return "the number " + strconv.FormatFloat(x, 'g', -1, 64)
	case operator.Decimal:
		return "the decimal " + x.String()
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	case []byte:
		return fmt.Sprintf("%d bytes", len(x))
	case time.Time:
		return "the time " + x.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("a %T", v)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// sortedKeys are m's keys in order (a map's encoding is deterministic).
func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// exactBranch reports whether v is of branch t's own kind.
func exactBranch(t avro.Schema, v any) bool {
	t = deref(t)
	lt := logical(t)
	switch v.(type) {
	case nil:
		return t.Type() == avro.Null
	case bool:
		return t.Type() == avro.Boolean
	case string:
		return t.Type() == avro.String || t.Type() == avro.Enum
	case int, int64:
		return (t.Type() == avro.Long || t.Type() == avro.Int) && lt == ""
	case float64:
		return t.Type() == avro.Double || t.Type() == avro.Float
	case operator.Decimal:
		return lt == avro.Decimal
	case time.Time:
		return lt != "" && lt != avro.Decimal
	case []byte:
		return (t.Type() == avro.Bytes || t.Type() == avro.Fixed) && lt == ""
	case []any:
		return t.Type() == avro.Array
	case map[string]any:
		return t.Type() == avro.Record || t.Type() == avro.Map
	}
	return false
}
