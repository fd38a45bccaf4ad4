package state

import "bytes"

// Codec turns an operator's in-memory value into changelog bytes and back.
//
// The store is generic over the value type, with a Codec, rather than
// holding []byte, because a keyed operator updates its accumulator on
// every record but the changelog needs bytes only once per checkpoint:
// with V in memory, Put of an existing key is a pointer write (no encoding,
// no allocation), and only the keys dirty at a barrier are encoded. This
// is how Flink's heap state backend works too (objects on the heap,
// serializers at snapshot time). For many small values the other way wins
// (see Compact, which holds the encodings themselves).
type Codec[V any] interface {
	// Append appends the encoding of v to dst and returns the extended
	// slice, like strconv.AppendInt. It must only append (never write to
	// dst[:len(dst)]) and cannot fail: a value that could not be encoded
	// would make the checkpoint impossible, so reject it on Put instead.
	// The encoding should carry its own version if the value's layout may
	// change; the changelog key's version covers only the key.
	Append(dst []byte, v V) []byte
	// Decode parses one value written by Append (possibly empty, never
	// nil). b belongs to the caller and is only valid during the call:
	// copy whatever the returned value keeps.
	Decode(b []byte) (V, error)
}

// BytesCodec stores []byte values as they are. Put keeps the slice it is
// given (no copy), so the caller must not modify it afterwards.
type BytesCodec struct{}

var _ Codec[[]byte] = BytesCodec{}

// Append implements Codec.
func (BytesCodec) Append(dst []byte, v []byte) []byte { return append(dst, v...) }

// Decode implements Codec. It copies b; an empty value stays non-nil.
func (BytesCodec) Decode(b []byte) ([]byte, error) {
	if b == nil {
		return []byte{}, nil
	}
	return bytes.Clone(b), nil
}
