#!/usr/bin/env bash
# bench.sh — what `make bench` runs: the test cluster up for the kube
# section (when it runs and this is root), the benchmarks, the cluster down
# again whatever they did. Arguments name the sections to run (default all).
set -euo pipefail
cd "$(dirname "$0")/.."
cluster=scripts/kube-test-cluster.sh
wants_kube=1
if [ $# -gt 0 ] || [ -n "${SHIRO_BENCH-}${BENCH_ONLY-}" ]; then
	case " $* ${SHIRO_BENCH-} ${BENCH_ONLY-} " in *[\ ,]kube[\ ,]*) ;; *) wants_kube="" ;; esac
fi
if [ -n "$wants_kube" ]; then
	[ "$(id -u)" -eq 0 ] || { echo "bench.sh: the kube section needs root for the test cluster (or name other sections)" >&2; exit 1; }
	export SHIRO_KUBE_LEASE=$$
	trap '"$cluster" down || true' EXIT
	"$cluster" up
	SHIRO_TEST_KUBECONFIG=$("$cluster" kubeconfig)
	export SHIRO_TEST_KUBECONFIG
fi
SHIRO_BIN="$PWD/bin/shiro" go run ./integration/bench "$@"
