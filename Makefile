# Plumbline — build, test, generate.
#   make run     server + a local agent with embedded defaults (today: agent inspect on this host)
#   make test    the whole test suite; installs what it needs (see scripts/test.sh)

GO      ?= go
BIN     ?= bin
PROTOS  := $(shell find proto -name '*.proto')

.PHONY: all build run test test-unit proto proto-check lint windows bench bench-probe bench-fleet bench-inspect lab-degrade fuzz clean

all: build

build:
	$(GO) build -o $(BIN)/ ./cmd/...

run: build
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

# Degradation on the lab: 7-day noise-only replay, simulated detection
# times, and the live fault on lab arrays (root; ~60-70 min; README).
lab-degrade:
	./bench/degrade.sh

# Fuzz the parsers of outside bytes for FUZZTIME each (seeds run in make test).
FUZZTIME ?= 30s
fuzz:
	@set -e; for spec in \
	  internal/geometry:FuzzParseExt4Superblock internal/geometry:FuzzParseXFSSuperblock \
	  internal/geometry:FuzzParseSysfsValue internal/geometry:FuzzParseMountInfo internal/geometry:FuzzParseLVMMetadata \
	  internal/config:FuzzParse internal/spool:FuzzReadSegment internal/ingest:FuzzValidateReport \
	  internal/wire:FuzzHistogramFromProto internal/probe:FuzzParseHeader internal/baseline:FuzzUnmarshalBinary \
	  internal/replay:FuzzRead; do \
	  pkg=$${spec%%:*}; fn=$${spec##*:}; echo "== $$pkg $$fn"; \
	  $(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./$$pkg; \
	done

clean:
	rm -rf $(BIN)
