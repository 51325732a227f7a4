#!/usr/bin/env bash
# kube-test-cluster.sh — the single-node Kubernetes that shiro's Kubernetes
# tests and benchmarks run against.
#
#   scripts/kube-test-cluster.sh build       compile the cluster's binaries once (cached)
#   scripts/kube-test-cluster.sh up          start the cluster (builds first when needed)
#   scripts/kube-test-cluster.sh down        stop it (when no other user holds it)
#   scripts/kube-test-cluster.sh status      what runs
#   scripts/kube-test-cluster.sh kubeconfig  print the path of the tests' kubeconfig
#
# Everything comes from Debian packages (etcd, containerd, runc, the CNI
# plugins) and the Go module proxy (kube-apiserver, kube-controller-manager,
# kube-scheduler, kubelet and kubectl, compiled from k8s.io/kubernetes). No
# image registry is used: the pod sandbox ("pause") image is made here and the
# shiro sandbox image is imported from the local Docker engine (`docker save`).
# The cluster has its own containerd (own socket, root, runc root and CNI
# bridge), never touches the Docker engine's, listens on 127.0.0.1 only and
# adds no iptables rules. There is one cluster per machine: its sockets and
# process ids are under /run/shiro-kube-test.
#
# `up` takes a lease for the calling process ($SHIRO_KUBE_LEASE, default the
# parent's pid) and `down` gives it back: the cluster stops when the last
# lease whose process still lives is given back (`down --force` stops it
# whatever holds it). Two `make test` runs on one machine share the cluster.
#
# Environment:
#   SHIRO_KUBE_CACHE   where binaries, images and state live
#                      (default ${XDG_CACHE_HOME:-$HOME/.cache}/shiro/kube-test)
#   SHIRO_KUBE_IMAGES  images to import from Docker (default: the sandbox
#                      image `bin/shiro image build --if-missing` names)
#   SHIRO_KUBE_LEASE   the pid that holds the lease `up` takes and `down` returns
#
# Needs root (the kubelet manages cgroups, mounts and network namespaces).
set -euo pipefail

KUBE_VERSION=1.34.4
# RECIPE changes when the way the binaries are built changes: a cache built
# another way is rebuilt.
RECIPE=1
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${SHIRO_KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/shiro/kube-test}
BIN=$CACHE/bin
PKI=$CACHE/pki
IMAGES=$CACHE/images
CROOT=$CACHE/containerd       # containerd's content and snapshots (kept: imports survive down)
STATE=$CACHE/state            # etcd, kubelet, volumes, logs (removed by down)
RUN=/run/shiro-kube-test      # sockets, pids, leases: one cluster per machine
CSOCK=$RUN/containerd.sock
API_PORT=26443 ETCD_PORT=22379 ETCD_PEER_PORT=22380
KUBELET_PORT=20250 KUBELET_HEALTH_PORT=20248 KCM_PORT=20257 SCHED_PORT=20259
NODE=localhost
NAMESPACE=shiro-test          # the tests' namespace, with the RBAC docs/kubernetes.md lists
BRIDGE=shirokube0
POD_CIDR=10.244.91.0/24
SERVICE_CIDR=10.97.0.0/24
PAUSE_IMAGE=shiro-kube-pause:1
STORAGE_CLASS=shiro-local
ADMIN_KUBECONFIG=$PKI/admin.kubeconfig
TEST_KUBECONFIG=$PKI/test.kubeconfig

log() { printf '[kube-test-cluster %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { log "error: $*"; exit 1; }
need_root() { [ "$(id -u)" -eq 0 ] || die "$1 needs root (the kubelet manages cgroups, mounts and network namespaces)"; }
kubectl() { "$BIN/kubectl" --kubeconfig "$ADMIN_KUBECONFIG" "$@"; }

# ------------------------------------------------------------------ deps
deps() {
	local want=() cmd pkg
	while read -r cmd pkg; do
		command -v "$cmd" >/dev/null 2>&1 || want+=("$pkg")
	done <<-EOF
		etcd etcd-server
		containerd containerd
		ctr containerd
		runc runc
		openssl openssl
		ip iproute2
		curl curl
	EOF
	[ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] && [ -x /usr/lib/cni/loopback ] || want+=(containernetworking-plugins)
	[ ${#want[@]} -eq 0 ] && return 0
	need_root "installing ${want[*]}"
	log "installing ${want[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# Debian starts services it installs unless policy-rc.d says no; the
	# cluster runs its own etcd and containerd, so none is wanted.
	local policy=/usr/sbin/policy-rc.d made=""
	if [ ! -e "$policy" ]; then printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && made=1; fi
	apt-get install -y -qq --no-install-recommends "${want[@]}" >/dev/null || { [ -z "$made" ] || rm -f "$policy"; die "apt-get install ${want[*]} failed"; }
	[ -z "$made" ] || rm -f "$policy"
}

# ------------------------------------------------------------------ build
stamp() { echo "kubernetes v$KUBE_VERSION recipe $RECIPE $(go env GOOS)/$(go env GOARCH)"; }
built() { [ -f "$BIN/stamp" ] && [ "$(cat "$BIN/stamp")" = "$(stamp)" ]; }

build() {
	if built; then log "binaries for v$KUBE_VERSION are in $BIN"; return 0; fi
	command -v go >/dev/null || die "build needs Go"
	local work=$CACHE/build minor
	mkdir -p "$work" "$BIN"
	rm -f "$BIN/stamp"
	log "compiling kubernetes v$KUBE_VERSION (once; about 15 minutes on two cores)"
	# k8s.io/kubernetes points its k8s.io/* staging modules at directories
	# of its own repository; a module of ours requires it and points each of
	# them at the published module of the same release (v0.<minor>.<patch>).
	(
		cd "$work"
		export GOFLAGS=-mod=mod GOWORK=off
		go mod download -json "k8s.io/kubernetes@v$KUBE_VERSION" >mod.json
		local gomod
		gomod=$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p' mod.json)
		[ -f "$gomod" ] || die "cannot find the go.mod of k8s.io/kubernetes v$KUBE_VERSION"
		{
			printf 'module kubebuild\n\ngo 1.24.0\n\ngodebug default=go1.24\n\nrequire k8s.io/kubernetes v%s\n\n' "$KUBE_VERSION"
			awk -v v="v0.${KUBE_VERSION#1.}" '
				/^replace \(/ { inside = 1; next }
				inside && /^\)/ { inside = 0 }
				inside && /=>/ { printf "replace %s => %s %s\n", $1, $1, v }' "$gomod"
		} >go.mod
		printf '//go:build tools\n\npackage kubebuild\n\nimport (\n' >tools.go
		for c in kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl; do
			printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c" >>tools.go
		done
		printf ')\n' >>tools.go
		go mod tidy
		minor=${KUBE_VERSION#1.}
		minor=${minor%%.*}
		local ld="-s -w" pkg
		for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
			ld="$ld -X $pkg.gitVersion=v$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
		done
		CGO_ENABLED=0 go build -trimpath -ldflags "$ld" -o "$BIN/" \
			k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
			k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kubectl
	)
	stamp >"$BIN/stamp"
	log "built $(ls "$BIN" | grep -v stamp | tr '\n' ' ')"
}

# ------------------------------------------------------------------ images
# The pod sandbox image: a static program that waits for a signal and reaps
# (the kubelet's "pause"), packed as a Docker archive, which ctr imports and
# names as the container runtime resolves PAUSE_IMAGE.
pause_image() {
	local out=$IMAGES/pause.tar
	[ -f "$out" ] && return 0
	local w
	w=$(mktemp -d)
	mkdir -p "$w/src" "$w/root" "$IMAGES"
	cat >"$w/src/main.go" <<-'EOF'
		// Command pause holds a pod's namespaces: it waits for SIGTERM or
		// SIGINT and reaps whatever is reparented to it meanwhile.
		package main

		import (
			"os"
			"os/signal"
			"syscall"
		)

		func main() {
			c := make(chan os.Signal, 8)
			signal.Notify(c, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
			for s := range c {
				if s != syscall.SIGCHLD {
					return
				}
				for {
					pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
					if pid <= 0 || err != nil {
						break
					}
				}
			}
		}
	EOF
	printf 'module pause\n\ngo 1.24\n' >"$w/src/go.mod"
	(cd "$w/src" && CGO_ENABLED=0 GOWORK=off go build -trimpath -ldflags '-s -w' -o "$w/root/pause" .)
	tar -C "$w/root" --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$w/layer.tar" pause
	local diff config
	diff=$(sha256sum "$w/layer.tar" | cut -d' ' -f1)
	printf '{"architecture":"%s","os":"linux","config":{"Entrypoint":["/pause"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
		"$(go env GOARCH)" "$diff" >"$w/config.json"
	config=$(sha256sum "$w/config.json" | cut -d' ' -f1)
	mkdir -p "$w/archive/$diff"
	mv "$w/layer.tar" "$w/archive/$diff/layer.tar"
	mv "$w/config.json" "$w/archive/$config.json"
	printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]' "$config" "$PAUSE_IMAGE" "$diff" >"$w/archive/manifest.json"
	tar -C "$w/archive" -cf "$out.tmp" . && mv "$out.tmp" "$out"
	rm -rf "$w"
}

ctr_() { ctr --address "$CSOCK" --namespace k8s.io "$@"; }

# import_image NAME FILE-OR-DOCKER: once per image id.
import_images() {
	ctr_ images ls -q | grep -q "$PAUSE_IMAGE\$" || ctr_ images import "$IMAGES/pause.tar" >/dev/null
	local imgs=${SHIRO_KUBE_IMAGES-}
	if [ -z "$imgs" ] && [ -x "$REPO/bin/shiro" ]; then
		imgs=$("$REPO/bin/shiro" image build --if-missing 2>/dev/null | tail -n1) || imgs=""
	fi
	local img id mark
	for img in $imgs; do
		id=$(docker image inspect --format '{{.Id}}' "$img" 2>/dev/null) || die "docker has no image $img (make image builds the sandbox image)"
		mark=$CROOT/imported/$(echo "$img" | tr '/:' '__')
		if [ -f "$mark" ] && [ "$(cat "$mark")" = "$id" ] && ctr_ images ls -q | grep -q "/$img\$\|^$img\$"; then
			continue
		fi
		log "importing $img ($id) into the cluster's containerd"
		docker save "$img" | ctr_ images import - >/dev/null
		mkdir -p "$CROOT/imported"
		echo "$id" >"$mark"
	done
}

# ------------------------------------------------------------------ pki
pki() {
	mkdir -p "$PKI"
	cd "$PKI"
	[ -f ca.crt ] || openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout ca.key -out ca.crt -days 3650 -subj "/CN=shiro-kube-test-ca" 2>/dev/null
	# issue NAME SUBJECT [SANS]
	issue() {
		[ -f "$1.crt" ] && return 0
		local ext="basicConstraints=CA:FALSE
keyUsage=digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth,serverAuth"
		[ -n "${3-}" ] && ext="$ext
subjectAltName=$3"
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
		openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -out "$1.crt" \
			-extfile <(printf '%s\n' "$ext") 2>/dev/null
		rm -f "$1.csr"
	}
	issue apiserver "/CN=kube-apiserver" "DNS:localhost,IP:127.0.0.1,IP:${SERVICE_CIDR%0/24}1"
	issue apiserver-kubelet "/O=system:masters/CN=kube-apiserver-kubelet-client"
	issue admin "/O=system:masters/CN=shiro-kube-admin"
	issue kubelet "/O=system:nodes/CN=system:node:$NODE"
	issue kubelet-serving "/CN=$NODE" "DNS:$NODE,IP:127.0.0.1"
	issue tester "/CN=shiro-tester"
	[ -f sa.key ] || { openssl genrsa -out sa.key 2048 2>/dev/null && openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null; }
	# kubeconfig FILE USER CERT NAMESPACE
	kubeconfig() {
		cat >"$1" <<-EOF
			apiVersion: v1
			kind: Config
			clusters:
			- name: shiro-kube-test
			  cluster:
			    server: https://127.0.0.1:$API_PORT
			    certificate-authority: $PKI/ca.crt
			users:
			- name: $2
			  user:
			    client-certificate: $PKI/$3.crt
			    client-key: $PKI/$3.key
			contexts:
			- name: $2
			  context:
			    cluster: shiro-kube-test
			    user: $2
			    namespace: $4
			current-context: $2
		EOF
	}
	kubeconfig admin.kubeconfig admin admin default
	kubeconfig kubelet.kubeconfig kubelet kubelet default
	kubeconfig test.kubeconfig shiro-tester tester "$NAMESPACE"
	cd - >/dev/null
}

# ------------------------------------------------------------------ processes
alive() { [ -f "$RUN/$1.pid" ] && kill -0 "$(cat "$RUN/$1.pid")" 2>/dev/null; }

start() { # NAME CMD...
	local name=$1
	shift
	alive "$name" && return 0
	# fd 9 is the lock up and down hold: the daemons must not inherit it.
	setsid "$@" >"$STATE/logs/$name.log" 2>&1 </dev/null 9>&- &
	echo $! >"$RUN/$name.pid"
}

stop() { # NAME
	alive "$1" || { rm -f "$RUN/$1.pid"; return 0; }
	local pid i
	pid=$(cat "$RUN/$1.pid")
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	kill -KILL "$pid" 2>/dev/null || true
	rm -f "$RUN/$1.pid"
}

wait_until() { # SECONDS WHAT CMD...
	local limit=$1 what=$2 i
	shift 2
	for ((i = 0; i < limit * 5; i++)); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.2
	done
	log "$what did not come up within ${limit}s; its log:"
	tail -n 30 "$STATE/logs/${what%% *}.log" >&2 2>/dev/null || true
	return 1
}

# ------------------------------------------------------------------ leases
lease_pid() { echo "${SHIRO_KUBE_LEASE:-$PPID}"; }
live_leases() {
	local f n=0
	for f in "$RUN"/leases/*; do
		[ -e "$f" ] || continue
		if kill -0 "${f##*/}" 2>/dev/null; then n=$((n + 1)); else rm -f "$f"; fi
	done
	echo "$n"
}

# ------------------------------------------------------------------ up
config_files() {
	mkdir -p "$STATE/containerd" "$STATE/cni/net.d" "$STATE/kubelet" "$STATE/logs" "$STATE/volumes" "$CROOT"
	cat >"$STATE/containerd/config.toml" <<-EOF
		version = 2
		root = "$CROOT/root"
		state = "$RUN/containerd"
		disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.internal.v1.tracing", "io.containerd.tracing.processor.v1.otlp"]
		[grpc]
		  address = "$CSOCK"
		[ttrpc]
		  address = "$CSOCK.ttrpc"
		[debug]
		  address = ""
		[metrics]
		  address = ""
		[plugins."io.containerd.internal.v1.opt"]
		  path = "$CROOT/opt"
		[plugins."io.containerd.grpc.v1.cri"]
		  sandbox_image = "$PAUSE_IMAGE"
		  stream_server_address = "127.0.0.1"
		  stream_server_port = "0"
		  netns_mounts_under_state_dir = true
		  # Without CAP_SYS_RESOURCE (a machine that is itself a container)
		  # runc cannot lower oom_score_adj; clamp it rather than fail.
		  restrict_oom_score_adj = true
		  [plugins."io.containerd.grpc.v1.cri".containerd]
		    snapshotter = "overlayfs"
		    default_runtime_name = "runc"
		    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
		      runtime_type = "io.containerd.runc.v2"
		      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
		        SystemdCgroup = false
		        Root = "$RUN/runc"
		  [plugins."io.containerd.grpc.v1.cri".cni]
		    bin_dir = "/usr/lib/cni"
		    conf_dir = "$STATE/cni/net.d"
	EOF
	# A bridge that is no gateway and masquerades nothing: pods reach each
	# other and nothing else.
	cat >"$STATE/cni/net.d/10-shiro.conflist" <<-EOF
		{"cniVersion": "0.4.0", "name": "shiro-kube-test", "plugins": [{"type": "bridge", "bridge": "$BRIDGE",
		 "isGateway": false, "ipMasq": false, "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_CIDR"}]], "dataDir": "$STATE/cni/ipam"}}]}
	EOF
	cat >"$STATE/kubelet/config.yaml" <<-EOF
		apiVersion: kubelet.config.k8s.io/v1beta1
		kind: KubeletConfiguration
		address: 127.0.0.1
		port: $KUBELET_PORT
		readOnlyPort: 0
		healthzBindAddress: 127.0.0.1
		healthzPort: $KUBELET_HEALTH_PORT
		authentication:
		  anonymous: {enabled: false}
		  webhook: {enabled: true}
		  x509: {clientCAFile: "$PKI/ca.crt"}
		authorization: {mode: Webhook}
		tlsCertFile: "$PKI/kubelet-serving.crt"
		tlsPrivateKeyFile: "$PKI/kubelet-serving.key"
		cgroupDriver: cgroupfs
		containerRuntimeEndpoint: "unix://$CSOCK"
		failSwapOn: false
		failCgroupV1: false
		makeIPTablesUtilChains: false
		protectKernelDefaults: false
		resolvConf: /etc/resolv.conf
		podLogsDir: "$STATE/pod-logs"
		imageGCHighThresholdPercent: 100
		imageGCLowThresholdPercent: 99
		evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
		serializeImagePulls: false
		maxPods: 60
	EOF
}

# Standard paths the kubelet makes outside --root-dir; down removes those
# that did not exist before up.
OUTSIDE="/var/lib/kubelet /var/lib/cni /var/log/pods /var/log/containers /run/netns"

up() {
	need_root up
	deps
	build
	pause_image
	pki
	mkdir -p "$RUN/leases"
	exec 9>"$RUN/lock"
	flock 9
	touch "$RUN/leases/$(lease_pid)"
	if alive kubelet && alive kube-apiserver && kubectl get --raw /readyz >/dev/null 2>&1; then
		import_images
		exec 9>&-
		log "the cluster is up (shared); kubeconfig: $TEST_KUBECONFIG"
		return 0
	fi
	if pgrep -x kubelet >/dev/null || pgrep -x kube-apiserver >/dev/null; then
		die "another Kubernetes runs on this machine (a kubelet or kube-apiserver not started by this script): one cluster per machine"
	fi
	local t0=$SECONDS p
	mkdir -p "$STATE"
	config_files
	[ -f "$STATE/outside" ] || for p in $OUTSIDE; do [ -e "$p" ] || echo "$p"; done >"$STATE/outside"
	[ -f "$STATE/sysctl" ] || sysctl -e vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops \
		kernel.keys.root_maxkeys kernel.keys.root_maxbytes >"$STATE/sysctl" 2>/dev/null || true

	start etcd etcd --name shiro-kube-test --data-dir "$STATE/etcd" \
		--listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
		--listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-cluster "shiro-kube-test=http://127.0.0.1:$ETCD_PEER_PORT" --quota-backend-bytes 1073741824
	wait_until 30 etcd curl -sf "http://127.0.0.1:$ETCD_PORT/health"

	start kube-apiserver "$BIN/kube-apiserver" --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
		--bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" \
		--endpoint-reconciler-type none --service-cluster-ip-range "$SERVICE_CIDR" \
		--tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" --client-ca-file "$PKI/ca.crt" \
		--kubelet-client-certificate "$PKI/apiserver-kubelet.crt" --kubelet-client-key "$PKI/apiserver-kubelet.key" \
		--kubelet-certificate-authority "$PKI/ca.crt" --kubelet-preferred-address-types Hostname \
		--service-account-issuer https://kubernetes.default.svc --service-account-key-file "$PKI/sa.pub" \
		--service-account-signing-key-file "$PKI/sa.key" \
		--authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction --profiling=false
	wait_until 120 kube-apiserver kubectl get --raw /readyz

	start containerd containerd --config "$STATE/containerd/config.toml"
	wait_until 30 containerd ctr --address "$CSOCK" version
	import_images

	start kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig "$ADMIN_KUBECONFIG" \
		--authentication-kubeconfig "$ADMIN_KUBECONFIG" --authorization-kubeconfig "$ADMIN_KUBECONFIG" \
		--bind-address 127.0.0.1 --secure-port "$KCM_PORT" --leader-elect=false \
		--service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
		--use-service-account-credentials=false --profiling=false
	start kube-scheduler "$BIN/kube-scheduler" --kubeconfig "$ADMIN_KUBECONFIG" \
		--authentication-kubeconfig "$ADMIN_KUBECONFIG" --authorization-kubeconfig "$ADMIN_KUBECONFIG" \
		--bind-address 127.0.0.1 --secure-port "$SCHED_PORT" --leader-elect=false --profiling=false
	start kubelet "$BIN/kubelet" --config "$STATE/kubelet/config.yaml" --kubeconfig "$PKI/kubelet.kubeconfig" \
		--root-dir "$STATE/kubelet" --cert-dir "$STATE/kubelet/pki" --hostname-override "$NODE"
	wait_until 120 "kubelet (node Ready)" sh -c \
		"'$BIN/kubectl' --kubeconfig '$ADMIN_KUBECONFIG' get node $NODE -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -qx True"

	# Claims are served by a small provisioner of the repository's: a local
	# volume (a directory under the state) per claim, which honours fsGroup.
	(cd "$REPO" && CGO_ENABLED=0 GOWORK=off go build -o "$STATE/shiro-kube-provisioner" ./integration/kubecluster/provisioner)
	start provisioner "$STATE/shiro-kube-provisioner" --kubeconfig "$ADMIN_KUBECONFIG" \
		--class "$STORAGE_CLASS" --dir "$STATE/volumes" --node "$NODE"
	setup_objects
	exec 9>&-
	log "the cluster is up in $((SECONDS - t0))s; kubeconfig: $TEST_KUBECONFIG"
}

# setup_objects makes the storage class and the tests' namespace, whose
# user holds exactly the rights docs/kubernetes.md lists.
setup_objects() {
	wait_until 60 "kube-controller-manager (default service account)" kubectl -n default get serviceaccount default
	kubectl apply -f - >/dev/null <<-EOF
		apiVersion: storage.k8s.io/v1
		kind: StorageClass
		metadata:
		  name: $STORAGE_CLASS
		  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
		provisioner: shiro-kube-test/local
		reclaimPolicy: Delete
		volumeBindingMode: Immediate
		---
		apiVersion: v1
		kind: Namespace
		metadata:
		  name: $NAMESPACE
		  labels:
		    pod-security.kubernetes.io/enforce: restricted
		---
		apiVersion: rbac.authorization.k8s.io/v1
		kind: Role
		metadata: {name: shiro, namespace: $NAMESPACE}
		rules:
		- apiGroups: [""]
		  resources: [pods, persistentvolumeclaims, configmaps]
		  verbs: [get, list, watch, create, delete]
		- apiGroups: [""]
		  resources: [pods/exec]
		  verbs: [create, get]
		- apiGroups: [networking.k8s.io]
		  resources: [networkpolicies]
		  verbs: [get, list, create, delete]
		---
		apiVersion: rbac.authorization.k8s.io/v1
		kind: RoleBinding
		metadata: {name: shiro-tester, namespace: $NAMESPACE}
		roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: shiro}
		subjects:
		- {apiGroup: rbac.authorization.k8s.io, kind: User, name: shiro-tester}
	EOF
}

# ------------------------------------------------------------------ down
down() {
	need_root down
	mkdir -p "$RUN/leases"
	exec 9>"$RUN/lock"
	flock 9
	if [ "${1-}" = --force ]; then
		rm -f "$RUN"/leases/*
	else
		rm -f "$RUN/leases/$(lease_pid)"
		local n
		n=$(live_leases)
		if [ "$n" -gt 0 ]; then
			log "the cluster stays up: $n other user(s) hold it"
			return 0
		fi
	fi
	local t0=$SECONDS
	if alive kube-apiserver && alive kubelet; then
		kubectl delete namespace "$NAMESPACE" --wait=false >/dev/null 2>&1 || true
		kubectl delete pods --all --all-namespaces --grace-period=1 --timeout=60s >/dev/null 2>&1 || true
	fi
	stop provisioner
	stop kube-scheduler
	stop kube-controller-manager
	stop kubelet
	if [ -S "$CSOCK" ]; then
		local t c
		for t in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks kill -s KILL "$t" >/dev/null 2>&1 || true; done
		for t in $(ctr_ tasks ls -q 2>/dev/null); do ctr_ tasks delete -f "$t" >/dev/null 2>&1 || true; done
		for c in $(ctr_ containers ls -q 2>/dev/null); do ctr_ containers delete "$c" >/dev/null 2>&1 || true; done
	fi
	stop containerd
	stop kube-apiserver
	stop etcd
	# Whatever an abnormal end left: processes in the kubelet's cgroups and
	# shims of this containerd, each found by that identity and killed by pid.
	local p f
	for f in /sys/fs/cgroup/pids/kubepods /sys/fs/cgroup/pids/kubepods/*/ /sys/fs/cgroup/pids/kubepods/*/*/ /sys/fs/cgroup/pids/kubepods/*/*/*/; do
		[ -f "$f/cgroup.procs" ] || continue
		for p in $(cat "$f/cgroup.procs"); do kill -KILL "$p" 2>/dev/null || true; done
	done
	for p in $(pgrep -f "containerd-shim.* -address $CSOCK" || true); do kill -KILL "$p" 2>/dev/null || true; done
	# Mounts under the state and the CNI network namespaces, deepest first.
	for p in $(awk -v s="$CACHE/" -v r="$RUN/" 'index($5, s) == 1 || index($5, r) == 1 { print $5 }' /proc/self/mountinfo | sort -r); do
		umount -l "$p" 2>/dev/null || true
	done
	for p in /run/netns/cni-*; do [ -e "$p" ] && { umount "$p" 2>/dev/null || true; rm -f "$p"; }; done
	ip link show "$BRIDGE" >/dev/null 2>&1 && ip link delete "$BRIDGE"
	for f in /sys/fs/cgroup/*/kubepods; do [ -d "$f" ] && find "$f" -depth -type d -exec rmdir {} + 2>/dev/null; done
	if [ -f "$STATE/sysctl" ]; then sed 's/ //g' "$STATE/sysctl" | xargs -r sysctl -q -w 2>/dev/null || true; fi
	if [ -f "$STATE/outside" ]; then while read -r p; do [ -n "$p" ] && rm -rf "$p"; done <"$STATE/outside"; fi
	rm -rf "$STATE" "$RUN/containerd" "$RUN/runc" "$RUN"/*.pid "$CSOCK" "$CSOCK.ttrpc"
	log "down in $((SECONDS - t0))s"
}

status() {
	local n
	for n in etcd kube-apiserver containerd kube-controller-manager kube-scheduler kubelet provisioner; do
		if alive "$n"; then echo "$n: running (pid $(cat "$RUN/$n.pid"))"; else echo "$n: stopped"; fi
	done
	[ -d "$RUN/leases" ] && echo "leases: $(live_leases)"
	if alive kube-apiserver && kubectl get --raw /readyz >/dev/null 2>&1; then
		echo "api: ready at https://127.0.0.1:$API_PORT; kubeconfig $TEST_KUBECONFIG"
	fi
}

case ${1-} in
build) build ;;
up) up ;;
down) shift; down "$@" ;;
status) status ;;
kubeconfig) echo "$TEST_KUBECONFIG" ;;
admin-kubeconfig) echo "$ADMIN_KUBECONFIG" ;;
*)
	sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
	;;
esac
