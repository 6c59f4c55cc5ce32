#!/usr/bin/env bash
# Runs every check and test of ahead: the command README.md gives and CI runs.
#   ./test.sh            all checks and tests (race detector on)
#   AHEAD_RELEASE=1 ./test.sh   also goreleaser check of .goreleaser.yaml
# It installs the pinned npm packages the MCP end-to-end tests need
# (testdeps/package-lock.json) on first use; no other network access.
set -euo pipefail
cd "$(dirname "$0")"

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './testdeps/*'))
if [ -n "$unformatted" ]; then
	echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

echo "== layout: every package documented, no non-test Go file over 700 lines"
undocumented=$(go list -f '{{if not .Doc}}{{.ImportPath}}{{end}}' ./...)
if [ -n "$undocumented" ]; then
	echo "packages without a package doc:"; echo "$undocumented"; exit 1
fi
big=$(find . -name '*.go' ! -name '*_test.go' -not -path './testdeps/*' -exec awk 'END { if (NR > 700) print FILENAME ": " NR " lines" }' {} \;)
if [ -n "$big" ]; then
	echo "files over 700 lines (split them by idea):"; echo "$big"; exit 1
fi

echo "== go vet"
go vet ./...

echo "== go mod tidy -diff"
go mod tidy -diff

echo "== go build for windows and darwin"
GOOS=windows go build ./...
GOOS=darwin go build ./...

# The release configuration (.goreleaser.yaml) is checked by goreleaser
# itself only on request: goreleaser is pinned in its own module
# (tools/release), and building it the first time takes minutes.
# TestReleaseConfig checks the same promises (targets, static, version
# stamp, checksums, Dockerfile FROM scratch) in every run.
if [ "${AHEAD_RELEASE:-}" = 1 ]; then
	echo "== goreleaser check (AHEAD_RELEASE=1)"
	go tool -modfile=tools/release/go.mod goreleaser check
fi

if [ -f testdeps/package-lock.json ]; then
	echo "== npm packages for end-to-end tests (pinned in testdeps/package-lock.json)"
	if [ ! -d testdeps/node_modules ] || [ testdeps/package-lock.json -nt testdeps/node_modules/.package-lock.json ]; then
		npm ci --prefix testdeps --no-audit --no-fund --loglevel=error
	fi
fi

echo "== go test -race"
go test -race -count=1 -timeout 30m ./...

# Under the race detector TestFleetDifferential checks 600 sessions (10,000
# take 4 to 5 min there); without it, the 10,000 sessions over three replicas
# the fleet's promise is measured on take ~11 s of CPU.
echo "== go test ./fleet: the 10,000-session fleet differential"
go test -count=1 -run 'TestFleetDifferential$' ./fleet
