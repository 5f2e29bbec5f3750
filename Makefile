# TheFold — developer entry points. `make run` brings up the local stack; `make test` runs
# everything CI runs. Both install what they need first (scripts/setup.sh, idempotent).
SHELL := /bin/bash
export PATH := $(shell go env GOPATH)/bin:$(PATH)
MODULES := $(shell sed -n 's|^\s*\./\(.*\)$$|\1|p' go.work)
SERVICES := tasks memory skills ai sandbox github builder agent gateway
GO_TEST_FLAGS ?= -count=1 -race -timeout 15m

.PHONY: images
## images: one FROM-scratch image per service (static binaries), for docker-compose.yml.
IMAGE_TAG ?= dev
images:
	@mkdir -p .thefold/images
	@CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o .thefold/images/ $(addprefix ./services/,$(SERVICES))
	@for s in $(SERVICES); do \
		out=$$(docker build -q -f deploy/Dockerfile --build-arg SERVICE=$$s -t thefold/$$s:$(IMAGE_TAG) .thefold/images 2>&1) || { echo "$$out"; exit 1; }; \
		echo "thefold/$$s:$(IMAGE_TAG)"; done

.PHONY: all setup generate check-generate lint test test-unit test-e2e bench run down status build

all: build

setup:
	@bash scripts/setup.sh

## generate: regenerate Go, grpc-gateway and OpenAPI code from proto/ into pkg/gen.
generate:
	@bash scripts/gen-http-yaml.sh
	@buf generate
	@bash scripts/gen-openapi-embed.sh

## check-generate: fail when committed generated code differs from what the contracts produce.
check-generate: generate
	@if [ -n "$$(git status --porcelain -- pkg/gen proto/thefold/http.yaml)" ]; then \
		echo "generated code is stale; run 'make generate' and commit:"; \
		git status --porcelain -- pkg/gen proto/thefold/http.yaml; exit 1; \
	fi
	@echo "generated code is fresh"

## lint: buf lint, gofmt, go vet on every module.
lint:
	@buf lint
	@unformatted=$$(git ls-files '*.go' | grep -v '^pkg/gen/' | xargs gofmt -l); \
		if [ -n "$$unformatted" ]; then echo "not gofmt-formatted:"; echo "$$unformatted"; exit 1; fi
	@# Each module on its own (GOWORK=off): its go.mod and go.sum must be complete.
	@for m in $(MODULES); do (cd $$m && GOWORK=off go vet ./...) || exit 1; done
	@echo "lint ok"

build:
	@for m in $(MODULES); do (cd $$m && go build ./...) || exit 1; done

test-unit:
	@for m in $(filter-out tests/e2e,$(MODULES)); do echo "== go test $$m"; (cd $$m && go test $(GO_TEST_FLAGS) ./...) || exit 1; done

test-e2e:
	@echo "== go test tests/e2e"
	@cd tests/e2e && go test -count=1 -timeout 15m -bench GetTask -benchtime 1000x ./...

## test: everything CI runs.
test: setup check-generate lint test-unit test-e2e

## bench: GetTask latency/throughput over gRPC and through the gateway (prints figures).
bench: setup
	@cd tests/e2e && go test -run '^$$' -bench . -benchtime 2000x -count=1 ./...

## run: build and start the nine services (thefold up).
run: setup
	@go run ./cmd/thefold up

down:
	@go run ./cmd/thefold down

status:
	@go run ./cmd/thefold status
