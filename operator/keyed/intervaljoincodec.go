package keyed

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// joinCodec stores a key's buffers in the changelog: a version byte, the
// watermark the key fired at (varint; version 2), then each side as a
// count and its entries. Version 1, without the watermark, is read as
// fired at the watermark the operator resumes from.
type joinCodec struct{}

const (
	joinCodecV1      = 1
	joinCodecVersion = 2
)

func (joinCodec) Append(dst []byte, b *JoinBuffers) []byte {
	dst = append(dst, joinCodecVersion)
	dst = binary.AppendVarint(dst, b.Fired)
	for _, side := range [][]JoinEntry{b.Left, b.Right} {
		dst = binary.AppendUvarint(dst, uint64(len(side)))
		for _, e := range side {
			dst = binary.AppendVarint(dst, e.At)
			dst = binary.AppendUvarint(dst, uint64(len(e.Topic)))
			dst = append(dst, e.Topic...)
			dst = binary.AppendVarint(dst, int64(e.Partition))
			dst = binary.AppendVarint(dst, e.Offset)
			var flags byte
			if e.Matched {
				flags |= 1
			}
			if e.NoKey {
				flags |= 2
			}
			dst = append(dst, flags)
			dst = binary.AppendUvarint(dst, uint64(len(e.Value)))
			dst = append(dst, e.Value...)
		}
	}
	return dst
}

var errJoinState = errors.New("interval join state: truncated or corrupt")

func (joinCodec) Decode(src []byte) (*JoinBuffers, error) {
	r := bytes.NewReader(src)
	v, err := r.ReadByte()
	if err != nil {
		return nil, errJoinState
	}
	if v != joinCodecVersion && v != joinCodecV1 {
		return nil, fmt.Errorf("interval join state: version %d, this build reads %d and %d", v, joinCodecV1, joinCodecVersion)
	}
	b := &JoinBuffers{firedAtResume: v == joinCodecV1}
	if v == joinCodecVersion {
		if b.Fired, err = binary.ReadVarint(r); err != nil {
			return nil, errJoinState
		}
	}
	bytesOf := func() ([]byte, error) {
		n, err := binary.ReadUvarint(r)
		if err != nil || n > uint64(r.Len()) {
			return nil, errJoinState
		}
		b := make([]byte, n)
		_, err = io.ReadFull(r, b)
		return b, err
	}
	for side := range 2 {
		n, err := binary.ReadUvarint(r)
		if err != nil || n > uint64(r.Len()) {
			return nil, errJoinState
		}
		entries := make([]JoinEntry, n)
		for i := range entries {
			e := &entries[i]
			if e.At, err = binary.ReadVarint(r); err != nil {
				return nil, errJoinState
			}
			topic, err := bytesOf()
			if err != nil {
				return nil, errJoinState
			}
			e.Topic = string(topic)
			p, err := binary.ReadVarint(r)
			if err != nil {
				return nil, errJoinState
			}
			e.Partition = int32(p)
			if e.Offset, err = binary.ReadVarint(r); err != nil {
				return nil, errJoinState
			}
			flags, err := r.ReadByte()
			if err != nil {
				return nil, errJoinState
			}
			e.Matched, e.NoKey = flags&1 != 0, flags&2 != 0
			if e.Value, err = bytesOf(); err != nil {
				return nil, errJoinState
			}
		}
		if side == 0 {
			b.Left = entries
		} else {
			b.Right = entries
		}
	}
	if r.Len() != 0 {
		return nil, errJoinState
	}
	return b, nil
}

// DecodeJoinBuffers decodes one key's buffers as the changelog and a
// savepoint hold them (for tools and tests that read a savepoint).
func DecodeJoinBuffers(src []byte) (*JoinBuffers, error) { return joinCodec{}.Decode(src) }
