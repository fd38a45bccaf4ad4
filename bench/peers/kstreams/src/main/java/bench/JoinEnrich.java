package bench;

import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StoreQueryParameters;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.QueryableStoreTypes;

/**
 * The benchmark's stream–table join in Kafka Streams: orders
 * {"id":1,"customer":"c1","n":3,"ts":...} keyed by customer, left-joined
 * with the source KTable of the compacted customers topic (key the
 * customer, value {"tier":"gold"}), written out per order as
 * {"id":1,"customer":"c1","n":3,"tier":"gold"} ("none" when the table does
 * not hold the customer), keyed by the customer: the same job as the
 * pipeline's bench/jobs/join-enrich.yaml.
 *
 * topology.optimization=all: the source KTable uses its own topic as its
 * changelog (no second topic), so on every start its RocksDB store is
 * restored from that topic to its end before the task processes orders,
 * as the pipeline reads its table's topic to its end.
 *
 * Arguments: bootstrap orders customers output applicationId guarantee
 * commitMs threads. It prints one line "bench: RUNNING after <ms> ms ..."
 * (ms since the JVM started) once the instance is RUNNING and its restore
 * listener has seen the restore of every partition of the table that
 * holds records end (RUNNING alone can come before), with the records
 * restored, the time from the first partition's restore start to the last
 * one's end, the store's approximate keys, and its VmRSS and JVM heap
 * then.
 */
public final class JoinEnrich {
  public static void main(String[] args) throws Exception {
    if (args.length != 8) {
      System.err.println("usage: JoinEnrich bootstrap orders customers output appId exactly_once_v2|at_least_once commitMs threads");
      System.exit(2);
    }
    Properties p = new Properties();
    p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
    p.put(StreamsConfig.APPLICATION_ID_CONFIG, args[4]);
    p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, args[5]);
    p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, args[6]);
    p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, args[7]);
    p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0");
    p.put(StreamsConfig.TOPOLOGY_OPTIMIZATION_CONFIG, StreamsConfig.OPTIMIZE);
    p.put(StreamsConfig.STATE_DIR_CONFIG, System.getProperty("java.io.tmpdir") + "/kstreams-bench-" + args[4]);
    p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
    // Static membership: a restart (the runner's restore) takes its
    // partitions back at once, instead of waiting for the group to expire
    // the stopped member (session.timeout.ms, 45 s: a dynamic member does
    // not leave its group on close), which would be counted as restore.
    p.put(StreamsConfig.mainConsumerPrefix(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG), args[4]);
    p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.String().getClass());
    p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.String().getClass());

    StreamsBuilder b = new StreamsBuilder();
    KTable<String, String> customers = b.table(args[2], Consumed.with(Serdes.String(), Serdes.String()),
        Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("customers")
            .withKeySerde(Serdes.String()).withValueSerde(Serdes.String()));
    b.stream(args[1], Consumed.with(Serdes.String(), Serdes.String()))
        .leftJoin(customers, (order, customer) -> {
          // The order without its "ts", with the customer's tier.
          int ts = order.indexOf(",\"ts\":");
          String head = ts < 0 ? order.substring(0, order.length() - 1) : order.substring(0, ts);
          return head + ",\"tier\":\"" + tier(customer) + "\"}";
        })
        .to(args[3], Produced.with(Serdes.String(), Serdes.String()));

    // The table's partitions that hold records: each is restored (an
    // empty one may not be), and the table is read to its end once the
    // restore listener has seen every one of them end.
    int need = 0;
    Properties ap = new Properties();
    ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
    try (Admin admin = Admin.create(ap)) {
      Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
      for (TopicPartitionInfo pi : admin.describeTopics(List.of(args[2])).allTopicNames().get().get(args[2]).partitions()) {
        latest.put(new TopicPartition(args[2], pi.partition()), OffsetSpec.latest());
      }
      for (ListOffsetsResult.ListOffsetsResultInfo i : admin.listOffsets(latest).all().get().values()) {
        if (i.offset() > 0) {
          need++;
        }
      }
    }
    KafkaStreams streams = new KafkaStreams(b.build(p), p);
    Loaded loaded = new Loaded(need, streams);
    streams.setGlobalStateRestoreListener(new StateRestoreListener() {
      @Override
      public void onRestoreStart(TopicPartition tp, String store, long start, long end) {
        loaded.start();
      }

      @Override
      public void onBatchRestored(TopicPartition tp, String store, long batchEnd, long n) {}

      @Override
      public void onRestoreEnd(TopicPartition tp, String store, long n) {
        loaded.end(n);
      }
    });
    streams.setStateListener((now, before) -> {
      System.out.println("bench: state " + before + " -> " + now + " after " + loaded.sinceStart() + " ms");
      if (now == KafkaStreams.State.RUNNING) {
        loaded.running();
      }
    });
    CountDownLatch done = new CountDownLatch(1);
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      streams.close(Duration.ofSeconds(30));
      // The runner stops every contender with SIGTERM: leave no state
      // directory behind in /tmp, run after run.
      streams.cleanUp();
      KeyedSum.deleteTree(new java.io.File(p.getProperty(StreamsConfig.STATE_DIR_CONFIG)));
      done.countDown();
    }));
    streams.cleanUp();
    streams.start();
    done.await();
  }

  /**
   * When the instance is RUNNING and every partition of the table that
   * holds records is restored, prints once "bench: RUNNING after <ms> ms
   * restored=<records> restore_ms=<first start to last end>" with the
   * store's approximate keys, VmRSS and the JVM heap then.
   */
  static final class Loaded {
    final int need;
    final KafkaStreams streams;
    final long jvmStart = ManagementFactory.getRuntimeMXBean().getStartTime();
    int ended;
    long restored, firstStart, lastEnd;
    boolean running, printed;

    Loaded(int need, KafkaStreams streams) {
      this.need = need;
      this.streams = streams;
    }

    long sinceStart() {
      return System.currentTimeMillis() - jvmStart;
    }

    synchronized void start() {
      if (firstStart == 0) {
        System.out.println("bench: restore started after " + sinceStart() + " ms");
        firstStart = System.nanoTime();
      }
    }

    synchronized void end(long n) {
      ended++;
      restored += n;
      lastEnd = System.nanoTime();
      check();
    }

    synchronized void running() {
      running = true;
      check();
    }

    private void check() {
      if (printed || !running || ended < need) {
        return;
      }
      printed = true;
      long restoreMs = firstStart == 0 ? 0 : (lastEnd - firstStart) / 1_000_000;
      long keys = -1;
      try {
        keys = streams.store(StoreQueryParameters.fromNameAndType("customers", QueryableStoreTypes.<String, String>keyValueStore()))
            .approximateNumEntries();
      } catch (RuntimeException e) {
        // not queryable: say -1
      }
      Runtime rt = Runtime.getRuntime();
      System.out.println("bench: RUNNING after " + sinceStart() + " ms"
          + " restored=" + restored + " restore_ms=" + restoreMs + " partitions=" + ended + "/" + need
          + " store_keys~" + keys + " rss_kib=" + rssKiB() + " heap_used_mib=" + (rt.totalMemory() - rt.freeMemory()) / (1 << 20)
          + " heap_committed_mib=" + rt.totalMemory() / (1 << 20));
      System.out.flush();
    }
  }

  /** The tier of a customer value {"tier":"gold"}, or "none" (null: no customer). */
  static String tier(String customer) {
    if (customer == null) {
      return "none";
    }
    int i = customer.indexOf("\"tier\":\"");
    if (i < 0) {
      return "none";
    }
    i += 8;
    return customer.substring(i, customer.indexOf('"', i));
  }

  /** VmRSS of this process in KiB, from /proc (-1: unreadable). */
  static long rssKiB() {
    try {
      for (String l : Files.readAllLines(Path.of("/proc/self/status"))) {
        if (l.startsWith("VmRSS:")) {
          return Long.parseLong(l.substring(6).trim().split("\\s+")[0]);
        }
      }
    } catch (Exception e) {
      // fall through
    }
    return -1;
  }
}
