// Package copymode holds both ends of copy mode (--workspace copy), where
// the sandbox works on a copy of the workspace in its own storage and the
// user's directory changes only when the sandbox's changes are applied.
//
// In the sandbox, the helper runs the commands of Main (`helper ws ...`):
// a built-in file tool on the copy, with the same os.Root jail and the same
// texts as on the host; a manifest of the copy (the walker's files with
// their git blob hashes); a tar of named files out of the copy, or into
// it; removals; a file read for approval previews.
//
// On the host, Remote calls them through any sandbox.Sandbox (one Run per
// call, so every backend with a helper carries them: Docker, Kubernetes),
// and Wrap turns a built-in tool into one that runs in the sandbox.
//
// Nothing the sandbox says is trusted for what reaches the host: hashes in
// a manifest only say which files to fetch; the host hashes what it
// receives itself.
package copymode
