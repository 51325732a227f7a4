# shiro — a terminal coding agent whose tools run in a container.
# `make` lists the targets.

GO      ?= go
BIN     := bin/shiro
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/shiroagent/shiro/cmd/shiro/cli.Version=$(VERSION)
export CGO_ENABLED = 0

.PHONY: help build run test test-unit bench image lint deps clean kube-up kube-down

help: ## list the targets
	@awk 'BEGIN{FS=":.*## "} /^[a-z-]+:.*## /{printf "  make %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## build bin/shiro and the small bin/shiro-helper it copies into sandboxes (static)
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/shiro
	$(GO) build -trimpath -ldflags '-s -w' -o $(BIN)-helper ./cmd/shiro-helper

run: image ## build, build the default sandbox image if it is missing, then start shiro in the current directory
	./$(BIN)

deps: ## install the Debian packages the tests need (when missing)
	./scripts/deps.sh

image: build ## build the default sandbox image (Dockerfile, or offline from Debian packages)
	./$(BIN) image build --if-missing

test: deps image ## install what is missing, build the image if missing, run every test (the Kubernetes ones on the test cluster)
	./scripts/test.sh ./...

test-unit: ## the tests that need no Docker engine (they need rg and git: make deps installs them)
	@command -v rg >/dev/null && command -v git >/dev/null || { echo 'make test-unit needs ripgrep (rg) and git on PATH; make deps installs them' >&2; exit 1; }
	SHIRO_SKIP_DOCKER=1 $(GO) test ./...

bench: deps image ## measure the sandbox and tools against baselines from the same run
	./scripts/bench.sh

lint: ## gofmt, go vet
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...

kube-up: build image ## start the Kubernetes test cluster (built once, cached); prints its kubeconfig
	SHIRO_KUBE_LEASE=$$PPID ./scripts/kube-test-cluster.sh up
	@./scripts/kube-test-cluster.sh kubeconfig

kube-down: ## stop the Kubernetes test cluster
	./scripts/kube-test-cluster.sh down --force

clean: ## remove build output
	rm -rf bin
