// Package helper is the in-container side of shiro's sandbox, run by hidden
// subcommands of the static shiro binary copied into the container:
//
//   - Init is the container's PID 1: it reaps zombies, kills every process
//     once no session is open, and exits when no session has been open for
//     a while.
//   - Serve answers one host session over a byte stream pair (the stdin and
//     stdout of one docker exec) with the protocol in proto.go; Client is the
//     host's end of it.
//   - Runner starts commands for a session, each under a reaper (Reap): a
//     child subreaper that keeps everything the command starts in its
//     subtree and kills that subtree on request. It also gives each command
//     its own process group and a marker in its environment, extra layers
//     of the kill. The host uses it too (sandbox/local).
//   - KillSession is the fallback a fresh exec runs when the channel does
//     not confirm a kill.
//
// Process management needs Linux (/proc); elsewhere Runner, Init, Reap and
// the kills return errors.ErrUnsupported.
package helper
