// Package gitshadow keeps git on the host from ever running what a
// process in the sandbox writes into a repository's git metadata.
//
// The sandbox never sees the workspace repository's git directory
// writable: a container-only volume (the shadow) is mounted at its path,
// holding a copy of the mirrored files (HEAD, the index, refs, merge state,
// and configuration and hooks one way), with alternates into the host's
// objects mounted read-only. A Syncer copies the host's changes into the
// shadow before each command and, after it, imports what the sandbox
// changed in objects, refs, HEAD, the index and merge state, each checked
// (object contents against their ids, ref names and values, index paths)
// and applied only when the host did not change the same item meanwhile.
// Configuration, hooks and everything else the sandbox writes there stay
// in the sandbox.
//
// A repository the sandbox creates in the workspace cannot be prevented
// by a mount. A Scanner finds, after every command, whatever git on the
// host would take for a repository (a git directory's HEAD, a gitfile, a
// .git symlink); the caller moves it to storage only the sandbox sees and
// leaves a symlink to it, which leads nowhere on the host.
//
// Discover finds a workspace's repository as git does, without running
// git and without following a symlinked .git. The in-sandbox half runs
// in the helper (HelperMain: export, import, keep).
package gitshadow
