// Package watch tells the daemon when its configuration directory may have
// changed, and takes the snapshots that decide whether it really did.
//
// A Watcher watches a directory (or the directory of a single file) with
// fsnotify, and that directory's parent, so that editors' rename-on-save,
// delete-and-recreate of the whole directory and Kubernetes-style "..data"
// symlink swaps are all seen. Events on editor temp files (".swp", "~",
// "#…#", ".tmp", dotfiles) and on anything that is not a *.hcl file are
// ignored, so rpd's own writes under ".rpd/" never wake it. Bursts are
// debounced (100 ms of quiet, at most 1 s after the first event); a jittered
// periodic resync, and an immediate one after a watcher error or overflow,
// are the safety net; when no fsnotify watcher can be created it polls.
//
// A Watcher only triggers: it does not read files. Take reads a Snapshot
// (names and contents of the *.hcl files, and their hash); the daemon
// compares hashes, so an unchanged directory costs one snapshot and nothing
// else.
//
// Not for: loading or validating configuration (package spec), deciding
// what a reload does (package daemon).
//
// Start reading at Watcher.Run, then Take.
package watch
