// Package helper is the in-container side of shiro's sandbox, run by hidden
// subcommands of the static shiro binary copied into the container:
//
//   - Init is the container's PID 1: it reaps zombies and exits when the
//     container has been idle for a while.
//   - Serve answers one host session over a byte stream pair (the stdin and
//     stdout of one docker exec) with the protocol in proto.go; Client is the
//     host's end of it.
//   - Runner starts one command in its own process group with a marker in
//     its environment, streams its output and kills its whole tree. The host
//     uses it too (sandbox/local).
//   - KillMarker is the fallback a fresh exec runs when the channel is broken.
//
// Process management needs Linux (/proc); elsewhere Runner, Init and
// KillMarker return errors.ErrUnsupported.
package helper
