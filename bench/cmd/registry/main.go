// Command registry serves an in-memory schema registry (franz-go's
// srfake, Confluent's REST API) for the Avro contenders of the benchmark,
// until SIGINT or SIGTERM. It prints its URL on the first line.
//
//	go run ./bench/cmd/registry -addr 127.0.0.1:8081
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/sr/srfake"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatalf("registry: %v", err)
	}
	fmt.Printf("http://%s\n", ln.Addr())
	srv := &http.Server{Handler: srfake.NewRegistry().Handler(), ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-done
	case err := <-done:
		if !errors.Is(err, http.ErrServerClosed) {
			log.Fatalf("registry: %v", err)
		}
	}
}
