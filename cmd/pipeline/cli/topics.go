package cli

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eoflow/pipeline/internal/kclient"
)

const topicsUsage = `usage:
  pipeline topics create [-c FILE] [--brokers LIST] NAME [--partitions N] [--replication-factor N] [--config KEY=VALUE]... [--if-not-exists]
  pipeline topics list [-c FILE] [--brokers LIST]
  pipeline topics describe [-c FILE] [--brokers LIST] NAME...
  pipeline topics read [-c FILE] [--brokers LIST] TOPIC [--from-beginning] [--committed=false] [--count N] [--format json|text]
  pipeline topics write [-c FILE] [--brokers LIST] TOPIC [--partition N]
      create, list, describe, read and write topics on the cluster of the job's file
      (-c, default ./config.yaml): its kafka.brokers, TLS and SASL settings, so
      no other tool is needed; --brokers names other brokers. Without
      ./config.yaml and -c: --brokers, else $KAFKA_BROKERS, else 127.0.0.1:9092
`

// topicsTimeout bounds one topics command: the brokers answer admin
// requests in milliseconds, or not at all.
const topicsTimeout = 30 * time.Second

// topicsCmd is `pipeline topics create|list|describe|read|write`.
func topicsCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, topicsUsage)
		return exitUsage
	}
	switch args[0] {
	case "create":
		return createTopic(args[1:], stdout, stderr)
	case "list":
		return listTopics(args[1:], stdout, stderr)
	case "describe":
		return describeTopics(args[1:], stdout, stderr)
	case "read":
		return readRecords(args[1:], stdout, stderr)
	case "write":
		return writeRecords(args[1:], os.Stdin, stdout, stderr)
	}
	if isHelp(args[0]) {
		fmt.Fprint(stdout, topicsUsage)
		return exitOK
	}
	fmt.Fprintf(stderr, "pipeline topics: unknown command %q\n%s", args[0], topicsUsage)
	return exitUsage
}

// clusterFlags say which cluster a topics command talks to: the one of
// the job's file (-c, default ./config.yaml: its kafka.brokers, TLS and
// SASL settings), or --brokers. Without either and without ./config.yaml,
// $KAFKA_BROKERS, else 127.0.0.1:9092, as `datagen` and the example
// files default.
type clusterFlags struct {
	fs      *flag.FlagSet
	file    string
	brokers string
}

func (c *clusterFlags) register(fs *flag.FlagSet) {
	c.fs = fs
	fs.StringVar(&c.file, "c", "config.yaml", "the job's YAML `FILE`: its kafka settings say how to connect (when ./config.yaml is absent and no -c is given: --brokers, else $KAFKA_BROKERS, else "+defaultBrokers+")")
	fs.StringVar(&c.brokers, "brokers", "", "the seed `BROKERS`, comma-separated, instead of the file's (with -c, the file's TLS and SASL settings still apply)")
}

// defaultBrokers is where the commands look for Kafka when nothing says
// otherwise: `make kafka-up`'s broker.
const defaultBrokers = "127.0.0.1:9092"

// options are the client options to connect with, or false once the
// problem is printed.
func (c *clusterFlags) options(stdout, stderr io.Writer) ([]kgo.Opt, bool) {
	named := false
	c.fs.Visit(func(f *flag.Flag) { named = named || f.Name == "c" })
	if !named {
		_, err := os.Stat(c.file)
		if c.brokers != "" || errors.Is(err, fs.ErrNotExist) {
			brokers := cmp.Or(c.brokers, os.Getenv("KAFKA_BROKERS"), defaultBrokers)
			return []kgo.Opt{kgo.SeedBrokers(splitList(brokers)...)}, true
		}
	}
	cfg, ok := loadConfig(c.file, stdout, stderr)
	if !ok {
		return nil, false
	}
	if c.brokers != "" {
		cfg.Kafka.Brokers = splitList(c.brokers)
	}
	opts, err := kclient.Options(cfg.Kafka)
	if err != nil {
		fmt.Fprintf(stderr, "pipeline topics: %v\n", err)
		return nil, false
	}
	return opts, true
}

// admin is an admin client on the cluster.
func (c *clusterFlags) admin(stdout, stderr io.Writer) (*kadm.Client, func(), bool) {
	opts, ok := c.options(stdout, stderr)
	if !ok {
		return nil, nil, false
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		fmt.Fprintf(stderr, "pipeline topics: %v\n", err)
		return nil, nil, false
	}
	return kadm.NewClient(cl), cl.Close, true
}

// splitList splits a comma-separated list, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

func createTopic(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("pipeline topics create", `  pipeline topics create [-c FILE] [--brokers LIST] NAME [--partitions N] [--replication-factor N] [--config KEY=VALUE]... [--if-not-exists]
      create topic NAME on the cluster of the job's file`)
	var cluster clusterFlags
	cluster.register(fs)
	partitions := fs.Int("partitions", -1, "partitions; -1 is the brokers' default (num.partitions)")
	replication := fs.Int("replication-factor", -1, "replicas of each partition; -1 is the brokers' default (default.replication.factor)")
	var configs configFlag
	fs.Var(&configs, "config", "a topic config `KEY=VALUE`, e.g. retention.ms=86400000; repeat for more")
	ifNotExists := fs.Bool("if-not-exists", false, "succeed without a change when the topic exists already")
	names, code, ok := parseFlags(fs, args, true, stdout, stderr)
	if !ok {
		return code
	}
	if len(names) != 1 {
		fmt.Fprintln(stderr, "pipeline topics create: want one topic NAME")
		return exitUsage
	}
	if *partitions == 0 || *partitions < -1 || *replication == 0 || *replication < -1 {
		fmt.Fprintln(stderr, "pipeline topics create: --partitions and --replication-factor are at least 1 (or -1, the brokers' default)")
		return exitUsage
	}
	adm, closeAdm, ok := cluster.admin(stdout, stderr)
	if !ok {
		return exitFail
	}
	defer closeAdm()
	ctx, cancel := context.WithTimeout(context.Background(), topicsTimeout)
	defer cancel()
	name := names[0]
	resp, err := adm.CreateTopic(ctx, int32(*partitions), int16(*replication), configs, name)
	if err == nil {
		err = resp.Err
	}
	if errors.Is(err, kerr.TopicAlreadyExists) && *ifNotExists {
		fmt.Fprintf(stdout, "topic %s exists already\n", name)
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "pipeline topics create %s: %v%s\n", name, err, brokerMessage(resp.ErrMessage))
		return exitFail
	}
	fmt.Fprintf(stdout, "created topic %s: %d partitions, replication factor %d\n", name, resp.NumPartitions, resp.ReplicationFactor)
	return exitOK
}

// brokerMessage is the broker's own words about an error, which often
// name the fix ("only 1 broker(s) are registered").
func brokerMessage(msg string) string {
	if msg == "" {
		return ""
	}
	return " (" + msg + ")"
}

func listTopics(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("pipeline topics list", `  pipeline topics list [-c FILE] [--brokers LIST]
      the cluster's topics (not Kafka's internal ones) with their partitions and replication`)
	var cluster clusterFlags
	cluster.register(fs)
	rest, code, ok := parseFlags(fs, args, true, stdout, stderr)
	if !ok {
		return code
	}
	if len(rest) > 0 {
		fmt.Fprintf(stderr, "pipeline topics list: unexpected argument %q\n", rest[0])
		return exitUsage
	}
	adm, closeAdm, ok := cluster.admin(stdout, stderr)
	if !ok {
		return exitFail
	}
	defer closeAdm()
	ctx, cancel := context.WithTimeout(context.Background(), topicsTimeout)
	defer cancel()
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "pipeline topics list: %v\n", err)
		return exitFail
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITIONS\tREPLICATION")
	for _, name := range topics.Names() {
		t := topics[name]
		fmt.Fprintf(tw, "%s\t%d\t%d\n", name, len(t.Partitions), t.Partitions.NumReplicas())
	}
	_ = tw.Flush()
	return exitOK
}

func describeTopics(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("pipeline topics describe", `  pipeline topics describe [-c FILE] [--brokers LIST] NAME...
      each topic's partitions (leader, replicas, in-sync replicas, start and
      end offsets) and the configs set on it, where they differ from the
      brokers' defaults`)
	var cluster clusterFlags
	cluster.register(fs)
	names, code, ok := parseFlags(fs, args, true, stdout, stderr)
	if !ok {
		return code
	}
	if len(names) == 0 {
		fmt.Fprintln(stderr, "pipeline topics describe: name at least one topic")
		return exitUsage
	}
	adm, closeAdm, ok := cluster.admin(stdout, stderr)
	if !ok {
		return exitFail
	}
	defer closeAdm()
	ctx, cancel := context.WithTimeout(context.Background(), topicsTimeout)
	defer cancel()
	failed := false
	for i, name := range names {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		if err := describeTopic(ctx, adm, name, stdout); err != nil {
			fmt.Fprintf(stderr, "pipeline topics describe %s: %v\n", name, err)
			failed = true
		}
	}
	if failed {
		return exitFail
	}
	return exitOK
}

// describeTopic prints one topic: its partitions, then its overrides.
func describeTopic(ctx context.Context, adm *kadm.Client, name string, w io.Writer) error {
	md, err := adm.Metadata(ctx, name)
	if err != nil {
		return err
	}
	td, ok := md.Topics[name]
	if !ok {
		return kerr.UnknownTopicOrPartition
	}
	if td.Err != nil {
		return td.Err
	}
	starts, err := adm.ListStartOffsets(ctx, name)
	if err != nil {
		return fmt.Errorf("start offsets: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, name)
	if err != nil {
		return fmt.Errorf("end offsets: %w", err)
	}
	configs, err := adm.DescribeTopicConfigs(ctx, name)
	if err != nil {
		return fmt.Errorf("configs: %w", err)
	}
	rc, err := configs.On(name, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		return fmt.Errorf("configs: %w", err)
	}

	fmt.Fprintf(w, "topic %s: %d partitions, replication factor %d\n", name, len(td.Partitions), td.Partitions.NumReplicas())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  PARTITION\tLEADER\tREPLICAS\tIN-SYNC\tSTART\tEND")
	for _, p := range td.Partitions.Sorted() {
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\n", p.Partition, leader(p), ints(p.Replicas), ints(p.ISR),
			offset(starts, name, p.Partition), offset(ends, name, p.Partition))
	}
	_ = tw.Flush()
	overrides := topicOverrides(rc.Configs)
	if len(overrides) == 0 {
		fmt.Fprintln(w, "  configs: the brokers' defaults")
		return nil
	}
	fmt.Fprintln(w, "  configs set on the topic:")
	for _, c := range overrides {
		fmt.Fprintf(w, "    %s=%s\n", c.Key, configValue(c))
	}
	return nil
}

// topicOverrides are the configs set on the topic itself, the ones that
// differ from what the brokers give every topic, sorted by key.
func topicOverrides(configs []kadm.Config) []kadm.Config {
	var out []kadm.Config
	for _, c := range configs {
		if c.Source == kmsg.ConfigSourceDynamicTopicConfig {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b kadm.Config) int { return strings.Compare(a.Key, b.Key) })
	return out
}

func configValue(c kadm.Config) string {
	if c.Sensitive {
		return "(sensitive)"
	}
	return c.MaybeValue()
}

func leader(p kadm.PartitionDetail) string {
	if p.Err != nil {
		return p.Err.Error()
	}
	if p.Leader < 0 {
		return "none"
	}
	return fmt.Sprint(p.Leader)
}

func ints(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ",") // in the brokers' order: the first replica is the preferred leader
}

func offset(offsets kadm.ListedOffsets, topic string, partition int32) string {
	o, ok := offsets.Lookup(topic, partition)
	switch {
	case !ok:
		return "?"
	case o.Err != nil:
		return o.Err.Error()
	}
	return fmt.Sprint(o.Offset)
}

// configFlag collects --config KEY=VALUE for a topic being created.
type configFlag map[string]*string

func (m *configFlag) String() string {
	if m == nil || *m == nil {
		return ""
	}
	pairs := make([]string, 0, len(*m))
	for k, v := range *m {
		pairs = append(pairs, k+"="+*v)
	}
	sort.Strings(pairs)
	return strings.Join(pairs, ",")
}

func (m *configFlag) Set(v string) error {
	key, value, ok := strings.Cut(v, "=")
	if !ok || key == "" {
		return errors.New("want KEY=VALUE, e.g. retention.ms=86400000")
	}
	if *m == nil {
		*m = configFlag{}
	}
	if _, dup := (*m)[key]; dup {
		return fmt.Errorf("config %s is given twice", key)
	}
	(*m)[key] = &value
	return nil
}
