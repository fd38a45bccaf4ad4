package datagen

import "strconv"

// Event is the benchmark workload's record (bench/README.md):
// {"key":"<key>","amount":<amount>,"ts":<unix ms>,"pad":"xx…"}, padded with
// x's to about size bytes. The workload, the recovery benchmark and the
// runtime's hot-path benchmark all feed it, so they measure the same bytes.
func Event(key string, amount int, ts int64, size int) []byte {
	b := make([]byte, 0, size+16)
	b = append(b, `{"key":"`...)
	b = append(b, key...)
	b = append(b, `","amount":`...)
	b = strconv.AppendInt(b, int64(amount), 10)
	b = append(b, `,"ts":`...)
	b = strconv.AppendInt(b, ts, 10)
	b = append(b, `,"pad":"`...)
	for len(b) < size-2 {
		b = append(b, 'x')
	}
	return append(b, `"}`...)
}
