# Plumbline — build, test, generate.
#   make run     server + a local agent with embedded defaults (today: agent inspect on this host)
#   make test    the whole test suite; installs what it needs (see scripts/test.sh)

GO      ?= go
BIN     ?= bin
PROTOS  := $(shell find proto -name '*.proto')

.PHONY: all build run test test-unit proto proto-check openapi dashboards lint windows bench bench-probe bench-fleet bench-inspect lab-seeds lab-degrade fuzz packages fleet-box clean

all: build

build:
	$(GO) build -o $(BIN)/ ./cmd/...

# The first build compiles every dependency (about 2 minutes): say so, and
# list the packages as they compile (go build -v; a warm build lists none).
run:
	@echo "building plumbline (first build takes about 2 minutes)…"
	$(GO) build -v -o $(BIN)/ ./cmd/...
	./scripts/run.sh

test:
	./scripts/test.sh

# Fast inner loop: unit tests only, no root, no installs.
test-unit:
	$(GO) test ./...

# Regenerate the committed protobuf Go code. protoc comes from Debian's
# protobuf-compiler; protoc-gen-go is pinned in go.mod's tool block.
proto:
	./scripts/proto.sh

# Rewrite the enumerations of api/openapi.yaml from internal/vocab and the
# inventory's filter table (go test ./api/enumgen fails while they are stale).
openapi:
	$(GO) run ./api/enumgen

# Rewrite dashboards/*.json from dashboards/gen (Grafana's Foundation SDK;
# go test ./dashboards/gen fails while they are stale).
dashboards:
	$(GO) run ./dashboards/gen -dir dashboards

# Fails when the committed generated code differs from what `make proto` makes.
proto-check:
	./scripts/proto.sh --check

lint:
	$(GO) vet ./...
	GOOS=windows $(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$'))" || { gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$'); echo "gofmt: files above need formatting"; exit 1; }

windows:
	GOOS=windows $(GO) build ./...
	GOOS=windows $(GO) vet ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./internal/...

# Whole-system measurements (root; see bench/RESULTS-*.md for results).
bench-probe:
	./bench/probe-vs-fio.sh

bench-fleet:
	./bench/fleet.sh

bench-inspect:
	./bench/inspect-vs-lsblk.sh

# The seeds' alignment experiments on RAID lab arrays (root, /dev/fuse, fio;
# ~30 min; see README "Lab" and bench/RESULTS-lab.md).
lab-seeds:
	./bench/seeds.sh

# Degradation on the lab: 7-day noise-only replay, simulated detection
# times, and the live fault on lab arrays (root, /dev/fuse; ~60-70 min;
# README "Degradation on the lab", bench/RESULTS-degrade.md).
lab-degrade:
	./bench/degrade.sh

# Fuzz every fuzz target in the code for FUZZTIME each (seeds run in make test);
# scripts/fuzz.sh finds them (scripts/fuzz.sh --list shows which).
FUZZTIME ?= 30s
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) ./scripts/fuzz.sh

# .deb and .rpm of the agent and the server, and the Windows agent zip,
# under dist/ (nfpm pinned in tools/go.mod; README "Packages").
#   make packages VERSION=1.2.0 ARCHS="amd64 arm64" DIST=dist
packages:
	GO=$(GO) VERSION=$(VERSION) ARCHS="$(ARCHS)" DIST=$(DIST) ./scripts/packages.sh

# The fleet in a box (root; debootstrap, systemd-nspawn, Prometheus): the
# packages on booted Debian hosts along the production path, then a
# 20-minute soak and the failure checks (FLEETBOX_ARGS=--short: 2 minutes).
fleet-box:
	./bench/fleet-in-a-box.sh $(FLEETBOX_ARGS)

clean:
	rm -rf $(BIN) dist
