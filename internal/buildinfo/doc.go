// Package buildinfo says which rpd this is: the release it was stamped
// with, the VCS revision it was built from and the Go toolchain that built
// it. "rpd version", GET /v1/status and the rpd_build_info metric all read
// it from here, so that the three never disagree.
//
// A release build stamps the version and the revision with the linker:
//
//	go build -trimpath -ldflags "-X github.com/rpdhq/rpd/internal/buildinfo.version=v1.2.3 \
//	  -X github.com/rpdhq/rpd/internal/buildinfo.revision=$(git rev-parse HEAD)" ./cmd/rpd
//
// Without -X the revision comes from the Go toolchain's own VCS stamping
// (go build in a git checkout, -buildvcs=auto). A build that has neither (a
// git worktree, whose .git is a file the toolchain does not recognise, or
// GOFLAGS=-buildvcs=false) falls back to the HEAD of the source checkout it
// was compiled in, when that checkout is still on this machine, and says so
// (Info.RevisionSource "checkout"): a developer's binary then still names
// its commit, and a release build (-trimpath) never looks at the disk.
//
// It is not a place for configuration or feature flags.
package buildinfo
