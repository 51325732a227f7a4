#!/usr/bin/env bash
# test.sh — what `make test` runs: the test cluster up (built the first
# time, cached after), every test with SHIRO_TEST_KUBECONFIG pointing the
# Kubernetes tests at it (and SHIRO_TEST_KUBE_ADMIN at its admin, for the
# test that changes the cluster's default StorageClass and puts it back),
# and the cluster down again, whatever the tests did. A shiro-labelled
# container, volume or network the tests leave behind is named, and fails
# the run under CI. Arguments go to `go test` (default ./...).
#
# The cluster needs root. Without root, and outside CI, it is skipped and
# so are the Kubernetes tests (they fail under CI=true without it).
set -euo pipefail
cd "$(dirname "$0")/.."
cluster=scripts/kube-test-cluster.sh
if [ "$(id -u)" -eq 0 ]; then
	export SHIRO_KUBE_LEASE=$$
	trap '"$cluster" down || true' EXIT
	"$cluster" up
	SHIRO_TEST_KUBECONFIG=$("$cluster" kubeconfig)
	SHIRO_TEST_KUBE_ADMIN=$("$cluster" admin-kubeconfig)
	export SHIRO_TEST_KUBECONFIG SHIRO_TEST_KUBE_ADMIN
elif [ "${CI-}" = true ]; then
	echo "test.sh: CI=true needs root for the test cluster" >&2
	exit 1
else
	echo "test.sh: not root: no test cluster, the Kubernetes tests skip" >&2
fi
[ $# -gt 0 ] || set -- ./...

# residue lists the shiro-labelled containers, volumes and networks of the
# Docker engine (none without an engine).
residue() {
	command -v docker >/dev/null && docker info >/dev/null 2>&1 || return 0
	docker ps -aq --no-trunc --filter label=dev.shiro.managed=true | sed 's/^/container /'
	docker volume ls -q --filter label=dev.shiro.managed=true | sed 's/^/volume /'
	docker network ls -q --no-trunc --filter label=dev.shiro.managed=true | sed 's/^/network /'
}
before=$(mktemp)
trap 'rm -f "$before"' EXIT
if [ "$(id -u)" -eq 0 ]; then
	trap 'rm -f "$before"; "$cluster" down || true' EXIT
fi
residue | sort >"$before"

status=0
CGO_ENABLED=1 SHIRO_BIN="$PWD/bin/shiro" go test -race -count=1 -timeout 25m "$@" || status=$?

# Every test removes what it made: what is left now and was not before
# fails the run (under CI) or is named (elsewhere).
left=$(residue | sort | comm -13 "$before" -)
if [ -n "$left" ]; then
	echo "test.sh: the tests left these behind:" >&2
	echo "$left" | sed 's/^/  /' >&2
	for id in $(echo "$left" | awk '{print $2}'); do
		docker inspect --format '    {{.Name}}{{range $k, $v := .Config.Labels}} {{$k}}={{$v}}{{end}}' "$id" 2>/dev/null >&2 || true
	done
	if [ "${CI-}" = true ] && [ "$status" -eq 0 ]; then
		status=1
	fi
fi
exit "$status"
