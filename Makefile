# One place for the commands the README names.
GO        ?= go
KAFKA_DIR ?= .kafka-local
BIN       ?= bin/pipeline
# What `pipeline version` prints: the tree's git description (a tag, else
# the commit, "-dirty" with uncommitted changes), "devel" outside git.
VERSION   ?= $(shell git describe --always --dirty 2>/dev/null || echo devel)

.PHONY: build test test-short mutants fuzz lint crash-long crash-table kafka-up kafka-down kafka-status bench bench-recovery

build: ## the pipeline binary, in bin/ (BIN=path for another), stamped with VERSION
	$(GO) build -ldflags "-X github.com/eoflow/pipeline/cmd/pipeline/cli.stampedVersion=$(VERSION)" -o $(BIN) ./cmd/pipeline

test: ## every test, race detector on, against one real shared Kafka broker
	./scripts/test.sh

test-short: ## unit tests only: no broker, no Java
	$(GO) test -short ./...

mutants: ## the mutation suite: each named bug on, one at a time; the fast tests must catch every one (docs/testing.md)
	$(GO) run ./cmd/mutants $(if $(MUTANTS),-run '$(MUTANTS)')

lint:
	@test -z "$$(gofmt -l .)" || { gofmt -l .; echo "gofmt needed"; exit 1; }
	$(GO) vet ./...

fuzz: ## each fuzz target for a while (FUZZTIME=1m)
	./scripts/fuzz.sh $(or $(FUZZTIME),30s)

crash-long: ## the exactly-once crash proof, long form (1M numbers, 20 random SIGKILLs + every fault point)
	RACE=0 TEST_TIMEOUT=60m CRASH_NUMBERS=$(or $(CRASH_NUMBERS),1000000) CRASH_KILLS=$(or $(CRASH_KILLS),20) \
		./scripts/test.sh -run 'TestExactlyOnceUnderSIGKILL' -v ./cmd/pipeline

crash-table: ## the three guarantees under one crash schedule; writes the table of docs/guarantees.md to bench/results/guarantees.md
	mkdir -p bench/results
	RACE=0 CRASH_NUMBERS=$(or $(CRASH_NUMBERS),100000) CRASH_KILLS=$(or $(CRASH_KILLS),6) CRASH_TABLE_OUT=$(CURDIR)/bench/results/guarantees.md \
		./scripts/test.sh -run 'TestGuaranteesUnderTheSameCrashes' -v ./cmd/pipeline

kafka-up: ## a real Apache Kafka broker on 127.0.0.1:9092 (NODES=3 for a cluster)
	$(GO) run ./cmd/kafka-local up -dir $(KAFKA_DIR) -nodes $(or $(NODES),1)

kafka-down:
	$(GO) run ./cmd/kafka-local down -dir $(KAFKA_DIR)

kafka-status:
	$(GO) run ./cmd/kafka-local status -dir $(KAFKA_DIR)

bench: ## the side-by-side benchmark (bench/README.md); BENCH_N=200000 for a quick run
	./bench/run.sh

bench-recovery: ## SIGKILL to the first new committed output, 100k and 1M keys of state (bench/README.md)
	./bench/recovery.sh
