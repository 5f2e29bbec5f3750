package docker

import "github.com/thefold/thefold/services/sandbox/internal/backend/tarsync"

// The workspace moves between the host and the container as tar streams through the Engine
// API (never a bind mount), so the backend works when the sandbox service itself runs in a
// container: in through the command's own exec (its stdin, unpacked by tar in the container:
// oneExec) or, for a command with stdin of its own, through the archive API; out through the
// archive API (package tarsync writes and reads the streams). Each Run copies the whole
// workspace in and the whole /workspace back out: simple and correct; copying only what
// changed is an optimisation left for later.

// sandboxID owns every file copied into the container so the sandbox user can change them.
const sandboxID = tarsync.Owner
