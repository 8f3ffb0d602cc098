# The targets a developer and CI need. `make test` is the one command that
# runs every test, against a real PostgreSQL.

GO        ?= go
BIN       ?= bin/no8s-agent
TESTFLAGS ?= -race -count=1 -timeout 8m
FUZZTIME  ?= 30s
# What `version` prints: the tag or commit, the commit and the build time.
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
COMMIT    ?= $(shell git rev-parse HEAD 2>/dev/null)
BUILDDATE ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS   ?= -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.buildDate=$(BUILDDATE)

.PHONY: all build dist test lint bench bench-e2e fuzz faults postgres chromium signing release-tools tofu promtool clean

all: lint test build


build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/no8s-agent

# The release files, into dist/: for linux and darwin on amd64 and arm64,
# static binaries in tar.gz archives (with shell completions and the default
# configuration), a CycloneDX SBOM per binary, deb and rpm packages with the
# systemd unit for linux, and checksums.txt. Offline, from the module cache,
# and reproducible: every timestamp is the commit's (DIST_DATE).
DIST_DATE ?= $(shell git log -1 --format=%cI 2>/dev/null)
dist:
	rm -rf dist
	$(GO) run ./cmd/no8s-release -out dist -version "$(VERSION)" -commit "$(COMMIT)" -date "$(DIST_DATE)"

test: postgres chromium signing release-tools tofu promtool
	NO8S_TOFU="$${NO8S_TOFU:-$(CURDIR)/$(TOFU_BIN)}" NO8S_PROMTOOL="$${NO8S_PROMTOOL:-$(CURDIR)/$(PROMTOOL_BIN)}" \
	  $(GO) test $(TESTFLAGS) ./...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) mod tidy -diff
	cd bench/e2e && $(GO) vet ./... && $(GO) mod tidy -diff

bench: postgres
	$(GO) test -run '^$$' -bench . -benchmem ./...

# The end-to-end benchmark: the built agent on a generated Git repository of
# N resources, against River, kubeconform and git clone. A module of its own
# (bench/e2e), so `go test ./...` here never runs it. N chooses the sizes,
# e.g. `make bench-e2e N=10000` or N=1000,10000; all three by default.
N ?=
bench-e2e: postgres
	cd bench/e2e && NO8S_E2E_N=$(N) $(GO) test -run '^$$' -bench . -benchtime 1x -timeout 6h .

# The fault suite alone: the agent binary killed, PostgreSQL restarted, Git
# remotes down or hanging, hostile input, secrets echoed by actions. `make
# test` runs it too.
faults: postgres tofu
	NO8S_TOFU="$${NO8S_TOFU:-$(CURDIR)/$(TOFU_BIN)}" $(GO) test $(TESTFLAGS) -v ./faults

fuzz:
	$(GO) test ./manifest -run '^$$' -fuzz FuzzDecodeFile -fuzztime $(FUZZTIME)

# The store tests start a throwaway PostgreSQL server from the binaries on the
# machine unless NO8S_TEST_DATABASE_URL names one. Install them when missing
# and we may (root on Debian); otherwise say how.
postgres:
	@if [ -z "$$NO8S_TEST_DATABASE_URL" ] && ! command -v initdb >/dev/null 2>&1 \
	    && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing the PostgreSQL server (Debian package postgresql)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; \
	  else \
	    echo "PostgreSQL server binaries (initdb, postgres) not found: install them (apt-get install postgresql)" >&2; \
	    echo "or set NO8S_TEST_DATABASE_URL to a server the tests may create databases on." >&2; \
	    exit 1; \
	  fi; \
	fi

# The dashboard's browser test drives a headless Chromium: the one NO8S_CHROMIUM
# names, or chromium, chromium-browser or google-chrome on PATH. Install
# Debian's chromium when none is there and we may (root on Debian); otherwise
# say how.
chromium:
	@if [ -z "$$NO8S_CHROMIUM" ] && ! command -v chromium >/dev/null 2>&1 \
	    && ! command -v chromium-browser >/dev/null 2>&1 && ! command -v google-chrome >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && [ -f /etc/debian_version ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Chromium for the dashboard's browser test (Debian package chromium)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else \
	    echo "Chromium not found: the dashboard's browser test needs it. Install it (Debian: apt-get install chromium)" >&2; \
	    echo "or set NO8S_CHROMIUM to a Chrome or Chromium binary." >&2; \
	    exit 1; \
	  fi; \
	fi

# The commit signature tests make keys and sign commits with gpg and
# ssh-keygen. Install them when missing and we may (root on Debian);
# otherwise say how.
signing:
	@if ! command -v gpg >/dev/null 2>&1 || ! command -v gpg-agent >/dev/null 2>&1 \
	    || ! command -v gpgconf >/dev/null 2>&1 || ! command -v ssh-keygen >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && [ -f /etc/debian_version ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing gpg and ssh-keygen for the commit signature tests (Debian packages gnupg, openssh-client)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gnupg gpg-agent openssh-client >/dev/null; \
	  else \
	    echo "gpg, gpg-agent, gpgconf and ssh-keygen are needed by the commit signature tests: install them (Debian: apt-get install gnupg openssh-client)" >&2; \
	    exit 1; \
	  fi; \
	fi

# The release tests unpack the deb with dpkg-deb, check the systemd unit
# with systemd-analyze and the CA bundle the image copies.
release-tools:
	@if ! command -v dpkg-deb >/dev/null 2>&1 || ! command -v systemd-analyze >/dev/null 2>&1 \
	    || [ ! -f /etc/ssl/certs/ca-certificates.crt ]; then \
	  if [ "$$(id -u)" = 0 ] && [ -f /etc/debian_version ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing dpkg-deb, systemd-analyze and the CA bundle for the release tests (Debian packages dpkg, systemd, ca-certificates)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dpkg systemd ca-certificates >/dev/null; \
	  else \
	    echo "dpkg-deb, systemd-analyze and /etc/ssl/certs/ca-certificates.crt are needed by the release tests: install them (Debian: apt-get install dpkg systemd ca-certificates)" >&2; \
	    exit 1; \
	  fi; \
	fi

# The terraform action's tests run a real OpenTofu. It is not a Debian
# package, and its module cannot be `go install`ed (its go.mod has replace
# directives), so it is built from the module's source into .tools, once:
# a second run finds it there. A tofu or terraform on PATH is not used by
# the tests unless NO8S_TOFU names it.
TOFU_VERSION ?= v1.10.10
TOFU_BIN      = .tools/tofu-$(TOFU_VERSION)/tofu
tofu: $(TOFU_BIN)
$(TOFU_BIN):
	@echo "building OpenTofu $(TOFU_VERSION) from its Go module (once; a few minutes)"
	@dir=$$(GOFLAGS=-mod=mod $(GO) mod download -json github.com/opentofu/opentofu@$(TOFU_VERSION) | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$$/\1/p'); \
	  if [ -z "$$dir" ]; then echo "cannot download github.com/opentofu/opentofu@$(TOFU_VERSION) from the Go module proxy" >&2; exit 1; fi; \
	  mkdir -p $(dir $(TOFU_BIN)) && out=$$(pwd)/$(TOFU_BIN) && \
	  cd "$$dir" && GOFLAGS=-mod=mod $(GO) build -o "$$out.tmp" ./cmd/tofu && mv "$$out.tmp" "$$out"

# The example alert rules are checked and unit-tested with Prometheus's
# promtool, built from the Prometheus module into .tools once, without the
# service discoveries it does not need for that.
PROMTOOL_VERSION ?= v0.316.0
PROMTOOL_BIN      = .tools/promtool-$(PROMTOOL_VERSION)/promtool
promtool: $(PROMTOOL_BIN)
$(PROMTOOL_BIN):
	@echo "building promtool (Prometheus module $(PROMTOOL_VERSION)) from its Go module (once; a few minutes)"
	@mkdir -p $(dir $(PROMTOOL_BIN))
	GOBIN=$(CURDIR)/$(dir $(PROMTOOL_BIN)) GOFLAGS=-mod=mod $(GO) install -tags remove_all_sd \
	  github.com/prometheus/prometheus/cmd/promtool@$(PROMTOOL_VERSION)

clean:
	rm -rf bin dist
