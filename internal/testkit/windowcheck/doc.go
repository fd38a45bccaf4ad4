// Package windowcheck is the independent judge of the event-time
// reference job (examples/parity-windows): from the input topic alone it
// computes, in one batch pass, what the job must have written (Oracle),
// reads what it did write with read_committed, and says exactly what is
// missing, repeated or wrong (Compare). It shares no code with the
// runtime or the window package, so a bug there cannot hide here.
//
// The rules it applies, as the job's documentation states them:
//
//   - A record's window is the tumbling window [floor(ts/size)*size,
//     +size) of its key ("even" or "odd" by n).
//   - Per partition, in offset order, a record is late when its window
//     has closed at its partition's watermark: the window's end plus
//     allowed_lateness is at most the largest ts of the partition's
//     earlier records minus max_out_of_orderness. Late records go to the
//     late topic, once each, unchanged, and count in no window; a record
//     further behind than max_out_of_orderness whose window is still
//     open counts in it.
//   - A window is written once, when the job's watermark (the least over
//     all partitions of largest ts minus max_out_of_orderness; a
//     partition without records holds it) reaches its end plus
//     allowed_lateness. At the end of the input, the windows before that
//     point are expected, and no others.
package windowcheck
