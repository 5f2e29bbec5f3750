# TheFold — developer entry points. `make run` brings up the local stack; `make test` runs
# everything CI runs. Both install what they need first (scripts/setup.sh, idempotent).
SHELL := /bin/bash
export PATH := $(shell go env GOPATH)/bin:$(PATH)
MODULES := $(shell sed -n 's|^\s*\./\(.*\)$$|\1|p' go.work)
SERVICES := tasks memory skills ai sandbox github builder agent gateway
# -ldflags=-w: no DWARF in the test binaries (only debuggers read it; stack traces and race
# reports come from the binary's own symbol tables and name files and lines as before).
# test-unit links ~150 race-instrumented test binaries, a good part of its time; without
# DWARF a link takes about 30% less user CPU (18 binaries: 28 s -> 20 s).
# Three test binaries at a time (-p 3; go's default here is two). The unit phase's binaries
# mostly wait (PostgreSQL, docker, timers, child processes): on 2026-12-01 here the test
# binaries used 183 s of CPU in a 381 s phase at two, the cores 24% idle, and three took it
# to 309 s. Four took it from 340 s to 272 s on one machine (2026-11-30), but on another,
# whose docker engine stores images on fuse-overlayfs, saved nothing, and each run at four
# failed a different timing-bound test (a lease renewal, a concurrency bound, a killed
# process not yet reaped; all fixed since).
# -vet=off: make lint runs go vet itself, every analyzer over every package with its tests;
# go test's own subset of it would only check the same code again.
GO_TEST_FLAGS ?= -count=1 -race -trimpath -ldflags=-w -vet=off -timeout 15m -p 3

.PHONY: images postgres-image compose-test
## images: one FROM-scratch image per service (deploy/Dockerfile), for docker-compose.yml,
## thefold/fakellm (the scripted model, compose's "fakellm" profile), the sandboxes' image
## (thefold-sandbox:local, built from this machine's toolchains) and PostgreSQL with pgvector
## (make postgres-image). The build context (.thefold/images) also gets this machine's CA
## bundle and time zone database (ai and github call HTTPS; schedules need zones): no base
## image is pulled.
IMAGE_TAG ?= dev
# IMAGE_BIN_DIR: take the nine services' binaries from this directory (built from this tree)
# instead of linking them again; the compose test passes the ones its stack build made.
IMAGE_BIN_DIR ?=
CA_BUNDLE ?= /etc/ssl/certs/ca-certificates.crt
ZONEINFO ?= /usr/share/zoneinfo
images: postgres-image
	@test -s $(CA_BUNDLE) || { echo "images: no CA bundle at $(CA_BUNDLE) (apt-get install ca-certificates, or set CA_BUNDLE)"; exit 1; }
	@test -d $(ZONEINFO) || { echo "images: no time zone database at $(ZONEINFO) (apt-get install tzdata, or set ZONEINFO)"; exit 1; }
	@# The binaries stay: go build finds them up to date and does not link them again. They
	@# are built as stack.Build (thefold up, the e2e suite) builds them, -trimpath with cgo
	@# as the machine has it, so the compiled packages come from the same build cache.
	@rm -rf .thefold/images/rootfs .thefold/images/rootfs.tar .thefold/images/.dockerignore
	@mkdir -p .thefold/images/rootfs/etc/ssl/certs .thefold/images/rootfs/usr/share .thefold/images/rootfs/tmp
	@cp -L $(CA_BUNDLE) .thefold/images/rootfs/etc/ssl/certs/ca-certificates.crt
	@cp -rL $(ZONEINFO) .thefold/images/rootfs/usr/share/zoneinfo
	@chmod 1777 .thefold/images/rootfs/tmp
	@if [ -n "$(IMAGE_BIN_DIR)" ]; then \
		for s in $(SERVICES); do cp -f "$(IMAGE_BIN_DIR)/$$s" .thefold/images/ || exit 1; done; \
		go build -trimpath -ldflags='-s -w' -o .thefold/images/ ./cmd/fakellm; \
	else go build -trimpath -ldflags='-s -w' -o .thefold/images/ $(addprefix ./services/,$(SERVICES)) ./cmd/fakellm; fi
	@bash scripts/copy-libs.sh .thefold/images/rootfs $(addprefix .thefold/images/,$(SERVICES) fakellm)
	@# One file, made the same way each time: the engine checksums it quickly (not thousands
	@# of zoneinfo files per image) and finds the layer cached when nothing changed.
	@tar -C .thefold/images/rootfs --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf .thefold/images/rootfs.tar .
	@# Each build is sent only rootfs.tar and its own binary (not the other nine). The image
	@# a rebuild replaces is removed (unless a container still uses it), not left dangling.
	@for s in $(SERVICES) fakellm; do \
		printf '*\n!rootfs.tar\n!%s\n' $$s >.thefold/images/.dockerignore; \
		old=$$(docker image inspect -f '{{.Id}}' thefold/$$s:$(IMAGE_TAG) 2>/dev/null || true); \
		out=$$(docker build -q -f deploy/Dockerfile --build-arg SERVICE=$$s -t thefold/$$s:$(IMAGE_TAG) .thefold/images 2>&1) || { echo "$$out"; exit 1; }; \
		case "$$out" in *"$$old"*) ;; *) [ -z "$$old" ] || docker rmi "$$old" >/dev/null 2>&1 || true ;; esac; \
		echo "thefold/$$s:$(IMAGE_TAG)"; done; rm -f .thefold/images/.dockerignore
	@# The sandboxes' own image (every language's toolchain, from this machine's Go and
	@# Debian packages): the sandbox container cannot build it, having neither.
	@.thefold/images/sandbox build-image

## postgres-image: thefold/postgres:15-pgvector, docker-compose.yml's PostgreSQL, without a
## registry: pgvector/pgvector:pg15 when this machine has it, else built FROM scratch from
## this machine's Debian packages (postgresql-15, pgvector, bash, busybox-static; see
## scripts/postgres-image.sh); skipped when the image is current.
postgres-image:
	@bash scripts/postgres-image.sh

## compose-test: the docker-compose stack end to end (tests/e2e/compose): make images,
## thefold init, docker-compose up (a project and ports of its own), all ten containers
## healthy, the README's demo task through the REST gateway to a pull request on the local
## forge with the docker sandbox backend and the scripted model, then down -v.
compose-test:
	@cd tests/e2e && THEFOLD_E2E_SHARD=compose go test -count=1 -trimpath -timeout 45m -v -run '^TestCompose' ./compose/

.PHONY: all demo eval setup generate require-git check-generate lint test test-make test-unit test-e2e test-e2e-serial bench load run down status build embed-model

all: build

setup:
	@bash scripts/setup.sh

## generate: regenerate Go, grpc-gateway and OpenAPI code from proto/ into pkg/gen, and the
## configuration reference (docs/configuration.md) from the config structs.
generate:
	@bash scripts/gen-http-yaml.sh
	@buf generate
	@bash scripts/gen-openapi-embed.sh
	@mkdir -p docs && go run ./pkg/config/cmd/configdoc -root . > docs/configuration.md.tmp && mv docs/configuration.md.tmp docs/configuration.md

# check-generate and lint compare with what git tracks: outside a git checkout (a source
# tarball) they would compare with nothing and pass, so they refuse instead.
require-git:
	@git rev-parse --is-inside-work-tree >/dev/null 2>&1 || { \
		echo "$(or $(filter check-generate lint,$(MAKECMDGOALS)),this target) needs a git checkout: it compares with what git tracks, and $(CURDIR) is not one (clone the repository, or git init && git add -A && git commit)"; exit 1; }

## check-generate: fail when committed generated code differs from what the contracts produce.
check-generate: require-git generate
	@if [ -n "$$(git status --porcelain -- pkg/gen proto/thefold/http.yaml docs/configuration.md)" ]; then \
		echo "generated code is stale; run 'make generate' and commit:"; \
		git status --porcelain -- pkg/gen proto/thefold/http.yaml docs/configuration.md; exit 1; \
	fi
	@echo "generated code is fresh"
	@# The generated OpenAPI document is valid Swagger 2.0 (skipped in the race-detector run).
	@cd pkg && go test -count=1 -run '^TestOpenAPIDocumentIsValid$$' ./contracts/

## lint: buf lint, buf breaking against the frozen v1 contracts, gofmt, go vet on every module.
lint: require-git
	@buf lint
	@# Contracts v1 are frozen: a breaking change to a v1 package fails here (it needs a v2
	@# package). The baseline is buf build's image of proto/ at the tag contracts-v1.
	@buf breaking --against proto/baseline/contracts-v1.binpb
	@unformatted=$$(git ls-files '*.go' | grep -v '^pkg/gen/' | xargs gofmt -l); \
		if [ -n "$$unformatted" ]; then echo "not gofmt-formatted:"; echo "$$unformatted"; exit 1; fi
	@# Each module on its own (GOWORK=off): its go.mod and go.sum must be complete.
	@# -trimpath: the compile and vet actions do not depend on the checkout's path, so a
	@# fresh clone (CI's every run) finds them in the build cache; without it every package
	@# of the repository is compiled and vetted again (2.5 min on a busy two-core machine).
	@for m in $(MODULES); do (cd $$m && GOWORK=off go vet -trimpath ./...) || exit 1; done
	@echo "lint ok"

build:
	@for m in $(MODULES); do (cd $$m && go build ./...) || exit 1; done

# One go test over every module (go.work resolves ./<module>/... from the root): packages of
# all modules build and run side by side (-p), instead of module after module. testreport
# prints what go test would, then the ten slowest tests.
UNIT_MODULES := $(filter-out tests/e2e,$(MODULES))
# The packages whose tests take longest (35-60 s each, mostly waiting on sandboxes and a real
# stack), named first so they start first: go test starts packages in the order they are
# named, and the last of these to start was the phase's tail (2026-12-01: the sandbox
# service's 60 s alone at the end). A package named twice runs once.
UNIT_FIRST := ./services/sandbox/internal/service ./cmd/thefold ./services/ai/internal/service ./services/sandbox/internal/backend/docker ./services/agent/internal/service ./services/sandbox/internal/backend
# Tests that call testenv.CPUBound skip under -race (their time is one goroutine's
# computation, which the race detector multiplies by five to ten and finds nothing in) and run
# here without it; pkg/testenv's TestCPUBoundTestsRunWithoutRace keeps this list complete.
CPU_BOUND_TESTS := TestFindRelevantFilesOnARealRepository|TestRealRepositoryGRPC|TestFitByPriority|TestTrimForReviewStaysWithinTheBudget|TestTruncatedInput|TestNoFalsePositivesOnPkg|TestTrainedSubwords
CPU_BOUND_PKGS := ./services/github/internal/service ./services/github/internal/relevance ./services/ai/internal/prompts ./services/agent/internal/project ./services/skills/internal/detect ./pkg/embed
test-unit:
	@echo "== go test $(UNIT_MODULES)"
	@go run ./pkg/testenv/cmd/testreport -slowest 10 -- $(GO_TEST_FLAGS) $(UNIT_FIRST) $(foreach m,$(UNIT_MODULES),./$(m)/...)
	@echo "== go test (CPU-bound tests, without -race)"
	@go test -count=1 -trimpath -vet=off -timeout 10m -run '^($(CPU_BOUND_TESTS))$$' $(CPU_BOUND_PKGS)

## test-make: the checks above refuse to run outside a git checkout (scripts/test-make.sh).
test-make:
	@bash scripts/test-make.sh

test-e2e:
	@echo "== go test tests/e2e (three shards and the compose stack at once, scripts/test-e2e.sh)"
	@bash scripts/test-e2e.sh

## test-e2e-serial: the e2e suite in one process (one mesh): the parallel tests side by side
## after the ones that need the mesh to themselves, then the compose stack's test (-p 1: one
## package at a time). Slower; for a machine short of memory.
test-e2e-serial:
	@echo "== go test tests/e2e"
	@cd tests/e2e && go run ../../pkg/testenv/cmd/testreport -slowest 10 -- -count=1 -trimpath -timeout 60m -p 1 -parallel 8 -bench GetTask -benchtime 1000x ./...

## test: everything CI runs — setup test-make check-generate lint test-unit test-e2e, in that
## order — and how long each phase took (scripts/test.sh).
test:
	@bash scripts/test.sh

## bench: GetTask latency/throughput over gRPC and through the gateway, append/query
## latency with 0 and 1,000 idle event watchers, the ai fix loop's prompt-cache share
## and cost, a streamed reply's first delta from fakellm to the ai service's client and to
## a chat's SSE client through the gateway, a sandbox's create + run `true` + destroy per
## backend against raw, the builder's orchestration cost per file and dependency analysis
## of 5,000 Go files, the README's demo task from StartTask to PENDING_REVIEW with where its
## time went, a project's plan and start (50 tasks) and orchestration per task, a crew's
## 30 independent issues with 1 worker against 3, and
## `thefold tasks list` (100 tasks) from process start to exit (prints figures).
bench: setup
	@cd tests/e2e && go test -run '^$$' -bench DemoTask -benchtime 3x -count=1 ./...
	@cd tests/e2e && go test -run '^$$' -bench GetTask -benchtime 2000x -count=1 ./...
	@cd tests/e2e && go test -run '^$$' -bench BuildOrchestration -benchtime 1x -count=1 ./...
	@cd tests/e2e && go test -run '^$$' -bench 'ProjectPlanAndStart|ProjectOrchestration' -benchtime 7x -count=1 ./...
	@cd tests/e2e && go test -run '^$$' -bench CrewParallelism -benchtime 1x -count=1 -timeout 60m ./...
	@cd tests/e2e && go test -run '^$$' -bench ChatFirstToken -benchtime 100x -count=1 ./...
	@cd tests/e2e && go test -run '^$$' -bench CLITasksList -benchtime 30x -count=1 ./...
	@cd pkg && go test -run '^$$' -bench RPCLatency -benchtime 1000x -count=1 ./events/
	@cd services/ai && go test -run '^$$' -bench FixLoopPromptCache -benchtime 3x -count=1 ./internal/service/
	@cd services/ai && go test -run '^$$' -bench StreamCompleteFirstDelta -benchtime 1000x -count=1 ./internal/service/
	@cd services/sandbox && go test -run '^$$' -bench Lifecycle -count=1 ./internal/backend/ ./internal/backend/docker/
	@cd services/github && go test -run '^$$' -bench GetTreeAndFindRelevantFiles -benchtime 20x -count=1 ./internal/service/
	@cd services/github && go test -run '^$$' -bench BuildAndRank -benchtime 3x -count=1 ./internal/relevance/
	@cd pkg && go test -run '^$$' -bench Count -count=1 ./tokens/
	@cd pkg && go test -run '^$$' -bench 'CodeDescription|HNSWRecall' -benchtime 1x -count=1 ./embed/
	@cd services/memory && go test -run '^$$' -bench 'SearchLatency|RetrievalQuality' -benchtime 1x -count=1 -timeout 20m ./internal/service/
	@cd services/builder && go test -run '^$$' -bench AnalyzeGo5000 -benchtime 3x -count=1 ./internal/depgraph/

## embed-model: retrain the local@2 embedder's word vectors (pkg/embed/local2.model) from
## the modules pkg/embed/training-manifest.txt names, downloaded into a private module cache
## (~/.cache/thefold/embedtrain); about a minute, and the same manifest gives the same bytes.
embed-model:
	@cd pkg && go run ./embed/internal/embedtrain -manifest embed/training-manifest.txt -out embed/local2.model

## load: REST load through the gateway: 200 requests/s (70% GetTask/ListTasks, 30%
## CreateTask/UpdateTask) for 60 s, open loop, at most 100 in flight; prints the rate
## achieved, latency p50/p90/p99/max and errors by kind, and fails on any error.
## THEFOLD_LOAD_RPS, THEFOLD_LOAD_DURATION and THEFOLD_LOAD_MAX_IN_FLIGHT change it.
load: setup
	@cd tests/e2e && go test -run '^$$' -bench '^BenchmarkLoad$$' -benchtime 1x -count=1 -timeout 30m ./...

## run: build and start the nine services (thefold up).
run: setup
	@go run ./cmd/thefold up

## demo: the main job end to end — a task to a reviewed pull request (the scripted model,
## labelled as such, when no provider key is set).
demo: setup
	@go run ./cmd/thefold demo

## eval: the eval — the tasks of eval/tasks (5 Go, 5 TypeScript, 5 Python; bug fixes and
## features), each on a local repository through the whole mesh to its review, then judged by
## hidden tests run in a sandbox on the review's files; prints a summary table and writes
## eval/out/report.md, report.html and results.json. Without a provider key the answers are
## REPLAYED by the scripted model (eval/tasks/*/fakellm.json), not a model's, and the reports
## say so. EVAL_FLAGS adds flags, e.g. EVAL_FLAGS="-tasks 'go-*' -parallel 3 -out /tmp/eval".
eval: setup
	@go run ./cmd/thefold eval $(EVAL_FLAGS)

down:
	@go run ./cmd/thefold down

status:
	@go run ./cmd/thefold status
