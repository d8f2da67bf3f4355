#!/usr/bin/env bash
# Makes sure a Go >= 1.26 toolchain is usable for building the control plane. A machine with an
# older Go fetches the pinned toolchain through the Go module proxy (GOTOOLCHAIN), as `go` itself
# does; a machine with no Go at all first gets the distribution's package.
set -euo pipefail
want=go1.26.8
ok() { command -v go >/dev/null 2>&1 && go env GOVERSION 2>/dev/null | grep -Eq '^go1\.(2[6-9]|[3-9][0-9])'; }
ok && exit 0
if ! command -v go >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
        echo "==> Go not found: installing the distribution's golang-go to bootstrap $want"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq golang-go >/dev/null
    else
        echo "Go is not installed. Install Go >= 1.26 and run again." >&2
        exit 1
    fi
fi
echo "==> $(go env GOVERSION) is too old: fetching $want through the Go module proxy"
GOTOOLCHAIN=$want go version
gobin=$(GOTOOLCHAIN=$want go env GOROOT)/bin
mkdir -p "$HOME/.local/bin"
ln -sf "$gobin/go" "$HOME/.local/bin/go"
echo "Go $want is at $gobin/go (linked from ~/.local/bin/go: put ~/.local/bin first on PATH)" >&2
