package bench;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.Properties;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.AggregateFunction;
import org.apache.flink.api.common.serialization.SimpleStringSchema;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.CoreOptions;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.core.execution.CheckpointingMode;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.windowing.ProcessWindowFunction;
import org.apache.flink.streaming.api.windowing.assigners.TumblingEventTimeWindows;
import org.apache.flink.streaming.api.windowing.windows.TimeWindow;
import org.apache.flink.util.Collector;

/**
 * The benchmark's windowed sum in Apache Flink (local MiniCluster, as
 * KeyedSum): event time from the value's "ts" with bounded out-of-orderness
 * 0 (the windowed workload is in order per partition), keyBy key, 1 s
 * tumbling event-time windows, count and sum of amount incrementally
 * (AggregateFunction), one output per window {"key","window_start",
 * "window_end","count","sum"} keyed by key through KafkaSink. Arguments as
 * KeyedSum; run with java -cp flink-bench.jar bench.WindowedSum.
 */
public final class WindowedSum {
  public static void main(String[] args) throws Exception {
    if (args.length != 7) {
      System.err.println("usage: WindowedSum bootstrap input output id exactly_once|at_least_once checkpointMs threads");
      System.exit(2);
    }
    String brokers = args[0], input = args[1], output = args[2], id = args[3];
    boolean exactlyOnce = args[4].equals("exactly_once");
    long intervalMs = Long.parseLong(args[5]);
    int threads = Integer.parseInt(args[6]);

    Configuration conf = new Configuration();
    Path tmp = Files.createTempDirectory("flink-bench-");
    Runtime.getRuntime().addShutdownHook(new Thread(() -> KeyedSum.deleteTree(tmp)));
    conf.set(CoreOptions.TMP_DIRS, tmp.toString());
    conf.set(RestOptions.BIND_PORT, "0");
    // The open windows of 100,000 keys outgrow the 5 MB a checkpoint may
    // hold in the JobManager's memory: checkpoint to files, as a real
    // deployment would.
    conf.set(CheckpointingOptions.CHECKPOINT_STORAGE, "filesystem");
    conf.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, tmp.resolve("checkpoints").toUri().toString());
    StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(threads, conf);
    env.enableCheckpointing(intervalMs, exactlyOnce ? CheckpointingMode.EXACTLY_ONCE : CheckpointingMode.AT_LEAST_ONCE);

    KafkaSource<String> source = KafkaSource.<String>builder()
        .setBootstrapServers(brokers)
        .setTopics(input)
        .setGroupId(id)
        .setStartingOffsets(OffsetsInitializer.earliest())
        .setValueOnlyDeserializer(new SimpleStringSchema())
        .setProperty("isolation.level", "read_committed")
        .build();
    Properties producer = new Properties();
    producer.setProperty("transaction.timeout.ms", "60000");
    KafkaSink<Tuple2<String, String>> sink = KafkaSink.<Tuple2<String, String>>builder()
        .setBootstrapServers(brokers)
        .setKafkaProducerConfig(producer)
        .setRecordSerializer(new KeyedSum.KeyedRecord(output))
        .setDeliveryGuarantee(exactlyOnce ? DeliveryGuarantee.EXACTLY_ONCE : DeliveryGuarantee.AT_LEAST_ONCE)
        .setTransactionalIdPrefix(id)
        .build();

    WatermarkStrategy<String> events = WatermarkStrategy.<String>forBoundedOutOfOrderness(Duration.ZERO)
        .withTimestampAssigner((json, previous) -> KeyedSum.field(json, "\"ts\":"));
    env.fromSource(source, events, "kafka-in")
        .map(KeyedSum::parse).returns(Types.TUPLE(Types.STRING, Types.LONG, Types.LONG)).name("parse")
        .keyBy(t -> t.f0, Types.STRING)
        .window(TumblingEventTimeWindows.of(Duration.ofSeconds(1)))
        .aggregate(new CountSum(), new Emit(), Types.TUPLE(Types.LONG, Types.LONG), Types.TUPLE(Types.STRING, Types.STRING), Types.TUPLE(Types.STRING, Types.STRING))
        .name("windowed-sum")
        .sinkTo(sink).name("kafka-out");
    env.execute("flink-windowed-sum-" + id);
  }

  /** (count, sum) of a window, added up as records arrive. */
  static final class CountSum implements AggregateFunction<Tuple3<String, Long, Long>, Tuple2<Long, Long>, Tuple2<Long, Long>> {
    @Override
    public Tuple2<Long, Long> createAccumulator() {
      return Tuple2.of(0L, 0L);
    }

    @Override
    public Tuple2<Long, Long> add(Tuple3<String, Long, Long> in, Tuple2<Long, Long> acc) {
      return Tuple2.of(acc.f0 + 1, acc.f1 + in.f1);
    }

    @Override
    public Tuple2<Long, Long> getResult(Tuple2<Long, Long> acc) {
      return acc;
    }

    @Override
    public Tuple2<Long, Long> merge(Tuple2<Long, Long> a, Tuple2<Long, Long> b) {
      return Tuple2.of(a.f0 + b.f0, a.f1 + b.f1);
    }
  }

  /** The window's output record. */
  static final class Emit extends ProcessWindowFunction<Tuple2<Long, Long>, Tuple2<String, String>, String, TimeWindow> {
    @Override
    public void process(String key, Context ctx, Iterable<Tuple2<Long, Long>> in, Collector<Tuple2<String, String>> out) {
      Tuple2<Long, Long> cs = in.iterator().next();
      TimeWindow w = ctx.window();
      out.collect(Tuple2.of(key, "{\"key\":\"" + key + "\",\"window_start\":\"" + Instant.ofEpochMilli(w.getStart())
          + "\",\"window_end\":\"" + Instant.ofEpochMilli(w.getEnd()) + "\",\"count\":" + cs.f0 + ",\"sum\":" + cs.f1 + "}"));
    }
  }
}
