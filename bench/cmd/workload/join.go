package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The join workload (issue 34): a compacted table topic of customers,
// written first, then a stream of orders that look them up.
//
// The table holds the keys c0 … c<keys-1>, value {"tier":"<tier>"}. Every
// 50th key is written a second time with another tier (the later value
// counts) and every 100th key (from c7 on) is deleted by a tombstone after
// its value, so a table reader must apply updates and deletes. An order is
// {"id":i,"customer":"c<k>","n":<1..100>,"ts":<unix ms>}, record key its
// customer (so the stream is co-partitioned with the table, as Kafka
// Streams' KStream–KTable join needs); a fraction -join-missing of them
// names a customer the table never held ("x<k>"). Both are deterministic
// from the seed (but for ts, the time of writing).

// joinTiers are the customers' tiers.
var joinTiers = []string{"bronze", "silver", "gold", "platinum"}

// tableRecord is one record of the customers topic; a nil value is a
// tombstone.
type tableRecord struct {
	key   string
	value []byte
}

// customers returns the records of a table of keys customers, in the
// order they are written.
func customers(keys int, seed uint64) []tableRecord {
	rng := rand.New(rand.NewPCG(seed^0x7f4a7c159e3779b9, seed))
	recs := make([]tableRecord, 0, keys+keys/50+keys/100+2)
	for i := range keys {
		recs = append(recs, tableRecord{"c" + strconv.Itoa(i), tierValue(rng.IntN(len(joinTiers)))})
	}
	for i := 0; i < keys; i += 50 {
		recs = append(recs, tableRecord{"c" + strconv.Itoa(i), tierValue(rng.IntN(len(joinTiers)))})
	}
	for i := 7; i < keys; i += 100 {
		recs = append(recs, tableRecord{"c" + strconv.Itoa(i), nil})
	}
	return recs
}

func tierValue(t int) []byte { return []byte(`{"tier":"` + joinTiers[t] + `"}`) }

// orders draws the orders' customers and amounts.
type orders struct {
	rng     *rand.Rand
	keys    int
	missing float64
}

func newOrders(keys int, missing float64, seed uint64) *orders {
	return &orders{rng: rand.New(rand.NewPCG(seed^0x2545f4914f6cdd1d, seed)), keys: keys, missing: missing}
}

// next is order i: its record key (the customer) and value.
func (o *orders) next(i int, ts int64) (string, []byte) {
	c := "c"
	if o.keys == 0 || o.rng.Float64() < o.missing {
		c = "x"
	}
	c += strconv.Itoa(o.rng.IntN(max(o.keys, 1)))
	return c, fmt.Appendf(nil, `{"id":%d,"customer":"%s","n":%d,"ts":%d}`, i, c, o.rng.IntN(100)+1, ts)
}

// tierOf is what a left join of an order of customer c with the table
// finally given by recs says: the tier, or "none".
func tierOf(recs []tableRecord) map[string]string {
	m := make(map[string]string, len(recs))
	for _, r := range recs {
		if r.value == nil {
			delete(m, r.key)
			continue
		}
		m[r.key] = strings.TrimSuffix(strings.TrimPrefix(string(r.value), `{"tier":"`), `"}`)
	}
	return m
}

// runJoin writes the customers table (keys keys) to a new compacted topic
// table, then n orders to a new topic, both of parts partitions.
func runJoin(brokers, table, topic string, n, keys, parts int, missing float64, seed uint64) error {
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(1<<20),
		kgo.MaxBufferedRecords(200_000),
		// murmur2 of the key, as Kafka's Java clients: both topics are
		// co-partitioned for Kafka Streams too.
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	compact := "compact"
	if _, err := adm.CreateTopic(ctx, int32(parts), -1, map[string]*string{"cleanup.policy": &compact}, table); err != nil {
		return fmt.Errorf("create topic %s: %w", table, err)
	}
	if _, err := adm.CreateTopic(ctx, int32(parts), -1, nil, topic); err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	p := &producer{cl: cl}
	start := time.Now()
	recs := customers(keys, seed)
	for _, r := range recs {
		p.produce(ctx, &kgo.Record{Topic: table, Key: []byte(r.key), Value: r.value})
	}
	if err := p.wait(); err != nil {
		return err
	}
	tiers := tierOf(recs)
	fmt.Printf("produced %d table records (%d keys held) to %s in %s\n", len(recs), len(tiers), table, time.Since(start).Round(time.Millisecond))
	start = time.Now()
	o := newOrders(keys, missing, seed)
	type tally struct{ count, sum int64 }
	by := map[string]*tally{}
	for i := range n {
		k, v := o.next(i, time.Now().UnixMilli())
		t, ok := tiers[k]
		if !ok {
			t = "none"
		}
		if by[t] == nil {
			by[t] = &tally{}
		}
		by[t].count++
		by[t].sum += int64(amountOf(v))
		p.produce(ctx, &kgo.Record{Topic: topic, Key: []byte(k), Value: v})
	}
	if err := p.wait(); err != nil {
		return err
	}
	fmt.Printf("produced %d orders to %s in %s; per tier (count, sum of n):", n, topic, time.Since(start).Round(time.Millisecond))
	for _, t := range append(joinTiers, "none") {
		if by[t] != nil {
			fmt.Printf(" %s %d %d", t, by[t].count, by[t].sum)
		}
	}
	fmt.Println()
	return nil
}

// amountOf is the "n" of an order value.
func amountOf(v []byte) int {
	s := string(v)
	i := strings.Index(s, `"n":`) + 4
	j := i
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	n, _ := strconv.Atoi(s[i:j])
	return n
}

// producer produces asynchronously and keeps the first error.
type producer struct {
	cl    *kgo.Client
	wg    sync.WaitGroup
	mu    sync.Mutex
	first error
}

func (p *producer) produce(ctx context.Context, r *kgo.Record) {
	p.wg.Add(1)
	p.cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
		defer p.wg.Done()
		if err != nil {
			p.mu.Lock()
			if p.first == nil {
				p.first = err
			}
			p.mu.Unlock()
		}
	})
}

func (p *producer) wait() error {
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.first
}
