package kafkatest

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
)

// KafkaVersion is the Apache Kafka release the launcher runs. It must match
// kafka.version in pom.xml (a test checks).
const KafkaVersion = "4.1.1"

//go:embed pom.xml
var pomXML []byte

// CacheDir is where resolved jars live: $KAFKATEST_CACHE, else
// $XDG_CACHE_HOME/eoflow-pipeline, else ~/.cache/eoflow-pipeline.
func CacheDir() (string, error) {
	if d := os.Getenv("KAFKATEST_CACHE"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory (set KAFKATEST_CACHE): %w", err)
	}
	return filepath.Join(d, "eoflow-pipeline"), nil
}

// ResolveJars returns a directory holding the broker's jars, resolving them
// with Maven the first time. Concurrent callers (several test binaries of one
// `go test ./...`) serialize on a lock file, so Maven runs once.
func ResolveJars() (string, error) {
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "kafka-"+KafkaVersion)
	libs := filepath.Join(dir, "libs")
	done := filepath.Join(dir, ".complete")
	if _, err := os.Stat(done); err == nil {
		return libs, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	unlock, err := lockFile(filepath.Join(dir, ".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(done); err == nil {
		return libs, nil // another process resolved them while we waited
	}
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return "", errors.New("Kafka jars are not cached and Maven (mvn) is not on PATH: install Maven, or set KAFKA_BOOTSTRAP to an existing cluster")
	}
	pom := filepath.Join(dir, "pom.xml")
	if err := os.WriteFile(pom, pomXML, 0o644); err != nil {
		return "", err
	}
	_ = os.RemoveAll(libs) // a half-copied directory from an interrupted run
	cmd := exec.Command(mvn, "-B", "-q", "-f", pom, "dependency:copy-dependencies",
		"-DincludeScope=runtime", "-DoutputDirectory="+libs)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("resolving Kafka %s jars with Maven: %w\n%s", KafkaVersion, err, tail(out, 4000))
	}
	if err := os.WriteFile(done, nil, 0o644); err != nil {
		return "", err
	}
	return libs, nil
}

// lockFile takes an exclusive flock, released by the returned func. The
// kernel drops it if the process dies, so a crashed run never wedges others.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// JavaCommand finds a java of version 17 or newer ($JAVA_HOME first).
func JavaCommand() (string, error) {
	java := "java"
	if home := os.Getenv("JAVA_HOME"); home != "" {
		java = filepath.Join(home, "bin", "java")
	}
	path, err := exec.LookPath(java)
	if err != nil {
		return "", errors.New("no java on PATH (or in $JAVA_HOME): Kafka 4 brokers need Java 17 or newer")
	}
	out, err := exec.Command(path, "-version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s -version: %w", path, err)
	}
	major, ok := javaMajor(string(out))
	if !ok {
		return "", fmt.Errorf("cannot read the Java version from %q", firstLine(out))
	}
	if major < 17 {
		return "", fmt.Errorf("%s is Java %d; Kafka 4 brokers need Java 17 or newer (set JAVA_HOME)", path, major)
	}
	return path, nil
}

var javaVersionRE = regexp.MustCompile(`version "(\d+)(?:\.(\d+))?`)

// javaMajor reads the major version from `java -version` output, which says
// "1.8.0_x" for Java 8 and "17.0.15" from Java 9 on.
func javaMajor(s string) (int, bool) {
	m := javaVersionRE.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	major, _ := strconv.Atoi(m[1])
	if major == 1 && m[2] != "" {
		major, _ = strconv.Atoi(m[2])
	}
	return major, true
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(string(b), "\n")
	return s
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
