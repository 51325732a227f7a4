#!/usr/bin/env bash
# test.sh — what `make test` runs: the test cluster up (built the first
# time, cached after), every test with SHIRO_TEST_KUBECONFIG pointing the
# Kubernetes tests at it (and SHIRO_TEST_KUBE_ADMIN at its admin, for the
# test that changes the cluster's default StorageClass and puts it back), and the cluster down again, whatever the tests
# did. Arguments go to `go test` (default ./...).
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
CGO_ENABLED=1 SHIRO_BIN="$PWD/bin/shiro" go test -race -count=1 -timeout 25m "$@"
