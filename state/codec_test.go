package state

import (
	"encoding/binary"
	"errors"
)

// int64Codec is a typical aggregate accumulator (a count or a sum) as a
// signed varint.
type int64Codec struct{}

func (int64Codec) Append(dst []byte, v int64) []byte { return binary.AppendVarint(dst, v) }

func (int64Codec) Decode(b []byte) (int64, error) {
	v, n := binary.Varint(b)
	if n <= 0 || n != len(b) {
		return 0, errors.New("bad varint")
	}
	return v, nil
}
