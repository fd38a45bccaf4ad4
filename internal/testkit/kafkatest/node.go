package kafkatest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// node is one broker+controller process and its directory:
//
//	node-N/server.properties  node-N/log4j2.properties
//	node-N/data/              node-N/logs/server.log, stdout.log
type node struct {
	id       int
	port     int
	ctrlPort int
	saslPort int // 0: no SASL listener
	tlsPort  int // 0: no TLS listener
	dir      string

	mu struct {
		sync.Mutex
		cmd    *exec.Cmd
		exited chan struct{} // closed when cmd has been waited for
		err    error         // cmd.Wait's result, valid once exited is closed
	}
}

const log4jConfig = `status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = ${sys:kafka.logs.dir}/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.state.name = state.change.logger
logger.state.level = WARN
`

func (n *node) addr() string      { return fmt.Sprintf("127.0.0.1:%d", n.port) }
func (n *node) logFile() string   { return filepath.Join(n.dir, "logs", "server.log") }
func (n *node) propsFile() string { return filepath.Join(n.dir, "server.properties") }

func (n *node) writeConfig(props map[string]string) error {
	for _, d := range []string{"data", "logs"} {
		if err := os.MkdirAll(filepath.Join(n.dir, d), 0o755); err != nil {
			return err
		}
	}
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b bytes.Buffer
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, props[k])
	}
	if err := writeFileAtomic(n.propsFile(), b.Bytes()); err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(n.dir, "log4j2.properties"), []byte(log4jConfig))
}

func (n *node) format(ctx context.Context, java, libs, clusterID string, extra ...string) error {
	args := []string{"-Xmx256m", "-cp", filepath.Join(libs, "*"),
		"kafka.tools.StorageTool", "format", "--ignore-formatted",
		"--cluster-id=" + clusterID, "-c", n.propsFile()}
	cmd := exec.CommandContext(ctx, java, append(args, extra...)...)
	cmd.Env = n.javaEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("formatting kafka node %d storage: %w\n%s", n.id, err, tail(out, 4000))
	}
	return nil
}

// javaEnv keeps the environment but drops settings a user may have for
// their own Kafka, which would leak into ours.
func (n *node) javaEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "KAFKA_OPTS=") || strings.HasPrefix(kv, "JAVA_TOOL_OPTIONS=") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

func (n *node) start(java, libs string, detached bool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.cmd != nil {
		select {
		case <-n.mu.exited:
		default:
			return fmt.Errorf("kafka broker %d is already running", n.id)
		}
	}
	heap := os.Getenv("KAFKATEST_HEAP")
	if heap == "" {
		heap = "512m"
	}
	stdout, err := os.OpenFile(filepath.Join(n.dir, "logs", "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer stdout.Close() // the child keeps its own descriptor
	cmd := exec.Command(java,
		"-Xms128m", "-Xmx"+heap, "-XX:+UseG1GC", "-Djava.awt.headless=true",
		"-Dkafka.logs.dir="+filepath.Join(n.dir, "logs"),
		"-Dlog4j2.configurationFile="+filepath.Join(n.dir, "log4j2.properties"),
		"-cp", filepath.Join(libs, "*"),
		"kafka.Kafka", n.propsFile())
	cmd.Env = n.javaEnv()
	cmd.Stdout, cmd.Stderr = stdout, stdout
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if detached {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		// The kernel kills the broker when the process that started it
		// dies, so a test binary killed by a timeout leaves nothing behind.
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting kafka broker %d: %w", n.id, err)
	}
	exited := make(chan struct{})
	n.mu.cmd, n.mu.exited, n.mu.err = cmd, exited, nil
	// The pid file lets `kafka-local down`, a different process, stop a
	// detached broker; while this process lives it still waits for the
	// child, so a broker dying during start-up is noticed at once.
	if err := os.WriteFile(filepath.Join(n.dir, "pid"), []byte(fmt.Sprint(cmd.Process.Pid)), 0o644); err != nil {
		_ = cmd.Process.Kill()
		return err
	}
	go func() {
		err := cmd.Wait()
		n.mu.Lock()
		n.mu.err = err
		n.mu.Unlock()
		close(exited)
	}()
	return nil
}

func (n *node) pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.cmd == nil || n.mu.cmd.Process == nil {
		return 0
	}
	select {
	case <-n.mu.exited:
		return 0
	default:
		return n.mu.cmd.Process.Pid
	}
}

// exitErr reports why the process ended, or nil while it runs.
func (n *node) exitErr() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.cmd == nil {
		return errors.New("not started")
	}
	select {
	case <-n.mu.exited:
		if n.mu.err == nil {
			return errors.New("exit status 0")
		}
		return n.mu.err
	default:
		return nil
	}
}

// stop sends SIGTERM and waits up to grace before SIGKILL; grace 0 kills at
// once. Stopping a stopped node is a no-op.
func (n *node) stop(grace time.Duration) error {
	n.mu.Lock()
	cmd, exited := n.mu.cmd, n.mu.exited
	n.mu.Unlock()
	if cmd == nil {
		return nil
	}
	select {
	case <-exited:
		return nil
	default:
	}
	if grace > 0 {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
			return nil
		case <-time.After(grace):
		}
	}
	_ = cmd.Process.Kill()
	select {
	case <-exited:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("kafka broker %d (pid %d) did not exit after SIGKILL", n.id, cmd.Process.Pid)
	}
}

func (n *node) logTail(lines int) string {
	b, err := os.ReadFile(n.logFile())
	if err != nil || len(b) == 0 {
		b, _ = os.ReadFile(filepath.Join(n.dir, "logs", "stdout.log"))
	}
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}
