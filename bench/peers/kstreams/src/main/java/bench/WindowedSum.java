package bench;

import java.time.Duration;
import java.time.Instant;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.processor.TimestampExtractor;

/**
 * The benchmark's windowed sum in Kafka Streams: input values
 * {"key":"k1","amount":7,"ts":1700000000000} keyed by "key", event time from
 * "ts" (a TimestampExtractor), per key and 1 s tumbling window (no grace)
 * the count and the sum of amount, one output per window once it closes
 * (suppress untilWindowCloses), {"key","window_start","window_end","count",
 * "sum"}: the same job and output as the pipeline's windowed.yaml.
 *
 * Arguments: bootstrap input output applicationId guarantee commitMs
 * threads, as KeyedSum. Run with java -cp kstreams-bench.jar
 * bench.WindowedSum.
 */
public final class WindowedSum {
  public static void main(String[] args) throws Exception {
    if (args.length != 7) {
      System.err.println("usage: WindowedSum bootstrap input output appId exactly_once_v2|at_least_once commitMs threads");
      System.exit(2);
    }
    Properties p = new Properties();
    p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
    p.put(StreamsConfig.APPLICATION_ID_CONFIG, args[3]);
    p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, args[4]);
    p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, args[5]);
    p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, args[6]);
    p.put(StreamsConfig.STATE_DIR_CONFIG, System.getProperty("java.io.tmpdir") + "/kstreams-bench-" + args[3]);
    p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
    p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.String().getClass());
    p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.String().getClass());
    p.put(StreamsConfig.DEFAULT_TIMESTAMP_EXTRACTOR_CLASS_CONFIG, EventTime.class);

    StreamsBuilder b = new StreamsBuilder();
    b.stream(args[1], Consumed.with(Serdes.String(), Serdes.String()))
        .groupByKey(Grouped.with(Serdes.String(), Serdes.String()))
        .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofSeconds(1), Duration.ZERO))
        // state: "count,sum"
        .aggregate(() -> "0,0", (key, value, agg) -> {
              int c = agg.indexOf(',');
              long count = Long.parseLong(agg, 0, c, 10) + 1;
              long sum = Long.parseLong(agg, c + 1, agg.length(), 10) + KeyedSum.field(value, "\"amount\":");
              return count + "," + sum;
            },
            Materialized.with(Serdes.String(), Serdes.String()))
        .suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()))
        .toStream()
        .map((w, agg) -> {
          int c = agg.indexOf(',');
          String v = "{\"key\":\"" + w.key() + "\",\"window_start\":\"" + Instant.ofEpochMilli(w.window().start())
              + "\",\"window_end\":\"" + Instant.ofEpochMilli(w.window().end()) + "\",\"count\":" + agg.substring(0, c)
              + ",\"sum\":" + agg.substring(c + 1) + "}";
          return KeyValue.pair(w.key(), v);
        })
        .to(args[2], Produced.with(Serdes.String(), Serdes.String()));

    KafkaStreams streams = new KafkaStreams(b.build(), p);
    CountDownLatch done = new CountDownLatch(1);
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      streams.close();
      streams.cleanUp();
      KeyedSum.deleteTree(new java.io.File(p.getProperty(StreamsConfig.STATE_DIR_CONFIG)));
      done.countDown();
    }));
    streams.cleanUp();
    streams.start();
    done.await();
  }

  /** Event time from the value's "ts" field. */
  public static final class EventTime implements TimestampExtractor {
    @Override
    public long extract(ConsumerRecord<Object, Object> record, long partitionTime) {
      return KeyedSum.field((String) record.value(), "\"ts\":");
    }
  }
}
