package twophase

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// bytesChooser makes the simulation's choices from fuzz input, one byte
// each (two for more than 256 options); once the input is used up it
// answers 0 and the run winds down.
type bytesChooser struct {
	data []byte
	used bool
}

func (c *bytesChooser) IntN(n int) int {
	v := c.next()
	if n > 256 {
		v = v<<8 | c.next()
	}
	return v % n
}

func (c *bytesChooser) next() int {
	if len(c.data) == 0 {
		c.used = true
		return 0
	}
	b := c.data[0]
	c.data = c.data[1:]
	return int(b)
}

// FuzzMachine drives the simulation from fuzz bytes: the participants,
// tasks and timing, which message comes next, which call completes, which
// fails and how, crashes, takeovers, fences, bogus messages. The Machine
// must never panic, never refuse the outcome of a call it emitted or an
// ack the model says is due, and every invariant the simulation checks
// must hold. Run it with
//
//	go test -run '^$' -fuzz FuzzMachine -fuzztime 30s -fuzzminimizetime 2s ./twophase/
func FuzzMachine(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{3, 2, 1, 0, 0, 50, 50, 50, 50, 0, 13, 50, 50, 50, 50, 50, 50})
	for seed := range uint64(8) {
		r := rand.New(rand.NewPCG(seed, 7))
		b := make([]byte, 64+r.IntN(1024))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ch := &bytesChooser{data: data}
		w := newWorld(t, fmt.Sprintf("fuzz input %x", data), ch, newStats())
		w.cur = w.start()
		for n := 0; !ch.used && n < 4000; n++ {
			w.move()
		}
		w.finish()
	})
}
