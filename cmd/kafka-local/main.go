// Command kafka-local runs a real Apache Kafka broker (or a 3-node cluster)
// on loopback from Maven Central jars, for developers and for `make test`.
// It is the same launcher the tests use (internal/testkit/kafkatest).
//
//	kafka-local up [-nodes 1|3] [-port 9092] [-dir .kafka-local]
//	kafka-local down [-dir .kafka-local]
//	kafka-local status [-dir .kafka-local]
//
// `up` prints the bootstrap address and also writes it to DIR/bootstrap.
// Each `up` starts from empty storage; `down` stops the brokers and keeps
// their logs in DIR until the next `up`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/eoflow/pipeline/internal/testkit/kafkatest"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "kafka-local:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: kafka-local up|down|status [flags]")
	}
	fs := flag.NewFlagSet("kafka-local "+args[0], flag.ContinueOnError)
	dir := fs.String("dir", ".kafka-local", "directory for config, data, logs and pid files")
	nodes := fs.Int("nodes", 1, "number of brokers (1, or 3 for a cluster that survives losing one)")
	port := fs.Int("port", 9092, "client port of the first broker (the others use the next ones); 0 picks free ports")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	switch args[0] {
	case "up":
		return up(*dir, *nodes, *port)
	case "down":
		return down(*dir)
	case "status":
		return status(*dir)
	default:
		return fmt.Errorf("unknown command %q: want up, down or status", args[0])
	}
}

func up(dir string, nodes, port int) error {
	if pids := livePIDs(dir); len(pids) > 0 {
		b, _ := os.ReadFile(filepath.Join(dir, "bootstrap"))
		fmt.Printf("already running (pids %v): KAFKA_BOOTSTRAP=%s\n", pids, strings.TrimSpace(string(b)))
		return nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	opts := kafkatest.Options{Nodes: nodes, Dir: dir, Detached: true}
	if port != 0 {
		for i := 0; i < nodes; i++ {
			opts.BrokerPorts = append(opts.BrokerPorts, port+i)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(os.Stderr, "starting Apache Kafka %s (%d node(s)) in %s ...\n", kafkatest.KafkaVersion, nodes, dir)
	c, err := kafkatest.Start(ctx, opts)
	if err != nil {
		return err
	}
	bootstrap := strings.Join(c.Bootstrap(), ",")
	if err := os.WriteFile(filepath.Join(dir, "bootstrap"), []byte(bootstrap+"\n"), 0o644); err != nil {
		return err
	}
	fmt.Printf("KAFKA_BOOTSTRAP=%s\n", bootstrap)
	return nil
}

func down(dir string) error {
	pids := livePIDs(dir)
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, pid := range pids {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if len(pids) == 0 {
		fmt.Println("not running")
	} else {
		fmt.Printf("stopped %d broker(s); logs in %s\n", len(pids), dir)
	}
	return nil
}

func status(dir string) error {
	pids := livePIDs(dir)
	if len(pids) == 0 {
		fmt.Println("not running")
		return nil
	}
	b, _ := os.ReadFile(filepath.Join(dir, "bootstrap"))
	fmt.Printf("running (pids %v): KAFKA_BOOTSTRAP=%s\n", pids, strings.TrimSpace(string(b)))
	return nil
}

// livePIDs reads DIR/node-*/pid and keeps the processes that still run a
// Kafka broker (a pid may have been reused by something else since).
func livePIDs(dir string) []int {
	files, _ := filepath.Glob(filepath.Join(dir, "node-*", "pid"))
	var pids []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || !alive(pid) {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if strings.Contains(string(cmdline), "kafka.Kafka") {
			pids = append(pids, pid)
		}
	}
	return pids
}

func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	// A killed child of ours that nobody reaped is a zombie: not alive.
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(b))
	return len(fields) < 3 || fields[2] != "Z"
}
