package main

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is rpd's version, set at build time with
//
//	go build -ldflags "-X main.version=v1.2.3" ./cmd/rpd
var version = "dev"

// buildInfo is what "rpd version" reports.
type buildInfo struct {
	Version   string `json:"version"`
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"`
	Module    string `json:"module,omitempty"`
	Revision  string `json:"revision,omitempty"`
	Time      string `json:"time,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
}

func readBuildInfo() buildInfo {
	bi := buildInfo{
		Version:   version,
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return bi
	}
	bi.Module = info.Main.Path
	if bi.Version == "dev" && info.Main.Version != "" && info.Main.Version != "(devel)" {
		bi.Version = info.Main.Version
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			bi.Revision = s.Value
		case "vcs.time":
			bi.Time = s.Value
		case "vcs.modified":
			bi.Modified = s.Value == "true"
		}
	}
	return bi
}

func runVersion(_ context.Context, e *env, args []string) int {
	fs := newFlagSet("version", "[options]", "Prints the version of rpd, the Go toolchain that built it and, when built\nfrom a git checkout, the commit.")
	asJSON := fs.Bool("json", false, "print the version information as JSON")
	if code, ok := parseFlags(e, fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		msg := fmt.Sprintf("rpd version: unexpected argument %q: version takes only options", fs.Arg(0))
		if *asJSON {
			writeJSONError(e.stdout, msg, nil)
		} else {
			fmt.Fprintln(e.stderr, msg)
		}
		return 1
	}
	bi := readBuildInfo()
	if *asJSON {
		b, _ := json.MarshalIndent(bi, "", "  ")
		fmt.Fprintf(e.stdout, "%s\n", b)
		return 0
	}
	fmt.Fprintf(e.stdout, "rpd %s\n", bi.Version)
	fmt.Fprintf(e.stdout, "%s %s\n", bi.GoVersion, bi.Platform)
	if bi.Revision != "" {
		mod := ""
		if bi.Modified {
			mod = " (modified)"
		}
		fmt.Fprintf(e.stdout, "commit %s%s %s\n", bi.Revision, mod, bi.Time)
	}
	return 0
}
