package bench;

import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * The benchmark's keyed sum in Kafka Streams: input values
 * {"key":"k1","amount":7,"ts":1700000000000} keyed by "key" (the workload
 * sets the record key to the same value, so no repartition is needed),
 * output per input the running {"key","sum","count","ts"} with ts the
 * latest input ts of the key: the same job as the pipeline's keyed-sum.
 *
 * Arguments: bootstrap input output applicationId guarantee commitMs threads.
 * The record cache is off (statestore.cache.max.bytes=0) so that every input
 * emits one output, like the pipeline's emit: every_record.
 */
public final class KeyedSum {
  public static void main(String[] args) throws Exception {
    if (args.length != 7) {
      System.err.println("usage: KeyedSum bootstrap input output appId exactly_once_v2|at_least_once commitMs threads");
      System.exit(2);
    }
    Properties p = new Properties();
    p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
    p.put(StreamsConfig.APPLICATION_ID_CONFIG, args[3]);
    p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, args[4]);
    p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, args[5]);
    p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, args[6]);
    p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0");
    p.put(StreamsConfig.STATE_DIR_CONFIG, System.getProperty("java.io.tmpdir") + "/kstreams-bench-" + args[3]);
    p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
    p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.String().getClass());
    p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.String().getClass());

    StreamsBuilder b = new StreamsBuilder();
    b.stream(args[1], Consumed.with(Serdes.String(), Serdes.String()))
        .groupByKey(Grouped.with(Serdes.String(), Serdes.String()))
        // state: "sum,count,ts"
        .aggregate(() -> "0,0,0", (key, value, agg) -> {
              int c1 = agg.indexOf(',');
              int c2 = agg.indexOf(',', c1 + 1);
              long sum = Long.parseLong(agg, 0, c1, 10) + field(value, "\"amount\":");
              long count = Long.parseLong(agg, c1 + 1, c2, 10) + 1;
              long ts = field(value, "\"ts\":");
              return sum + "," + count + "," + ts;
            },
            Materialized.with(Serdes.String(), Serdes.String()))
        .toStream()
        .mapValues((key, agg) -> {
          String[] f = agg.split(",", 3);
          return "{\"key\":\"" + key + "\",\"sum\":" + f[0] + ",\"count\":" + f[1] + ",\"ts\":" + f[2] + "}";
        })
        .to(args[2], Produced.with(Serdes.String(), Serdes.String()));

    KafkaStreams streams = new KafkaStreams(b.build(), p);
    CountDownLatch done = new CountDownLatch(1);
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      streams.close();
      // The runner stops every contender with SIGTERM: leave no state
      // directory behind in /tmp, run after run.
      streams.cleanUp();
      deleteTree(new java.io.File(p.getProperty(StreamsConfig.STATE_DIR_CONFIG)));
      done.countDown();
    }));
    streams.cleanUp();
    streams.start();
    done.await();
  }

  static void deleteTree(java.io.File f) {
    java.io.File[] children = f.listFiles();
    if (children != null) {
      for (java.io.File c : children) {
        deleteTree(c);
      }
    }
    f.delete();
  }

  /** The integer after name in a flat JSON object (no escapes, no spaces). */
  static long field(String json, String name) {
    int i = json.indexOf(name);
    if (i < 0) {
      return 0;
    }
    i += name.length();
    int j = i;
    while (j < json.length() && (Character.isDigit(json.charAt(j)) || json.charAt(j) == '-')) {
      j++;
    }
    return Long.parseLong(json, i, j, 10);
  }
}
