# One place for the commands the README names.
GO        ?= go
KAFKA_DIR ?= .kafka-local

.PHONY: build test test-short fuzz lint kafka-up kafka-down kafka-status

build: ## the pipeline binary, in bin/
	$(GO) build -o bin/pipeline ./cmd/pipeline

test: ## every test, race detector on, against one real shared Kafka broker
	./scripts/test.sh

test-short: ## unit tests only: no broker, no Java
	$(GO) test -short ./...

lint:
	@test -z "$$(gofmt -l .)" || { gofmt -l .; echo "gofmt needed"; exit 1; }
	$(GO) vet ./...

fuzz: ## each fuzz target for a while (FUZZTIME=1m)
	./scripts/fuzz.sh $(or $(FUZZTIME),30s)

kafka-up: ## a real Apache Kafka broker on 127.0.0.1:9092 (NODES=3 for a cluster)
	$(GO) run ./cmd/kafka-local up -dir $(KAFKA_DIR) -nodes $(or $(NODES),1)

kafka-down:
	$(GO) run ./cmd/kafka-local down -dir $(KAFKA_DIR)

kafka-status:
	$(GO) run ./cmd/kafka-local status -dir $(KAFKA_DIR)
