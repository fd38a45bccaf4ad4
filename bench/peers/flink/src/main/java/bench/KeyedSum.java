package bench;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.Properties;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.serialization.SimpleStringSchema;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.CoreOptions;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.core.execution.CheckpointingMode;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.util.Collector;
import org.apache.kafka.clients.producer.ProducerRecord;

/**
 * The benchmark's keyed sum in Apache Flink, as a local MiniCluster job (the
 * whole Flink runtime in this one JVM, parallelism = threads): input values
 * {"key":"k1","amount":7,"ts":1700000000000,"pad":".."} read with KafkaSource
 * from the earliest offset (read_committed), keyBy key, sum(amount), count
 * and the latest ts in keyed ValueState (heap state backend), one output per
 * input {"key","sum","count","ts"} keyed by key, written by KafkaSink: the
 * same job and output as the Kafka Streams peer and the pipeline's keyed-sum.
 *
 * Arguments (as the Kafka Streams peer): bootstrap input output id guarantee
 * checkpointMs threads, with guarantee exactly_once (checkpoints with
 * barrier alignment, a transactional sink whose transaction commits when a
 * checkpoint completes: output becomes visible to read_committed readers
 * only then) or at_least_once (at-least-once checkpoints, a sink that only
 * flushes on a checkpoint, no transactions). id names the consumer group
 * and the transactional id prefix, so it is unique per run.
 */
public final class KeyedSum {
  public static void main(String[] args) throws Exception {
    if (args.length != 7) {
      System.err.println("usage: KeyedSum bootstrap input output id exactly_once|at_least_once checkpointMs threads");
      System.exit(2);
    }
    String brokers = args[0], input = args[1], output = args[2], id = args[3], guarantee = args[4];
    long intervalMs = Long.parseLong(args[5]);
    int threads = Integer.parseInt(args[6]);
    boolean exactlyOnce;
    switch (guarantee) {
      case "exactly_once" -> exactlyOnce = true;
      case "at_least_once" -> exactlyOnce = false;
      default -> {
        System.err.println("guarantee must be exactly_once or at_least_once, not " + guarantee);
        System.exit(2);
        return;
      }
    }

    Configuration conf = new Configuration();
    // Flink unpacks its RPC system (a 21 MB jar) and other files into
    // io.tmp.dirs and leaves them when the job is stopped by a signal, as
    // the runner stops it: keep them in one directory of this run and
    // remove it on exit.
    Path tmp = Files.createTempDirectory("flink-bench-");
    Runtime.getRuntime().addShutdownHook(new Thread(() -> deleteTree(tmp)));
    conf.set(CoreOptions.TMP_DIRS, tmp.toString());
    // Any free port for the MiniCluster's REST endpoint, never a fixed 8081.
    conf.set(RestOptions.BIND_PORT, "0");
    // A million keys of state outgrow the 5 MB a checkpoint may hold in the
    // JobManager's memory (every checkpoint failed, the job stalled):
    // checkpoint to files, as a real deployment would and as WindowedSum does.
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
    // Below the broker's transaction.max.timeout.ms (15 min by default;
    // Flink's own default of 1 h would be refused).
    producer.setProperty("transaction.timeout.ms", "60000");
    KafkaSink<Tuple2<String, String>> sink = KafkaSink.<Tuple2<String, String>>builder()
        .setBootstrapServers(brokers)
        .setKafkaProducerConfig(producer)
        .setRecordSerializer(new KeyedRecord(output))
        .setDeliveryGuarantee(exactlyOnce ? DeliveryGuarantee.EXACTLY_ONCE : DeliveryGuarantee.AT_LEAST_ONCE)
        .setTransactionalIdPrefix(id)
        .build();

    TypeInformation<Tuple3<String, Long, Long>> parsed = Types.TUPLE(Types.STRING, Types.LONG, Types.LONG);
    env.fromSource(source, WatermarkStrategy.noWatermarks(), "kafka-in")
        .map(KeyedSum::parse).returns(parsed).name("parse")
        .keyBy(t -> t.f0, Types.STRING)
        .process(new Sum()).returns(Types.TUPLE(Types.STRING, Types.STRING)).name("keyed-sum")
        .sinkTo(sink).name("kafka-out");

    env.execute("flink-keyed-sum-" + id);
  }

  /** (key, amount, ts) of one input value. */
  static Tuple3<String, Long, Long> parse(String json) {
    return Tuple3.of(str(json, "\"key\":\""), field(json, "\"amount\":"), field(json, "\"ts\":"));
  }

  /** The keyed state: sum, count, last ts; one output per input. */
  static final class Sum extends KeyedProcessFunction<String, Tuple3<String, Long, Long>, Tuple2<String, String>> {
    private transient ValueState<long[]> state;

    @Override
    public void open(OpenContext ctx) {
      state = getRuntimeContext().getState(new ValueStateDescriptor<>("sum-count-ts", PrimitiveArrayTypeInfo.LONG_PRIMITIVE_ARRAY_TYPE_INFO));
    }

    @Override
    public void processElement(Tuple3<String, Long, Long> in, Context ctx, Collector<Tuple2<String, String>> out) throws Exception {
      long[] s = state.value();
      if (s == null) {
        s = new long[3];
      }
      s[0] += in.f1;
      s[1]++;
      s[2] = in.f2;
      state.update(s);
      out.collect(Tuple2.of(in.f0, "{\"key\":\"" + in.f0 + "\",\"sum\":" + s[0] + ",\"count\":" + s[1] + ",\"ts\":" + s[2] + "}"));
    }
  }

  /** (key, value) to a record of the output topic, keyed by key (default partitioner). */
  static final class KeyedRecord implements KafkaRecordSerializationSchema<Tuple2<String, String>> {
    private final String topic;

    KeyedRecord(String topic) {
      this.topic = topic;
    }

    @Override
    public ProducerRecord<byte[], byte[]> serialize(Tuple2<String, String> kv, KafkaSinkContext ctx, Long timestamp) {
      return new ProducerRecord<>(topic, kv.f0.getBytes(StandardCharsets.UTF_8), kv.f1.getBytes(StandardCharsets.UTF_8));
    }
  }

  /**
   * Removes dir and everything in it, ignoring what vanishes or cannot be
   * removed on the way: Flink's own shutdown hooks delete and write in it at
   * the same time, so it tries a few times.
   */
  static void deleteTree(Path dir) {
    for (int i = 0; i < 10 && Files.exists(dir); i++) {
      try {
        Files.walkFileTree(dir, new SimpleFileVisitor<>() {
          @Override
          public FileVisitResult visitFile(Path f, BasicFileAttributes a) {
            f.toFile().delete();
            return FileVisitResult.CONTINUE;
          }

          @Override
          public FileVisitResult visitFileFailed(Path f, IOException e) {
            return FileVisitResult.CONTINUE;
          }

          @Override
          public FileVisitResult postVisitDirectory(Path d, IOException e) {
            d.toFile().delete();
            return FileVisitResult.CONTINUE;
          }
        });
      } catch (IOException | RuntimeException e) {
        // try again
      }
      if (Files.exists(dir)) {
        try {
          Thread.sleep(100);
        } catch (InterruptedException e) {
          return;
        }
      }
    }
  }

  /** The string after name (up to the closing quote) in a flat JSON object. */
  static String str(String json, String name) {
    int i = json.indexOf(name);
    if (i < 0) {
      return "";
    }
    i += name.length();
    return json.substring(i, json.indexOf('"', i));
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
