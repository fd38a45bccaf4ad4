package engine

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eoflow/pipeline/config"
	"github.com/eoflow/pipeline/operator"
	"github.com/eoflow/pipeline/window"
)

func shuffledCases() []shuffled {
	ts := time.UnixMilli(1_764_688_090_123)
	return []shuffled{
		{target: 0, in: kgo.Record{Topic: "in", Partition: 3, Offset: 42, Timestamp: ts, Key: []byte("k"), Value: []byte(`{"key":"a","amount":5}`)},
			wm: window.NoWatermark, groupKey: "a", body: []byte{4, 10}},
		{target: 2, in: kgo.Record{Topic: "orders", Partition: 0, Offset: 0, Timestamp: ts, Value: []byte{}},
			timed: true, at: -5, wm: window.NoWatermark, groupKey: "", kind: 1},
		{target: 7, in: kgo.Record{Topic: "t", Partition: 1<<31 - 1, Offset: 1 << 62, Timestamp: ts,
			Headers: []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "", Value: nil}, {Key: "e", Value: []byte{}}}},
			timed: true, at: 1_764_688_090_000, wm: 1_764_688_089_000, groupKey: "3", kind: 2,
			interval: true, joinSide: operator.SideRight, noJoinKey: true, body: []byte(`{"x":1}`)},
		{target: 1, in: kgo.Record{Topic: "in", Timestamp: ts, Key: []byte{}, Value: nil},
			interval: true, joinSide: operator.SideLeft, wm: window.NoWatermark, groupKey: "k\x00\xff", body: []byte(`{}`)},
		{target: 1, in: kgo.Record{Topic: "in", Timestamp: ts, Value: []byte("raw")},
			interval: true, joinSide: operator.SideRight, wm: window.NoWatermark, groupKey: "k", body: rawJoinValue()},
	}
}

// rawJoinValue is the join record of a raw record (framed: version 3).
func rawJoinValue() []byte {
	b, err := (&operator.Record{Value: []byte("raw \xff"), Format: config.FormatRaw}).AppendJoinValue(nil)
	if err != nil || !operator.JoinRecordFramed(b) {
		panic(fmt.Sprintf("a raw record's join record %q: %v", b, err))
	}
	return b
}

// TestShuffledRoundTrip: what the source side writes, the keyed side
// reads back exactly: nil and empty kept apart, every flag, extreme
// positions and times.
func TestShuffledRoundTrip(t *testing.T) {
	for i, want := range shuffledCases() {
		enc := appendShuffled(nil, &want)
		var got shuffled
		if err := decodeShuffled(enc, &got); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if !reflect.DeepEqual(normShuffled(got), normShuffled(want)) {
			t.Errorf("case %d:\n got %+v\nwant %+v", i, got, want)
		}
	}
}

// normShuffled makes two equal records compare equal: times by their
// instant, and an empty body as nil (it is read back as an empty slice).
func normShuffled(s shuffled) shuffled {
	s.in.Timestamp = time.UnixMilli(s.in.Timestamp.UnixMilli())
	if len(s.body) == 0 {
		s.body = nil
	}
	if len(s.in.Headers) == 0 {
		s.in.Headers = nil
	}
	return s
}

// TestShuffledMalformed: a record the source side did not write in this
// format is refused with an error naming what is wrong, never a panic or a
// half-read record taken as whole.
func TestShuffledMalformed(t *testing.T) {
	good := appendShuffled(nil, &shuffledCases()[2])
	framed := appendShuffled(nil, &shuffledCases()[4])
	if framed[1] != shuffleJoinRecordVersion {
		t.Fatalf("an interval join's framed record is version %d", framed[1])
	}
	for _, c := range []struct {
		name string
		v    []byte
		want string
	}{
		{"empty", nil, "no magic byte"},
		{"old format (the input value)", []byte(`{"key":"a"}`), "no magic byte"},
		{"next version", append([]byte{shuffleMagic, shuffleJoinRecordVersion + 1}, good[2:]...), "version 4, this process reads versions 1 to 3"},
		{"version 3, a JSON body", append([]byte{shuffleMagic, shuffleJoinRecordVersion}, good[2:]...), "body: not the body of a version-3 record"},
		{"version 1, a framed body", append([]byte{shuffleMagic, shuffleVersion}, framed[2:]...), "body: not the body of a version-1 record"},
		{"a bundle as a frame", append([]byte{shuffleMagic, shuffleBundleVersion}, good[2:]...), "a bundle inside a bundle"},
		{"trailing byte", append(append([]byte{}, good...), 0), "bytes after the last field"},
		{"unknown flag", []byte{shuffleMagic, shuffleVersion, 1 << 5}, "unknown flags"},
		{"watermark without time", []byte{shuffleMagic, shuffleVersion, shuffleWatermark}, "watermark without an event time"},
		{"join side without join", []byte{shuffleMagic, shuffleVersion, shuffleRightSide}, "join side without an interval join"},
		{"length past the end", []byte{shuffleMagic, shuffleVersion, 0, 0, 100, 'a'}, "source topic: length 100 beyond the record's end"},
		{"negative partition", []byte{shuffleMagic, shuffleVersion, 0, 0, 0, 1}, "source partition: -1 out of range"},
		{"bad key kind", append([]byte{shuffleMagic, shuffleVersion, 0, 0, 0, 0, 0, 0, 0}, 9), "key kind: unknown kind 9"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s shuffled
			err := decodeShuffled(c.v, &s)
			if !errors.Is(err, errShuffled) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an errShuffled saying %q", err, c.want)
			}
		})
	}
	// Every cut of a good record fails.
	for n := range len(good) {
		var s shuffled
		if err := decodeShuffled(good[:n], &s); !errors.Is(err, errShuffled) {
			t.Fatalf("the first %d of %d bytes: got %v, want errShuffled", n, len(good), err)
		}
	}
}

// FuzzShuffled: decoding never panics, and what it accepts encodes to a
// record that decodes the same.
func FuzzShuffled(f *testing.F) {
	for _, c := range shuffledCases() {
		f.Add(appendShuffled(nil, &c))
	}
	f.Add([]byte{shuffleMagic, shuffleVersion})
	f.Fuzz(func(t *testing.T, v []byte) {
		var s shuffled
		if err := decodeShuffled(v, &s); err != nil {
			if !errors.Is(err, errShuffled) {
				t.Fatalf("error %v is not errShuffled", err)
			}
			return
		}
		var again shuffled
		if err := decodeShuffled(appendShuffled(nil, &s), &again); err != nil {
			t.Fatalf("re-encoded record refused: %v", err)
		}
		if !reflect.DeepEqual(normShuffled(s), normShuffled(again)) {
			t.Fatalf("round trip changed it:\n%+v\n%+v", s, again)
		}
	})
}

// shuffledBundle is a bundle of the frames of cases.
func shuffledBundle(cases []shuffled) []byte {
	var b []byte
	for _, c := range cases {
		b = appendFrame(b, appendShuffled(nil, &c))
	}
	return b
}

// TestShuffleBundleRoundTrip: a bundle's frames come back whole and in
// order, each decoding to the record it was; a version-1 record alone is
// its own one frame.
func TestShuffleBundleRoundTrip(t *testing.T) {
	cases := shuffledCases()
	bundle := shuffledBundle(cases)
	frames, err := shuffleFrames(bundle, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(frames) != len(cases) {
		t.Fatalf("%d frames, want %d", len(frames), len(cases))
	}
	for i, f := range frames {
		var got shuffled
		if err := decodeShuffled(f, &got); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if !reflect.DeepEqual(normShuffled(got), normShuffled(cases[i])) {
			t.Errorf("frame %d:\n got %+v\nwant %+v", i, got, cases[i])
		}
	}
	one := appendShuffled(nil, &cases[0])
	frames, err = shuffleFrames(one, frames[:0])
	if err != nil || len(frames) != 1 || !bytes.Equal(frames[0], one) {
		t.Fatalf("a version-1 record: frames %q, %v; want itself", frames, err)
	}
}

// TestShuffleBundleMalformed: a bundle whose framing does not parse is
// refused whole, saying why, with no frame taken from it; every cut of a
// good bundle but at a frame's end is such a bundle.
func TestShuffleBundleMalformed(t *testing.T) {
	for _, c := range []struct {
		name string
		v    []byte
		want string
	}{
		{"no frames", []byte{shuffleMagic, shuffleBundleVersion}, "no frames"},
		{"length past the end", []byte{shuffleMagic, shuffleBundleVersion, 3, 1, 2}, "length 3 beyond the record's end"},
		{"overlong length", append([]byte{shuffleMagic, shuffleBundleVersion}, bytes.Repeat([]byte{0xff}, 11)...), "overlong varint"},
	} {
		t.Run(c.name, func(t *testing.T) {
			frames, err := shuffleFrames(c.v, nil)
			if !errors.Is(err, errShuffled) || !strings.Contains(err.Error(), c.want) || len(frames) != 0 {
				t.Fatalf("got %d frames, %v; want none and an errShuffled saying %q", len(frames), err, c.want)
			}
		})
	}
	cases := shuffledCases()
	bundle := shuffledBundle(cases)
	ends := map[int]bool{}
	for i := range cases {
		ends[len(shuffledBundle(cases[:i+1]))] = true
	}
	for n := 2; n < len(bundle); n++ {
		frames, err := shuffleFrames(bundle[:n], nil)
		if ends[n] {
			if err != nil {
				t.Fatalf("cut at a frame's end (%d bytes): %v", n, err)
			}
			continue
		}
		if !errors.Is(err, errShuffled) || len(frames) != 0 {
			t.Fatalf("the first %d of %d bytes: %d frames, %v; want none and errShuffled", n, len(bundle), len(frames), err)
		}
	}
}

// FuzzShuffledBundle: splitting a repartition record into frames never
// panics and loses nothing: what it accepts is exactly its frames, which
// framed again split into the same frames, and every frame decodes or is
// refused with errShuffled (a dead letter of its own).
func FuzzShuffledBundle(f *testing.F) {
	cases := shuffledCases()
	f.Add(shuffledBundle(cases))
	f.Add(shuffledBundle(cases[:1]))
	f.Add(appendShuffled(nil, &cases[2]))
	f.Add([]byte{shuffleMagic, shuffleBundleVersion})
	f.Add([]byte{shuffleMagic, shuffleBundleVersion, 2, shuffleMagic, shuffleBundleVersion})
	f.Fuzz(func(t *testing.T, v []byte) {
		frames, err := shuffleFrames(v, nil)
		if err != nil {
			if !errors.Is(err, errShuffled) || len(frames) != 0 {
				t.Fatalf("refused with %d frames and %v; want none and errShuffled", len(frames), err)
			}
			return
		}
		if !isBundle(v) {
			if len(frames) != 1 || !bytes.Equal(frames[0], v) {
				t.Fatalf("not a bundle, but split into %q", frames)
			}
		} else {
			// The frames and their lengths are the whole bundle (a length
			// may be written in more bytes than it needs): framed again,
			// they split into the same frames.
			var again []byte
			size := 2
			for _, fr := range frames {
				again = appendFrame(again, fr)
				size += 1 + len(fr)
			}
			if size > len(v) {
				t.Fatalf("frames %q take more than the bundle %q", frames, v)
			}
			back, err := shuffleFrames(again, nil)
			if err != nil || !reflect.DeepEqual(back, frames) {
				t.Fatalf("frames %q framed again split into %q, %v", frames, back, err)
			}
		}
		for i, fr := range frames {
			var s shuffled
			if err := decodeShuffled(fr, &s); err != nil && !errors.Is(err, errShuffled) {
				t.Fatalf("frame %d: error %v is not errShuffled", i, err)
			}
		}
	})
}
