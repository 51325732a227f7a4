// Package kube is a sandbox.Sandbox on Kubernetes, through client-go: one
// pod and one persistent volume claim per workspace, in one namespace,
// named and labelled as the Docker backend names its containers (and
// carrying the same kind of owner token, sandbox/owner).
//
//   - The pod runs as the user's uid:gid throughout (no capabilities, no
//     privilege escalation, the runtime's seccomp profile, no service
//     account token), with memory and CPU limits and a memory-backed /tmp
//     below the memory limit; restartPolicy Never.
//   - The helper is delivered without a registry: its bytes are the binary
//     data of immutable config maps named by its hash, which a setup
//     container joins into an emptyDir the sandbox container mounts
//     read-only; PID 1 is the helper's init from there (decision 0024).
//   - The claim holds the workspace at the same absolute path as on the
//     host (empty at first: copying it in and out is the caller's), HOME
//     and the helper's state, so they outlive the pod: an idle pod ends
//     and the next session makes another.
//   - A session is one long pods/exec (WebSocket, SPDY fallback) of
//     `helper serve` carrying the helper protocol, as sandbox/docker's
//     channel does over a Docker exec; in ask mode a second exec carries
//     the egress proxy's connections.
//
// It is the only package that imports k8s.io modules (with integration).
package kube
