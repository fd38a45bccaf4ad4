// Command procs runs n copies of one command as one contender of the
// benchmark runner (bench/cmd/runner): the processes of a group-mode job
// (scale.mode: group), each with its own PIPELINE_INSTANCE_ID (p0, p1,
// ...). It passes SIGTERM and SIGINT on to every copy, writes their output
// to its own, and exits once all have, with the first failure's status.
// The runner measures the copies' CPU and memory through it (the process
// tree under its pid).
//
//	procs -n 2 -- bin/pipeline run -c bench/jobs/keyed-sum.yaml
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
)

func main() {
	n := flag.Int("n", 2, "copies to run")
	flag.Parse()
	argv := flag.Args()
	if len(argv) == 0 || *n < 1 {
		fmt.Fprintln(os.Stderr, "usage: procs -n N -- command [args...]")
		os.Exit(2)
	}
	os.Exit(run(*n, argv))
}

func run(n int, argv []string) int {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	cmds := make([]*exec.Cmd, 0, n)
	for i := range n {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), fmt.Sprintf("PIPELINE_INSTANCE_ID=p%d", i))
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			fmt.Fprintf(os.Stderr, "procs: starting copy %d: %v\n", i, err)
			for _, c := range cmds {
				_ = c.Process.Kill()
				_ = c.Wait()
			}
			return 1
		}
		cmds = append(cmds, cmd)
	}
	var wg sync.WaitGroup
	codes := make([]int, n)
	for i, c := range cmds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = exitCode(c.Wait())
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for {
		select {
		case s := <-sigs:
			for _, c := range cmds {
				_ = c.Process.Signal(s)
			}
		case <-done:
			for _, code := range codes {
				if code != 0 {
					return code
				}
			}
			return 0
		}
	}
}

func exitCode(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ee.ExitCode() >= 0 {
			return ee.ExitCode()
		}
		return 1 // killed by a signal
	}
	return 1
}
